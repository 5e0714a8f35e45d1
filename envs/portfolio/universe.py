"""A universe: the bars of N assets on one calendar, read from one file per asset or from one wide table.

The calendar is the union of the assets' bar times, from the first bar time at which two assets trade: before that
there is nothing to allocate between. Each asset is listed from its first bar to its last; inside that span a
missing bar (another asset's weekend, an outage) is a flat bar at the last close, and outside it the asset cannot
be traded. Prices outside the span are filled with the nearest listed price only so that arithmetic on them stays
finite: an unlisted asset is never held (envs.portfolio.book sells an asset at its last close).

A universe whose files carry only closes (a wide table of `ASSET:close` columns, the OLPS data sets) is close-only:
a bar's open is the previous close, so a decision at close t fills at close t. Its feature list may name only what
reads the close alone (`close_only_refusal`).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from envs.datasets import digest_of
from envs.errors import InputError
from envs.portfolio.universe_table import check_table
from envs.trading.data import BAR_COLUMNS, load_bars
from envs.trading.features.spec import Block, Item, TransformFeature
from envs.trading.features.talib_functions import TaFeature, input_columns
from envs.trading.features.transforms import TRANSFORMS
from envs.trading.symbols import canonical_symbol


@dataclass(frozen=True)
class Universe:
    """N assets' bars on one calendar (rows) in the universe's order (columns)."""

    symbols: tuple[str, ...]
    timestamps: pd.DatetimeIndex
    opens: np.ndarray        # (T, N) finite everywhere (see the module docstring)
    closes: np.ndarray       # (T, N)
    listed: np.ndarray       # (T, N) bool: the row is inside the asset's span of bars
    frames: tuple[pd.DataFrame, ...]  # each asset's bars on the calendar rows of its span (flat bars in its holes)
    timeframe: str
    close_only: bool
    source: str              # what the universe was read from, for messages and reports

    @property
    def n_assets(self) -> int:
        return len(self.symbols)

    def window_digest(self, windows: tuple[tuple[int, int], ...]) -> str:
        """A digest of the assets' prices on `windows` (rows) and their times: the trials ledger's key, so the same
        closes saved again, or other bars outside the windows, are the same attempts."""
        parts = [np.ascontiguousarray(a[start:stop]).tobytes() + self.timestamps[start:stop].asi8.tobytes()
                 for start, stop in windows for a in (self.opens, self.closes)]
        return digest_of(b"".join([",".join(self.symbols).encode(), *parts]))

    @property
    def label(self) -> str:
        """A short name for its MLflow datasets: the size, the first assets and the timeframe."""
        return f"{self.n_assets}-assets_{'-'.join(self.symbols[:3])}_{self.timeframe}"

    @property
    def first_rows(self) -> np.ndarray:
        return np.argmax(self.listed, axis=0)

    @property
    def last_rows(self) -> np.ndarray:
        """Each asset's last listed row, or T (past the end) for one listed to the calendar's end: only an asset
        whose bars end inside the calendar is sold at its last close."""
        n = len(self.timestamps)
        last = n - 1 - np.argmax(self.listed[::-1], axis=0)
        return np.where(last == n - 1, n, last)


def asset_difference(expected: tuple[str, ...] | list[str], given: set[str] | list[str]) -> str:
    """"missing A, B; extra C" between a model's assets and the ones given ("" when they are the same set)."""
    missing, extra = sorted(set(expected) - set(given)), sorted(set(given) - set(expected))
    return "; ".join(part for part in (f"missing {', '.join(missing)}" if missing else "",
                                       f"extra {', '.join(extra)}" if extra else "") if part)


def close_only_refusal(items: tuple[Item, ...], where: str) -> None:
    """A close-only universe accepts features whose only input is the close; the first one that reads open, high, low
    or volume is refused in one line naming it."""
    for item in items:
        if isinstance(item, TransformFeature):
            needs = set(TRANSFORMS[item.name].needs) | {str(dict(item.params).get("input", "close"))}
            needs = {"volume" if need == "log_volume" else "close" if need == "log_close" else need for need in needs}
            label = item.label
        elif isinstance(item, TaFeature):
            needs, label = set(input_columns(item.name)), item.label
        elif isinstance(item, Block):
            raise InputError(f"{where}: the {item.kind}: block {item.label!r} is not available for a close-only "
                             "universe: use features of the close (log_return, volatility, trend, zscore, log_rsi, "
                             "{ta: RSI}, {ta: EMA}, ...)")
        extra = sorted(needs - {"close"})
        if extra:
            raise InputError(f"{where}: feature {label!r} reads {', '.join(extra)}, which a close-only universe does "
                             "not have: use features of the close only (log_return, volatility, trend, zscore, "
                             "log_rsi, {ta: RSI}, {ta: EMA}, ...), or give files with OHLCV bars")


def load_universe(paths: list[str] | None, table: str | None, assets: list[str] | None,
                  timeframe: str | None) -> Universe:
    """The universe of one bars file per asset (`paths`) or of a wide table's named `assets`."""
    if table:
        checked = check_table(table, assets, timeframe)
        frames, source, close_only = checked.frames, table, checked.close_only
    else:
        frames, source, close_only = file_frames(paths or []), ", ".join(paths or []), False
    return build_universe(frames, source, close_only)


