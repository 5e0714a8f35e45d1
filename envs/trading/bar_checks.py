"""The checks every imported bar series passes, whatever file it came from: one code path for a bars file
(`experiments.data import`) and for each asset of a universe's wide table (`trading/Portfolio-v0`'s `table_path`,
`experiments.data import --universe`), so the same defect gets the same answer in both families.

In order: rows before an asset's first price (a wide table's late listing) and after its last (a delisting) are left
out and reported; rows repeated to the letter are dropped, two different bars at one time refused; a row with no
price at all is a time without a bar (a hole, judged under the series' own calendar, so an equity's weekends in a
crypto table are closed days, not gaps); a bar with some price cells empty or unreadable is a broken bar, handled by
the gap rule (`error` refuses it, `ffill`
makes it a flat bar at the last close, `drop` leaves a hole) and reported with its count; then the calendar, the gaps
and `validate_bars`' invariants (high below low, non-positive prices, ...).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from envs.errors import InputError
from envs.trading.calendar import ALL_WEEK, bars_per_year, choose_calendar, describe_calendar
from envs.trading.data import (
    BAR_COLUMNS,
    PRICE_COLUMNS,
    GapReport,
    drop_exact_duplicates,
    find_gaps,
    is_uri,
    regularize,
    validate_bars,
)


@dataclass(frozen=True)
class BarChecks:
    """What the checks found and did to one series, one report line each."""

    gaps: GapReport
    gap_policy: str
    duplicates_dropped: int = 0
    asset: str | None = None           # a wide table's asset, as the lines name it
    unlisted_rows: int = 0             # rows before its first price (not listed yet)
    first_bar: pd.Timestamp | None = None
    delisted_rows: int = 0             # rows after its last price (no longer listed)
    broken_bars: int = 0               # bars with an empty or unreadable price cell, handled by the gap rule
    first_broken: pd.Timestamp | None = None
    calendar: str = ALL_WEEK
    bars_per_year: float = 0.0
    calendar_why: str = ""             # given (--calendar) or what detection saw; '' for a detected 24/7

    def lines(self) -> list[str]:
        handled = f" (handled: {self.gap_policy})" if self.gaps.missing_bars else ""
        lines = [f"gaps: {self.gaps.describe()}{handled}"]
        if calendar_line := describe_calendar(self.calendar, self.calendar_why, self.bars_per_year):
            lines.append(calendar_line)
        name = self.asset or "the series"
        if self.unlisted_rows and self.first_bar is not None:
            lines.append(f"{name} starts {self.first_bar:%Y-%m-%d %H:%M} UTC: {self.unlisted_rows} earlier "
                         f"row(s) with no {name} prices left out (not listed yet)")
        if self.delisted_rows:
            lines.append(f"{name}: {self.delisted_rows} row(s) after its last price left out (no longer listed)")
        if self.broken_bars:
            done = "filled at the last close" if self.gap_policy == "ffill" else "left out as holes"
            lines.append(f"empty cells: {self.broken_bars} bar(s) of {name} with an empty or unreadable price, first "
                         f"at {self.first_broken:%Y-%m-%d %H:%M}: {done} (--gaps {self.gap_policy})")
        if self.duplicates_dropped:
            lines.append(f"duplicates: dropped {self.duplicates_dropped} row(s) repeated to the letter")
        return lines


def check_bars(bars: pd.DataFrame, path: Path | str, timeframe: str, gaps: str, asset: str | None = None,
               listing: bool = False, calendar: str | None = None) -> tuple[pd.DataFrame, BarChecks]:
    """Validated bars (OHLCV float64 on a UTC index, sorted) and what was done to them; InputError in one line
    naming `path` (and `asset`) otherwise. `listing`: a wide table's asset, whose empty leading and trailing rows are
    before its listing or after its delisting, not broken bars. `calendar`: the one named by --calendar (24/7,
    weekdays or an exchange code such as XNYS; a bar on a day it closes is refused), else the bars' own."""
    path = path if is_uri(path) else Path(path)
    who = f" of {asset}" if asset else ""
    bars = bars.sort_index()
    unlisted, delisted = _outside_listing(bars, path, asset) if listing else (0, 0)
    bars = bars.iloc[unlisted:len(bars) - delisted]
    bars, duplicates = drop_exact_duplicates(bars, path)
    empty = bars[list(PRICE_COLUMNS)].isna()
    # A row with no price at all is a time without a bar of this series (another asset's weekend in a wide table, an
    # outage): a hole like a missing row, judged under the series' own calendar. Some prices and not others: broken.
    priced = ~empty.all(axis=1).to_numpy()
    bars, broken = bars[priced], empty[priced].any(axis=1).to_numpy()
    first_broken = bars.index[int(np.argmax(broken))] if broken.any() else None
    if broken.any():
        if gaps == "error":
            raise InputError(f"{path}: {int(broken.sum())} bar(s){who} with an empty or unreadable price cell, first "
                             f"at {first_broken}: fix the cells, or re-import with --gaps ffill (flat bars at the "
                             "last close) or --gaps drop (holes)")
        if broken[0] and gaps == "ffill":
            raise InputError(f"{path}: the first bar{who} ({first_broken}) has an empty or unreadable price cell, and "
                             "no earlier close to fill it from: fix the cell or remove the row")
    # `calendar` (--calendar) or the bars' own, broken bars included (their times are bar times): no flat bars for
    # the days it closes, whatever `gaps` says. The gaps reported are the file's holes; its broken bars are said apart.
    calendar, why = choose_calendar(bars.index, timeframe, calendar, str(path))
    report = find_gaps(bars.index, timeframe, calendar)
    bars = bars[~broken].assign(volume=bars["volume"].fillna(0.0))
    holes = find_gaps(bars.index, timeframe, calendar) if broken.any() else report
    bars = regularize(bars, timeframe, gaps, holes, path, calendar)
    source = f"{path} ({asset})" if asset else str(path)
    bars = validate_bars(bars, source=source, timeframe=timeframe, allow_gaps=gaps == "drop", calendar=calendar)
    return bars, BarChecks(report, gaps, duplicates, asset, unlisted, bars.index[0] if unlisted else None, delisted,
                           int(broken.sum()), first_broken, calendar, bars_per_year(bars.index, timeframe, calendar),
                           why)


def _outside_listing(bars: pd.DataFrame, path: Path | str, asset: str | None) -> tuple[int, int]:
    """How many of a wide table's first and last rows (sorted) have every price of `asset` empty: before its listing
    and after its delisting, not bars of it. An asset with no price at all is refused rather than imported as
    nothing."""
    priced = bars[list(PRICE_COLUMNS)].notna().any(axis=1).to_numpy()
    if not priced.any():
        raise InputError(f"{path}: no {asset} prices in any of its {len(bars)} row(s) (its open, high, low and "
                         "close cells are all empty): pick an asset with prices, or export the table again")
    return int(np.argmax(priced)), int(np.argmax(priced[::-1]))


def close_only_bars(close: pd.Series) -> pd.DataFrame:
    """A close-only series as bars the checks accept (open = high = low = close, no volume); the universe keeps only
    the close of them."""
    return pd.DataFrame({column: close for column in PRICE_COLUMNS} | {"volume": 0.0}, index=close.index)[
        list(BAR_COLUMNS)]
