"""The bars' clock: how far apart bars open (the timeframe), on which days they open (the calendar), and so how many
bars make a year, the figure every annualized Sharpe and Sortino is scaled by.

Crypto trades around the clock (`24/7`): a year is 365 days of bars. Stocks and most outside series trade on weekdays
(`weekdays`): no bar opens on a Saturday or Sunday (UTC), so a weekend is closed, not a gap, and a year is as many
bars as the file holds per year of its span (about 252 daily bars where holidays are holes, about 261 where the import
filled them). Scaling daily stock bars by 365 would overstate their Sharpe by sqrt(365 / 252) - 1, about 20%.
A file's calendar is what its metadata records (`experiments.data import` writes it), else what its bars show
(`detect_calendar`); `environment.env_config.calendar` may override the annualization (`check_calendar`).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from envs.errors import InputError

TIMEFRAMES: dict[str, pd.Timedelta] = {
    "1m": pd.Timedelta(minutes=1),
    "5m": pd.Timedelta(minutes=5),
    "15m": pd.Timedelta(minutes=15),
    "30m": pd.Timedelta(minutes=30),
    "1h": pd.Timedelta(hours=1),
    "4h": pd.Timedelta(hours=4),
    "1d": pd.Timedelta(days=1),
}
ALL_WEEK, WEEKDAYS = "24/7", "weekdays"
CALENDARS = (ALL_WEEK, WEEKDAYS)
CALENDAR_KEY = "environment.env_config.calendar"
# Two weekends: a shorter file without a weekend bar says nothing about its calendar.
MIN_SPAN = pd.Timedelta(days=14)
YEAR = pd.Timedelta(days=365)          # a 24/7 year, as crypto exchanges count it
MEAN_YEAR = pd.Timedelta(days=365.25)  # a span's years, leap days included
DAY = pd.Timedelta(days=1)


def timeframe_delta(timeframe: str) -> pd.Timedelta:
    """The bar length of a timeframe name, or an InputError listing the known ones."""
    try:
        return TIMEFRAMES[timeframe]
    except KeyError:
        raise InputError(f"unknown timeframe {timeframe!r}: use one of {', '.join(TIMEFRAMES)}") from None


def weekend_bars(index: pd.DatetimeIndex) -> np.ndarray:
    """Which bars open on a Saturday or Sunday (UTC; naive stamps are read as UTC)."""
    return np.asarray(pd.DatetimeIndex(index).day_of_week >= 5)


def _span(index: pd.DatetimeIndex, timeframe: str) -> pd.Timedelta:
    """From the first bar's open to the last bar's close."""
    return index[-1] - index[0] + timeframe_delta(timeframe) if len(index) else pd.Timedelta(0)


def detect_calendar(index: pd.DatetimeIndex, timeframe: str) -> str:
    """`weekdays` when bars span two weeks or more and none opens on a Saturday or Sunday, at any timeframe (hourly
    stock bars too), else `24/7`."""
    index = pd.DatetimeIndex(index)
    return WEEKDAYS if _span(index, timeframe) >= MIN_SPAN and not weekend_bars(index).any() else ALL_WEEK


def parse_calendar(calendar: object) -> str | float:
    """A calendar name, or the bars a year as a float (a number written as text too); a ValueError saying what is
    wrong and the fix otherwise (TradingConfig names the key around it; `check_calendar` the file and the key)."""
    if isinstance(calendar, str) and calendar.strip() in CALENDARS:
        return calendar.strip()
    number = math.nan
    if isinstance(calendar, (int, float)) and not isinstance(calendar, bool):  # true is no number of bars
        number = float(calendar)
    elif isinstance(calendar, str):
        try:
            number = float(calendar)
        except ValueError:
            pass
    if math.isfinite(number) and number > 0:
        return number
    raise ValueError("not a calendar: use 24/7 (bars every day), weekdays (none on Saturday and Sunday) or the bars "
                     "a year (a number > 0)")


def _parsed(calendar: str | float, source: str) -> str | float:
    try:
        return parse_calendar(calendar)
    except ValueError as error:
        where = f"{source}: " if source else ""
        raise InputError(f"{where}{CALENDAR_KEY} {calendar!r}: {error}") from None


def bars_per_year(index: pd.DatetimeIndex, timeframe: str, calendar: str | float | None = None,
                  source: str = "") -> float:
    """How many of these bars make a year: `calendar` None takes the bars' own (`detect_calendar`; a caller with a
    recorded calendar passes it); 24/7 is 365 days of bars; weekdays is the bars held per year of their span, so
    closed days (weekends, and holidays left as holes) are not counted as bars; a number is that number."""
    index = pd.DatetimeIndex(index)
    chosen = detect_calendar(index, timeframe) if calendar is None else _parsed(calendar, source)
    if not isinstance(chosen, str):
        return chosen
    if chosen == ALL_WEEK:
        return YEAR / timeframe_delta(timeframe)
    return len(index) / (_span(index, timeframe) / MEAN_YEAR)


def check_calendar(index: pd.DatetimeIndex, timeframe: str, calendar: str | float, source: str) -> None:
    """A calendar given in the config must be one (a name of CALENDARS or a number > 0), and must not close days on
    which the data has bars: InputError in one line naming the key, the file, the first such bar and the fix."""
    if _parsed(calendar, source) != WEEKDAYS:
        return
    index = pd.DatetimeIndex(index)
    weekend = weekend_bars(index)
    if weekend.any():
        first = index[int(np.argmax(weekend))]
        where = f"{source}: " if source else ""
        raise InputError(f"{where}{CALENDAR_KEY} is weekdays, but {int(weekend.sum())} of its {len(index)} "
                         f"{timeframe} bars open on a Saturday or Sunday (first {first:%Y-%m-%d %H:%M}, a {first:%A}): "
                         "set it to 24/7 (these bars' own calendar) or to the bars a year as a number")


def closed_bars_between(index: pd.DatetimeIndex, timeframe: str, calendar: str) -> np.ndarray:
    """Per pair of consecutive bars, how many bar openings the calendar closes between them: under weekdays, those of
    the Saturdays and Sundays from the first bar's day to the second's (Friday's last bar and Monday's first are
    consecutive); under 24/7 none. A gap is what is missing beyond these."""
    if calendar != WEEKDAYS or len(index) < 2:
        return np.zeros(max(len(index) - 1, 0), dtype=np.int64)
    days = np.asarray(pd.DatetimeIndex(index).tz_localize(None).normalize(), dtype="datetime64[D]")
    between = (days[1:] - days[:-1]).astype(np.int64)
    weekend_days = between - np.busday_count(days[:-1], days[1:])
    return weekend_days * int(DAY // timeframe_delta(timeframe))