def build_universe(frames: dict[str, pd.DataFrame], source: str, close_only: bool) -> Universe:
    """Put each asset's bars (OHLCV, or close only) on the union calendar; see the module docstring."""
    calendar = universe_calendar(frames, source)
    timeframe = next(iter(frames.values())).attrs.get("timeframe")
    on_calendar, opens, closes, listed = [], [], [], []
    for frame in frames.values():
        span = calendar[(calendar >= frame.index[0]) & (calendar <= frame.index[-1])]
        # on the calendar's unit: a reindex across units (a parquet's microseconds) takes ~10 ms an asset, ~300x
        filled = _flat_bars_in_holes(frame.set_axis(frame.index.as_unit("ns")).reindex(span), close_only)
        filled.attrs = {}  # its values, not its file's bytes, name it from here on (features.store.bars_digest)
        on_calendar.append(filled)
        where = calendar.get_indexer(span)
        mask = np.zeros(len(calendar), dtype=bool)
        mask[where] = True
        listed.append(mask)
        opens.append(_spread(filled["open"].to_numpy(), where, len(calendar)))
        closes.append(_spread(filled["close"].to_numpy(), where, len(calendar)))
    return Universe(symbols=tuple(frames), timestamps=calendar, opens=np.stack(opens, axis=1),
                    closes=np.stack(closes, axis=1), listed=np.stack(listed, axis=1), frames=tuple(on_calendar),
                    timeframe=str(timeframe), close_only=close_only, source=source)


def universe_calendar(frames: dict[str, pd.DataFrame], source: str) -> pd.DatetimeIndex:
    """The calendar `build_universe` puts the assets' bars on, with its refusals, without putting them there (a
    retrain needs only the rows: envs.portfolio.retrain_data)."""
    if len(frames) < 2:
        raise InputError(f"{source}: a universe of {len(frames)} asset(s): a portfolio allocates between two or "
                         "more; trade one asset with environment.env: trading/Spot-v0")
    timeframes = {symbol: frame.attrs.get("timeframe") for symbol, frame in frames.items()}
    if len(set(timeframes.values())) > 1:
        listed = ", ".join(f"{symbol} {tf}" for symbol, tf in timeframes.items())
        raise InputError(f"{source}: the assets' bars have different timeframes ({listed}): resample them to one "
                         "timeframe (python -m experiments.data import ... --timeframe)")
    # In int64 nanoseconds: a set of Timestamps takes minutes for 500 assets, and files may keep other units.
    each = [frame.index.as_unit("ns").asi8 for frame in frames.values()]
    union = np.unique(np.concatenate(each))
    stamps = pd.DatetimeIndex(union.view("datetime64[ns]"), name="timestamp").tz_localize("UTC")
    trading = np.zeros(len(stamps), dtype=np.int64)
    for values in each:
        trading[np.searchsorted(union, values)] += 1
    both = np.flatnonzero(trading >= 2)
    if not len(both):
        raise InputError(f"{source}: no bar time at which two assets trade (each asset's bars lie outside every "
                         "other's): give assets whose histories overlap")
    calendar = stamps[both[0]:]
    for symbol, frame in frames.items():
        # its own bars are on the union: it has a calendar row unless its last bar comes before the calendar's first
        if frame.index[-1] < calendar[0]:
            raise InputError(f"{source}: {symbol}'s bars end at {frame.index[-1]}, before the universe's calendar "
                             f"starts ({calendar[0]}, the first bar time at which two assets trade): drop {symbol}")
    return calendar


def _flat_bars_in_holes(frame: pd.DataFrame, close_only: bool) -> pd.DataFrame:
    """Rows of the asset's span that it has no bar for: flat at the last close, no volume; a close-only asset's open
    is the previous close on every row."""
    close = frame["close"].ffill()
    filled = frame.copy()
    filled["close"] = close
    if close_only:
        filled["open"] = close.shift(1).fillna(close)
        return filled[["open", "close"]]
    for column in ("open", "high", "low"):
        filled[column] = filled[column].fillna(close)
    filled["volume"] = filled["volume"].fillna(0.0)
    return filled[list(BAR_COLUMNS)]


def _spread(values: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray:
    """An asset's prices on its rows of the calendar, the nearest listed price elsewhere (never traded there)."""
    out = np.empty(n)
    out[:rows[0]] = values[0]
    out[rows[0]:rows[-1] + 1] = values
    out[rows[-1] + 1:] = values[-1]
    return out


def file_asset(path: str) -> tuple[str, pd.DataFrame]:
    """One asset's bars file: its symbol (the file's metadata, else its name's first part) and its validated bars."""
    bars = load_bars(path)
    if not bars.attrs.get("timeframe"):
        raise InputError(f"{path}: timeframe unknown (no metadata): re-import it with python -m experiments.data "
                         "import ... --timeframe TF")
    return canonical_symbol(str(bars.attrs.get("symbol") or Path(path).stem.split("_")[0])), bars


def file_frames(paths: list[str], read: Callable[[str], tuple[str, pd.DataFrame]] = file_asset
                ) -> dict[str, pd.DataFrame]:
    """Each asset's bars by symbol, one file each (`read`: a paper-trading poll passes one that keeps the bars of
    the files that did not change, envs.portfolio.universe_files)."""
    frames: dict[str, pd.DataFrame] = {}
    for path in paths:
        symbol, bars = read(path)
        if symbol in frames:
            raise InputError(f"{path}: a second file of {symbol} in environment.env_config.data_paths: name each "
                             "asset once")
        frames[symbol] = bars
    return frames
