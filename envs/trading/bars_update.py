"""Append new OHLCV bars to a stored bars dataset, refusing whatever would silently corrupt its history.

A dataset that runs have trained on may only grow at its end. New bars (from a CSV export, a parquet or an
exchange) are checked against it before anything is written: the same symbol and timeframe, no hole at the
seam, and overlapping bars equal to the stored ones (a differing bar means the source rewrote history, which
would change every backtest over that period: refused unless forced, and then counted). Holes inside the new
bars get the --gaps policy (by default the dataset's), filled from the last stored close; a weekdays dataset's
weekends are closed, not holes (envs.trading.calendar).
`experiments.data update` reads and writes in envs.trading.dataset_update (the old version kept by the platform's
experiments/storage/dataset_versions.py); this module only takes and returns DataFrames.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from envs.errors import InputError
from envs.trading.calendar import ALL_WEEK
from envs.trading.data import (
    BAR_COLUMNS,
    TIMEFRAMES,
    GapReport,
    bar_spacing,
    check_spacing,
    find_gaps,
    off_grid_bars,
    regularize,
    timeframe_delta,
    validate_bars,
)
from envs.trading.symbols import check_symbol

# Overlapping values closer than this (relative) are the same bar: a CSV's decimal text may not round-trip the
# last bit of a float. Anything larger is a different bar.
SAME_VALUE_RTOL = 1e-9
STAMP = "%Y-%m-%d %H:%M"


@dataclass(frozen=True)
class NewBars:
    """Bars to append and what their source says they are (None: the source does not say; taken as the
    dataset's). The symbol is compared as a market (`same_symbol`: ETHUSD is ETH-USD), not as a string."""

    bars: pd.DataFrame
    source: str  # the file or the exchange's market, for messages
    symbol: str | None
    timeframe: str | None


@dataclass(frozen=True)
class BarsUpdate:
    """The merged dataset and what the merge did, for the report."""

    bars: pd.DataFrame
    appended: pd.DatetimeIndex
    skipped: int           # overlapping bars equal to the stored ones
    replaced: int          # overlapping bars that differed, replaced (--force)
    left_out: int          # new bars before the dataset's first bar
    gaps: GapReport        # holes inside the appended bars
    gap_policy: str
    source: str
    symbol: str
    timeframe: str

    @property
    def changed(self) -> bool:
        return bool(len(self.appended) or self.replaced)

    def unchanged_line(self, target: str) -> str:
        before = f" ({self.left_out} before its first bar left out)" if self.left_out else ""
        return (f"{target}: nothing to append: the {self.skipped} bars of {self.source} are already stored, "
                f"identical{before}; it ends {self.bars.index[-1]:{STAMP}}")

    def lines(self) -> list[str]:
        appended = self.appended
        lines = [f"appended {len(appended)} {self.timeframe} bars {appended[0]:{STAMP}} .. {appended[-1]:{STAMP}} "
                 f"from {self.source}" if len(appended) else f"appended no bars from {self.source}"]
        if self.skipped:
            lines.append(f"overlap: {self.skipped} bars already stored and identical, skipped")
        if self.replaced:
            lines.append(f"overlap: replaced {self.replaced} stored bars whose values differed (--force)")
        if self.left_out:
            lines.append(f"left out {self.left_out} new bars before the dataset's first bar (update only appends: "
                         "re-import to extend the start)")
        if len(appended):
            handled = f" (handled: {self.gap_policy})" if self.gaps.missing_bars else ""
            lines.append(f"gaps in the new bars: {self.gaps.describe()}{handled}")
        bars = self.bars
        lines.append(f"now {len(bars)} {self.timeframe} bars of {self.symbol} "
                     f"{bars.index[0]:{STAMP}} .. {bars.index[-1]:{STAMP}}")
        return lines


def dataset_identity(stored: pd.DataFrame, target: str) -> tuple[str, str]:
    """The symbol and timeframe in a dataset's metadata, or an InputError: without them it is not a dataset
    written by `experiments.data import/fetch`, and new bars could not be checked against it."""
    symbol, timeframe = stored.attrs.get("symbol"), stored.attrs.get("timeframe")
    if not symbol or timeframe not in TIMEFRAMES:
        raise InputError(f"{target}: no symbol and timeframe in its metadata, so not a dataset written by "
                         "python -m experiments.data import/fetch: import its bars with python -m experiments.data "
                         "import FILE --symbol SYMBOL --timeframe TF, then update that file")
    return str(symbol), str(timeframe)


def timeframe_mismatch(actual: str, stored_timeframe: str, source: str, target: str) -> InputError:
    return InputError(f"{source}: holds {actual} bars but {target} holds {stored_timeframe} bars: update it with "
                      f"{stored_timeframe} bars (export or fetch {stored_timeframe} bars)")


def _check_timeframe(new: NewBars, timeframe: str, target: str) -> None:
    """The source's declared timeframe, else its bar spacing and grid, must be the dataset's."""
    if new.timeframe is not None and new.timeframe != timeframe:
        raise timeframe_mismatch(new.timeframe, timeframe, new.source, target)
    index = new.bars.index
    try:
        check_spacing(index, timeframe, new.source)
    except InputError:
        spacing = bar_spacing(index)
        actual = next((name for name, delta in TIMEFRAMES.items() if delta == spacing), str(spacing))
        raise timeframe_mismatch(actual, timeframe, new.source, target) from None
    off_grid = off_grid_bars(index, timeframe)
    if off_grid.any():
        raise InputError(f"{new.source}: bar at {index[np.argmax(off_grid)]} is not on the {timeframe} grid of "
                         f"{target}: update it with {timeframe} bars stamped at their open")


def _check_seam(after: pd.DatetimeIndex, last: pd.Timestamp, timeframe: str, calendar: str, source: str,
                target: str) -> None:
    """No bar may be missing between the dataset's last bar and the first new one (a closed weekend is none)."""
    seam = find_gaps(pd.DatetimeIndex([last, *after[:1]]), timeframe, calendar)
    if seam.missing_bars:
        step, missing = timeframe_delta(timeframe), seam.missing_bars
        raise InputError(f"{source}: starts at {after[0]:{STAMP}} but {target} ends at {last:{STAMP}}: {missing} "
                         f"bars missing ({last + step:{STAMP}} .. {after[0] - step:{STAMP}}): import or fetch the "
                         "missing bars first (update --fetch EXCHANGE, or --from an export that covers them)")


def _differing(stored: pd.DataFrame, new: pd.DataFrame) -> pd.DatetimeIndex:
    """The new bars within the stored range that are not the stored ones (or not stored at all: a hole)."""
    inside = new[(new.index >= stored.index[0]) & (new.index <= stored.index[-1])]
    common = inside.index.intersection(stored.index)
    columns = list(BAR_COLUMNS)
    same = np.isclose(stored.loc[common, columns].to_numpy(), inside.loc[common, columns].to_numpy(),
                      rtol=SAME_VALUE_RTOL, atol=0.0).all(axis=1)
    return common[~same].union(inside.index.difference(stored.index))


def _rewritten_history(stored: pd.DataFrame, new: pd.DataFrame, differing: pd.DatetimeIndex, source: str,
                       target: str) -> InputError:
    first = differing[0]
    if first in stored.index:
        column = next(c for c in BAR_COLUMNS
                      if not np.isclose(stored.at[first, c], new.at[first, c], rtol=SAME_VALUE_RTOL, atol=0.0))
        what = f"{column} stored {float(stored.at[first, column])!r}, new {float(new.at[first, column])!r}"
    else:
        what = "not stored (a hole kept with --gaps drop)"
    return InputError(f"{source}: bar {first:{STAMP}} differs from {target}'s: {what} ({len(differing)} overlapping "
                      "bar(s) differ): history was rewritten: check the source, or pass --force to replace the stored "
                      "bars with the new ones")


def plan_update(stored: pd.DataFrame, new: NewBars, target: str, gaps: str, force: bool) -> BarsUpdate:
    """Merge `new` into `stored` (a dataset as load_bars returns it) or raise an InputError naming `new.source`,
    `target` and the fix. `gaps` is applied to holes inside the appended bars; a policy that would leave holes in
    a dataset written without them is refused (load_bars would then refuse the dataset)."""
    symbol, timeframe = dataset_identity(stored, target)
    check_symbol(new.symbol, symbol, new.source, f"{target} holds", f"update it with {symbol} bars (write "
                 f"{new.symbol} bars to their own file with python -m experiments.data import)")
    _check_timeframe(new, timeframe, target)
    bars = new.bars[list(BAR_COLUMNS)]
    before = int((bars.index < stored.index[0]).sum())
    after = bars[bars.index > stored.index[-1]]
    stored_policy, calendar = stored.attrs.get("gaps", "ffill"), stored.attrs.get("calendar", ALL_WEEK)
    _check_seam(after.index, stored.index[-1], timeframe, calendar, new.source, target)
    differing = _differing(stored, bars)
    if len(differing) and not force:
        raise _rewritten_history(stored, bars, differing, new.source, target)
    joined = pd.concat([stored.iloc[-1:][list(BAR_COLUMNS)], after])  # holes are filled from the last stored close
    report = find_gaps(joined.index, timeframe, calendar)
    if report.missing_bars and gaps == "drop" and stored_policy != "drop":
        raise InputError(f"{new.source}: {report.describe()} inside the new bars: --gaps drop would leave holes in "
                         f"{target}, which was written with --gaps {stored_policy}: pass --gaps ffill or --gaps error")
    appended = regularize(joined, timeframe, gaps, report, Path(new.source), calendar).iloc[1:]
    kept = stored[list(BAR_COLUMNS)].copy()
    replaced = differing.intersection(kept.index)
    kept.loc[replaced] = bars.loc[replaced]
    merged = pd.concat([kept, bars.loc[differing.difference(kept.index)], appended]).sort_index()
    merged.index.name = "timestamp"
    merged = validate_bars(merged, target, timeframe, allow_gaps=stored_policy == "drop", calendar=calendar)
    overlap = int(((bars.index >= stored.index[0]) & (bars.index <= stored.index[-1])).sum())
    return BarsUpdate(merged, appended.index, overlap - len(differing), len(differing), before, report, gaps,
                      new.source, symbol, timeframe)
