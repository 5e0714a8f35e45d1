"""OHLCV bars: import common CSV exports, validate, store and load as parquet.

A bar table has a UTC `DatetimeIndex` named `timestamp` and float columns
open/high/low/close/volume. Everything that reads market data goes through
`validate_bars`, so a NaN, a negative price, a duplicated timestamp or a gap is
reported with the file name and the fix instead of silently skewing a backtest.
"""
from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from envs.errors import InputError

PRICE_COLUMNS = ("open", "high", "low", "close")
BAR_COLUMNS = (*PRICE_COLUMNS, "volume")
TIMEFRAMES: dict[str, pd.Timedelta] = {
    "1m": pd.Timedelta(minutes=1),
    "5m": pd.Timedelta(minutes=5),
    "15m": pd.Timedelta(minutes=15),
    "1h": pd.Timedelta(hours=1),
    "4h": pd.Timedelta(hours=4),
    "1d": pd.Timedelta(days=1),
}
GAP_POLICIES = ("error", "ffill", "drop")
# Columns that different exporters use for the bar's opening time.
_TIME_COLUMNS = ("timestamp", "date", "datetime", "time", "open_time", "unix", "open time")
_VOLUME_COLUMNS = ("volume", "vol", "volume_base", "base_volume")
# CryptoDataDownload has `volume_btc` (base units) next to `volume` (quote currency): prefer base.
_BASE_VOLUME = re.compile(r"^volume[ _](?!usd|usdt|usdc|eur|quote)[a-z0-9]+$")


def timeframe_delta(timeframe: str) -> pd.Timedelta:
    """The bar length of a timeframe name, or an InputError listing the known ones."""
    try:
        return TIMEFRAMES[timeframe]
    except KeyError:
        raise InputError(f"unknown timeframe {timeframe!r}: use one of {', '.join(TIMEFRAMES)}") from None


def bars_per_year(timeframe: str) -> float:
    """Crypto trades around the clock, so a year is 365 days of bars."""
    return pd.Timedelta(days=365) / timeframe_delta(timeframe)


@dataclass(frozen=True)
class GapReport:
    """Missing bars found in a series: how many, and the longest hole."""

    missing_bars: int
    longest_gap: pd.Timedelta
    longest_gap_start: pd.Timestamp | None

    def describe(self) -> str:
        if not self.missing_bars:
            return "no gaps"
        return (f"{self.missing_bars} missing bars, longest gap {self.longest_gap} "
                f"after {self.longest_gap_start}")


def bar_spacing(index: pd.DatetimeIndex) -> pd.Timedelta:
    """The most common distance between consecutive bars: the data's own timeframe, gaps or not."""
    deltas = pd.Series(index[1:] - index[:-1])
    return deltas.mode().min() if len(deltas) else pd.Timedelta(0)


def _duration(delta: pd.Timedelta) -> str:
    seconds = int(delta.total_seconds())
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def check_spacing(index: pd.DatetimeIndex, timeframe: str, source: str) -> None:
    """A declared timeframe must be the bars' spacing: annualization and every Sharpe depend on it.

    Bars closer together than the timeframe always contradict it. Bars further apart do only when most
    of them are (a few long deltas are gaps, reported as such)."""
    if len(index) < 2:
        return
    step = timeframe_delta(timeframe)
    deltas = index[1:] - index[:-1]
    spacing = bar_spacing(index)
    coarser = spacing > step and len(deltas) >= 2 and (deltas == spacing).mean() > 0.5
    if spacing < step or coarser:
        actual = next((name for name, delta in TIMEFRAMES.items() if delta == spacing), _duration(spacing))
        raise InputError(f"{source}: timeframe {timeframe!r} contradicts the data, whose bars are {actual} apart: "
                         f"use timeframe {actual}")


def find_gaps(index: pd.DatetimeIndex, timeframe: str) -> GapReport:
    step = timeframe_delta(timeframe)
    if len(index) < 2:
        return GapReport(0, pd.Timedelta(0), None)
    deltas = index[1:] - index[:-1]
    missing = ((deltas // step) - 1).to_numpy().clip(min=0)
    if not missing.any():
        return GapReport(0, pd.Timedelta(0), None)
    worst = int(np.argmax(deltas))
    return GapReport(int(missing.sum()), deltas[worst] - step, index[worst])


def _read_text_table(path: Path) -> pd.DataFrame:
    """Read a CSV export, skipping an attribution line such as CryptoDataDownload's."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError(f"{path}: file not found: check the path") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a UTF-8 text CSV: export the bars as CSV") from None
    lines = text.splitlines()
    if not lines:
        raise InputError(f"{path}: the file is empty: export the bars again")
    first = lines[0].lower()
    header_markers = ("open", "close")
    # CryptoDataDownload puts a line of attribution above the header.
    if not all(m in first for m in header_markers) and len(lines) > 1 and all(
        m in lines[1].lower() for m in header_markers
    ):
        lines = lines[1:]
    body = "\n".join(lines)
    has_header = any(ch.isalpha() for ch in lines[0].replace("e+", "").replace("E+", ""))
    try:
        frame = pd.read_csv(io.StringIO(body), sep=None, engine="python", header=0 if has_header else None)
    except (pd.errors.ParserError, csv_error()) as exc:
        raise InputError(f"{path}: cannot parse as CSV ({exc}): check the delimiter and quoting") from None
    if not has_header:
        frame = _name_headerless_columns(frame, path)
    frame.columns = [str(c).strip().lower() for c in frame.columns]
    return frame


def csv_error() -> type[Exception]:
    import csv

    return csv.Error


def _name_headerless_columns(frame: pd.DataFrame, path: Path) -> pd.DataFrame:
    """Binance/Bybit kline dumps have no header: open_time, open, high, low, close, volume, ..."""
    if frame.shape[1] < 6:
        raise InputError(f"{path}: a header-less file needs at least 6 columns "
                         "(open_time, open, high, low, close, volume): add a header row")
    names = ["open_time", "open", "high", "low", "close", "volume"]
    return frame.rename(columns=dict(enumerate(names)))


def _parse_times(values: pd.Series, path: Path, column: str) -> pd.DatetimeIndex:
    if pd.api.types.is_numeric_dtype(values):
        numbers = values.astype("int64")
        # Epoch seconds, milliseconds or microseconds, decided by magnitude.
        magnitude = numbers.abs().max()
        unit = "s" if magnitude < 10**11 else "ms" if magnitude < 10**14 else "us"
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


def import_csv(path: str | Path, timeframe: str, gaps: str = "ffill") -> tuple[pd.DataFrame, GapReport]:
    """Read a CSV export (CryptoDataDownload, exchange kline dumps, generic OHLCV) into validated bars.

    Rows may come newest first; they are sorted. Exact duplicate rows are dropped, conflicting
    duplicates are an error. Gaps are handled by `gaps`: 'error', 'ffill' (flat bars at the last
    close with zero volume, so the agent can trade nothing it could not have traded) or 'drop'.
    """
    path = Path(path)
    if gaps not in GAP_POLICIES:
        raise InputError(f"unknown gap policy {gaps!r}: use one of {', '.join(GAP_POLICIES)}")
    frame = _read_text_table(path)
    time_column = next((c for c in _TIME_COLUMNS if c in frame.columns), None)
    if time_column is None:
        raise InputError(f"{path}: no time column (looked for {', '.join(_TIME_COLUMNS)}); "
                         f"found {', '.join(map(str, frame.columns))}: rename the bar time column to 'timestamp'")
    missing = [c for c in PRICE_COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(f"{path}: missing price column(s) {', '.join(missing)}: "
                         "the file needs open, high, low, close")
    volume_column = next((c for c in frame.columns if _BASE_VOLUME.match(c)), None) or next(
        (c for c in _VOLUME_COLUMNS if c in frame.columns), None)
    bars = pd.DataFrame(index=_parse_times(frame[time_column], path, time_column))
    for column in PRICE_COLUMNS:
        bars[column] = _numeric(frame[column], path, column)
    bars["volume"] = _numeric(frame[volume_column], path, volume_column) if volume_column else 0.0
    bars.index.name = "timestamp"
    bars = bars.sort_index()
    bars = drop_exact_duplicates(bars, path)
    report = find_gaps(bars.index, timeframe)
    bars = regularize(bars, timeframe, gaps, report, path)
    return validate_bars(bars, source=str(path), timeframe=timeframe, allow_gaps=gaps == "drop"), report


def _numeric(values: pd.Series, path: Path, column: str) -> np.ndarray:
    numbers = pd.to_numeric(values, errors="coerce")
    bad = numbers.isna() & values.notna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(f"{path}: column {column!r} row {row + 1}: {values.iloc[row]!r} is not a number")
    return numbers.to_numpy(dtype=np.float64)


def drop_exact_duplicates(bars: pd.DataFrame, path: Path) -> pd.DataFrame:
    """Keep one of rows repeated to the letter; two different bars at one timestamp are an error."""
    duplicated_time = bars.index.duplicated(keep="first")
    if not duplicated_time.any():
        return bars
    frame = bars.reset_index()
    exact = frame.duplicated(keep="first").to_numpy()
    if (duplicated_time & ~exact).any():
        stamp = bars.index[np.flatnonzero(duplicated_time & ~exact)[0]]
        raise InputError(f"{path}: two different bars share the timestamp {stamp}: "
                         "remove one of them from the export")
    return bars[~duplicated_time]


def regularize(bars: pd.DataFrame, timeframe: str, gaps: str, report: GapReport, path: Path) -> pd.DataFrame:
    """Check the timeframe grid and apply the gap policy (shared by the CSV importer and the fetcher)."""
    off_grid = (bars.index - bars.index[0]) % timeframe_delta(timeframe) != pd.Timedelta(0)
    if off_grid.any():
        raise InputError(f"{path}: bar at {bars.index[np.argmax(off_grid)]} is not on the {timeframe} grid: "
                         "check --timeframe")
    check_spacing(bars.index, timeframe, f"{path} (--timeframe)")
    if not report.missing_bars or gaps == "drop":
        return bars
    if gaps == "error":
        raise InputError(f"{path}: {report.describe()}: re-import with --gaps ffill (flat bars) or --gaps drop")
    full = pd.date_range(bars.index[0], bars.index[-1], freq=timeframe_delta(timeframe), name="timestamp")
    filled = bars.reindex(full)
    close = filled["close"].ffill()
    for column in ("open", "high", "low"):
        filled[column] = filled[column].fillna(close)
    filled["close"] = close
    filled["volume"] = filled["volume"].fillna(0.0)
    return filled


def validate_bars(bars: pd.DataFrame, source: str, timeframe: str | None = None,
                  allow_gaps: bool = False) -> pd.DataFrame:
    """Check the invariants every consumer relies on; return the bars as float64 columns."""
    missing = [c for c in BAR_COLUMNS if c not in bars.columns]
    if missing:
        raise InputError(f"{source}: missing column(s) {', '.join(missing)}: re-import with "
                         "python -m experiments.data import")
    if not isinstance(bars.index, pd.DatetimeIndex) or bars.index.tz is None:
        raise InputError(f"{source}: the index must be UTC timestamps: re-import with python -m experiments.data import")
    if len(bars) < 2:
        raise InputError(f"{source}: only {len(bars)} bar(s): the environment needs a price history")
    if not bars.index.is_monotonic_increasing or bars.index.has_duplicates:
        raise InputError(f"{source}: timestamps are not strictly increasing: sort and de-duplicate the bars")
    values = bars[list(BAR_COLUMNS)].to_numpy(dtype=np.float64)
    problems = {
        "NaN or infinite values": ~np.isfinite(values).all(axis=1),
        "non-positive prices": (values[:, :4] <= 0).any(axis=1),
        "negative volume": values[:, 4] < 0,
        "high below open/close/low": values[:, 1] < values[:, [0, 2, 3]].max(axis=1) - 1e-9,
        "low above open/close": values[:, 2] > values[:, [0, 3]].min(axis=1) + 1e-9,
    }
    for what, rows in problems.items():
        if rows.any():
            first = int(np.flatnonzero(rows)[0])
            raise InputError(f"{source}: {what} in {int(rows.sum())} bar(s), first at {bars.index[first]}: "
                             "fix or drop those rows in the source export and re-import")
    if timeframe is not None:
        check_spacing(bars.index, timeframe, source)
    if timeframe is not None and not allow_gaps:
        report = find_gaps(bars.index, timeframe)
        if report.missing_bars:
            raise InputError(f"{source}: {report.describe()}: re-import with --gaps ffill or --gaps drop")
    return bars[list(BAR_COLUMNS)].astype(np.float64)


def save_bars(bars: pd.DataFrame, path: str | Path, symbol: str, timeframe: str) -> Path:
    """Write bars as parquet with the symbol and timeframe in the file's metadata."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    frame = bars.copy()
    frame.attrs = {"symbol": symbol, "timeframe": timeframe}
    frame.to_parquet(tmp)
    tmp.replace(path)  # never leave a half-written parquet behind
    return path


def load_bars(path: str | Path, timeframe: str | None = None) -> pd.DataFrame:
    """Load and validate a bars parquet written by `save_bars` (or any OHLCV parquet)."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: data file not found: import it with "
                         f"python -m experiments.data import YOUR.csv --symbol SYMBOL --timeframe TF")
    try:
        bars = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several unrelated types for a corrupt file
        raise InputError(f"{path}: not a readable parquet file ({type(exc).__name__}): re-import it") from None
    if "timestamp" in bars.columns:
        bars = bars.set_index(pd.DatetimeIndex(pd.to_datetime(bars.pop("timestamp"), utc=True)))
    declared = bars.attrs.get("timeframe")
    if timeframe and declared and timeframe != declared:
        raise InputError(f"{path}: holds {declared} bars (file metadata) but timeframe {timeframe!r} was asked for: "
                         f"set environment.env_config.timeframe: {declared}, or leave it out")
    return validate_bars(bars, source=str(path), timeframe=timeframe or declared)
