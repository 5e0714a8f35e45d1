"""The bars' clock: how far apart bars open (the timeframe), on which days they open (the calendar), and so how many
bars make a year, the figure every annualized Sharpe and Sortino is scaled by.

A calendar is a plain string, so metadata, configs and served models carry it as they always did:
- `24/7`: crypto trades around the clock; every day is open and a year is 365 days of bars.
- `weekdays`: no bar opens on a Saturday or Sunday (UTC), so a weekend is closed, not a gap; a year is as many bars
  as the file holds per year of its span (about 252 daily bars where holidays are holes, about 261 where the import
  filled them).
- an exchange code of exchange_calendars (`XNYS`, `XLON`, `XTKS`, ...; its aliases such as `NYSE` are taken as the
  code they name): weekends and the exchange's holidays are closed days, not gaps, so an import fills no holiday and a
  holiday is no hole. Daily bars are that exchange's sessions, stamped 00:00 UTC of the session's date, and a year is
  the mean of the calendar years' session counts over the file's span (XNYS 2024: 252). Intraday bars (the rule
  chosen here, simple and never wrong about a whole day): a UTC day is open when one of the exchange's sessions is
  open during it, and the whole day is then open, as a weekday is under `weekdays` (overnight hours are the file's
  own affair: its holes, or flat bars with --gaps ffill); a year is the file's bars per year of its span, which is the
  calendar's open days a year times the bars the file holds per open day.
Scaling daily stock bars by 365 would overstate their Sharpe by sqrt(365 / 252) - 1, about 20%.

A file's calendar is what its metadata records (`experiments.data import` writes it: `--calendar`, else
`detect_calendar`), else what its bars show (`detect_calendar`); `environment.env_config.calendar` may override the
annualization (`check_calendar`). Bars on a day their calendar closes are refused in one line wherever a calendar is
named (`check_open_days`).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable

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
# The exchanges `detect_calendar` tries on a daily file without weekend bars, in this order: New York, London, Tokyo,
# Hong Kong, Frankfurt, Toronto, Sydney. Short on purpose: each is built and compared, and the first that fits wins.
DETECTED_EXCHANGES = ("XNYS", "XLON", "XTKS", "XHKG", "XFRA", "XTSE", "XASX")
# An exchange fits when its closed weekdays are at least this share of the file's missing weekdays (the rest are the
# file's own holes, gaps under that calendar) and the file has no bar on a day it closes.
DETECTION_COVERAGE = 0.99
# exchange_calendars also names these; here they mean this module's own 24/7, and weekdays is its 24/5.
_NOT_EXCHANGES = ("24/7", "24/5")
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


@functools.cache
def _exchange_names() -> dict[str, str]:
    """Every code and alias exchange_calendars knows, upper-cased, to the code it names."""
    import exchange_calendars

    names = {name: exchange_calendars.resolve_alias(name)
             for name in exchange_calendars.get_calendar_names(include_aliases=True) if name not in _NOT_EXCHANGES}
    return {name.upper(): code for name, code in names.items()}


def is_exchange(calendar: object) -> bool:
    """Whether a parsed calendar is an exchange code (not 24/7, weekdays or a number)."""
    return isinstance(calendar, str) and calendar not in CALENDARS


def parse_calendar(calendar: object) -> str | float:
    """A calendar name (an exchange alias as its code), or the bars a year as a float (a number written as text too);
    a ValueError saying what is wrong and the fix otherwise (TradingConfig names the key around it; `check_calendar`
    the file and the key)."""
    if isinstance(calendar, str) and calendar.strip() in CALENDARS:
        return calendar.strip()
    number = math.nan
    if isinstance(calendar, (int, float)) and not isinstance(calendar, bool):  # true is no number of bars
        number = float(calendar)
    elif isinstance(calendar, str):
        try:
            number = float(calendar)
        except ValueError:
            code = _exchange_names().get(calendar.strip().upper())
            if code is not None:
                return code
    if math.isfinite(number) and number > 0:
        return number
    from envs.validation import did_you_mean

    hint = did_you_mean(calendar.strip().upper(), _exchange_names()) if isinstance(calendar, str) else ""
    raise ValueError("not a calendar: use 24/7 (bars every day), weekdays (none on Saturday and Sunday), an exchange "
                     "code of exchange_calendars such as XNYS, XLON, XTKS or XHKG (its weekends and holidays closed) "
                     f"or the bars a year (a number > 0){hint}")


def _parsed(calendar: str | float, source: str, key: str = CALENDAR_KEY) -> str | float:
    try:
        return parse_calendar(calendar)
    except ValueError as error:
        where = f"{source}: " if source else ""
        raise InputError(f"{where}{key} {calendar!r}: {error}") from None


def calendar_name(calendar: object, source: str, key: str) -> str:
    """A calendar a bars file can record (24/7, weekdays or an exchange code, never a number), named as given by
    `key` (e.g. --calendar); InputError in one line otherwise."""
    chosen = _parsed(calendar, source, key)  # type: ignore[arg-type]
    if not isinstance(chosen, str):
        raise InputError(f"{source}: {key} {calendar!r}: a file records a calendar, not a number of bars a year: "
                         f"use 24/7, weekdays or an exchange code such as XNYS (a number goes in {CALENDAR_KEY})")
    return chosen


@functools.cache
def _bounds(code: str) -> tuple[pd.Timestamp | None, pd.Timestamp | None]:
    """The first and last dates exchange_calendars can evaluate `code` for (None: no bound; XTKS: from 1997)."""
    import exchange_calendars

    factory = type(exchange_calendars.get_calendar(code))
    return tuple(None if bound is None else pd.Timestamp(bound).tz_localize(None)  # type: ignore[return-value]
                 for bound in (factory.bound_min(), factory.bound_max()))


def _range(code: str, first_year: int, last_year: int) -> tuple[pd.Timestamp, pd.Timestamp]:
    """Whole calendar years, cut to the dates exchange_calendars can evaluate `code` for."""
    earliest, latest = _bounds(code)
    start, end = pd.Timestamp(first_year, 1, 1), pd.Timestamp(last_year, 12, 31)
    return (start if earliest is None else max(start, earliest)), (end if latest is None else min(end, latest))


@functools.lru_cache(maxsize=32)
def _exchange(code: str, first_year: int, last_year: int):  # -> exchange_calendars.ExchangeCalendar
    """The exchange's calendar over whole calendar years (slow-ish to build: cached). exchange_calendars' default
    range starts about 20 years back; an older file gets its own start, down to the earliest date the calendar
    knows (XTKS: 1997); bars older still are refused in one line (`_known_days`)."""
    import exchange_calendars

    start, end = _range(code, first_year, last_year)
    return exchange_calendars.get_calendar(code, start=start, end=end)


@functools.lru_cache(maxsize=64)
def _exchange_days(code: str, first_year: int, last_year: int, intraday: bool) -> np.ndarray:
    """The days (datetime64[D], sorted) on which `code` opens, over whole years. Daily bars: the session dates.
    Intraday: every UTC day a session is open during."""
    calendar = _exchange(code, first_year, last_year)
    if intraday:
        opens = np.asarray(calendar.opens.dt.tz_convert(None).to_numpy(), dtype="datetime64[D]")
        closes = np.asarray((calendar.closes.dt.tz_convert(None) - pd.Timedelta(1, "ns")).to_numpy(),
                            dtype="datetime64[D]")
        days = np.unique(np.concatenate([opens, closes]))
    else:
        days = np.asarray(calendar.sessions.to_numpy(), dtype="datetime64[D]")
    return days


def _as_day(value: object) -> np.datetime64:
    """A day (datetime64[D]) from a datetime64, a date string or a Timestamp (a zone-aware one: its UTC day)."""
    stamp = pd.Timestamp(value)  # type: ignore[arg-type]
    if stamp.tz is not None:
        stamp = stamp.tz_convert("UTC").tz_localize(None)
    return np.datetime64(stamp.normalize().to_datetime64(), "D")


def _day_range(first: np.datetime64, last: np.datetime64) -> np.ndarray:
    return np.arange(first, last + np.timedelta64(1, "D"), dtype="datetime64[D]")


def _year(day: np.datetime64) -> int:
    return int(np.datetime64(day, "Y").astype(int)) + 1970


def _known_days(code: str, first: np.datetime64, last: np.datetime64, intraday: bool) -> tuple[np.ndarray, np.ndarray]:
    """`_exchange_days` over the whole years from `first` to `last`; an exchange that knows no sessions that early (or
    that late) is an InputError in one line."""
    known = np.array(_range(code, _year(first), _year(last)), dtype="datetime64[D]")
    if first < known[0] or last > known[1]:
        earliest, latest = _bounds(code)
        span = " ".join(f"{word} {bound:%Y-%m-%d}" for word, bound in (("from", earliest), ("up to", latest)) if bound)
        raise InputError(f"calendar {code}: exchange_calendars knows its sessions {span} only, but the bars run from "
                         f"{first} to {last}: use calendar weekdays, or only the bars in that range")
    return _exchange_days(code, _year(first), _year(last), intraday), known


def open_days(calendar: str, first: np.datetime64, last: np.datetime64, timeframe: str = "1d") -> np.ndarray:
    """The days from `first` to `last` (datetime64[D], inclusive, sorted) on which `calendar` opens bars of
    `timeframe`; an exchange that knows no sessions that early is an InputError in one line."""
    first, last = _as_day(first), _as_day(last)
    if calendar == ALL_WEEK:
        return _day_range(first, last)
    if calendar == WEEKDAYS:
        days = _day_range(first, last)
        return days[np.is_busday(days)]
    code = _exchange_names().get(str(calendar).upper())  # a file's metadata is not checked on the way in
    if code is None:
        raise InputError(f"calendar {calendar!r}: not a calendar: use 24/7, weekdays or an exchange code such as XNYS")
    days, _ = _known_days(code, first, last, timeframe_delta(timeframe) < DAY)
    return days[(days >= first) & (days <= last)]


def _days(index: pd.DatetimeIndex) -> np.ndarray:
    """Each bar's UTC day (naive stamps are read as UTC)."""
    index = pd.DatetimeIndex(index)
    if index.tz is not None:
        index = index.tz_convert("UTC").tz_localize(None)
    return np.asarray(index.normalize(), dtype="datetime64[D]")


def weekend_bars(index: pd.DatetimeIndex) -> np.ndarray:
    """Which bars open on a Saturday or Sunday (UTC; naive stamps are read as UTC)."""
    return ~np.is_busday(_days(index)) if len(index) else np.zeros(0, dtype=bool)


def closed_bars(index: pd.DatetimeIndex, timeframe: str, calendar: str) -> np.ndarray:
    """Which bars open on a day `calendar` closes (none under 24/7)."""
    if calendar == ALL_WEEK or not len(index):
        return np.zeros(len(index), dtype=bool)
    days = _days(index)
    return ~np.isin(days, open_days(calendar, days.min(), days.max(), timeframe))


def _span(index: pd.DatetimeIndex, timeframe: str) -> pd.Timedelta:
    """From the first bar's open to the last bar's close."""
    return index[-1] - index[0] + timeframe_delta(timeframe) if len(index) else pd.Timedelta(0)


def detect_calendar(index: pd.DatetimeIndex, timeframe: str) -> str:
    """The calendar the bars show: `24/7` when they span less than two weeks or a bar opens on a Saturday or Sunday;
    else, for daily bars, the first of DETECTED_EXCHANGES that fits (`fitting_exchange`); else `weekdays` (hourly
    stock bars too)."""
    index = pd.DatetimeIndex(index)
    if _span(index, timeframe) < MIN_SPAN or weekend_bars(index).any():
        return ALL_WEEK
    if timeframe != "1d":
        return WEEKDAYS
    fit = fitting_exchange(index)
    return fit[0] if fit else WEEKDAYS


def fitting_exchange(index: pd.DatetimeIndex) -> tuple[str, int, int] | None:
    """The first of DETECTED_EXCHANGES whose closed weekdays cover at least DETECTION_COVERAGE of the daily bars'
    missing weekdays, with no bar on a day it closes (a bar there would be refused under it), as (code, its closed
    weekdays in the span, the missing weekdays); None when none fits or no weekday is missing (nothing shows an
    exchange). An exchange that knows no sessions that early is passed over."""
    days = _days(index)
    weekdays = open_days(WEEKDAYS, days[0], days[-1])
    missing = int((~np.isin(weekdays, days)).sum())
    if not missing:
        return None
    for code in DETECTED_EXCHANGES:
        try:
            sessions = open_days(code, days[0], days[-1])
        except InputError:
            continue
        closed = int((~np.isin(weekdays, sessions)).sum())
        if np.isin(days, sessions).all() and closed >= DETECTION_COVERAGE * missing:
            return code, closed, missing
    return None


def choose_calendar(index: pd.DatetimeIndex, timeframe: str, given: str | None, source: str,
                    key: str = "--calendar") -> tuple[str, str]:
    """The calendar bars are imported on and why, for the import's report: `given` (named by `key`; a day it closes
    must hold no bar), else the one the bars show (`detect_calendar`)."""
    if given is not None:
        calendar = calendar_name(given, source, key)
        check_open_days(index, timeframe, calendar, source, key,
                        lambda: f"drop those bars from the export, or import with {key} "
                                f"{detect_calendar(index, timeframe)} (the calendar its bars show)")
        return calendar, key
    calendar = detect_calendar(index, timeframe)
    if calendar == WEEKDAYS:
        return calendar, "no bar falls on a Saturday or Sunday"
    if is_exchange(calendar):
        code, closed, missing = fitting_exchange(index)  # type: ignore[misc]
        return calendar, (f"detected: no bar on a day {code} closes, whose {closed} closed weekdays are "
                          f"{closed / missing:.0%} of the file's {missing} missing weekdays")
    return calendar, ""


def describe_calendar(calendar: str, why: str, per_year: float) -> str:
    """The import report's calendar line ('' for a detected 24/7: nothing to say)."""
    if not why:
        return ""
    closed = {ALL_WEEK: "every day is open", WEEKDAYS: "weekends are closed, not gaps"}.get(
        calendar, "weekends and holidays are closed, not gaps")
    return f"calendar: {calendar} ({why}): {closed}; {per_year:.0f} bars a year"


def bars_per_year(index: pd.DatetimeIndex, timeframe: str, calendar: str | float | None = None,
                  source: str = "") -> float:
    """How many of these bars make a year: `calendar` None takes the bars' own (`detect_calendar`; a caller with a
    recorded calendar passes it); 24/7 is 365 days of bars; weekdays is the bars held per year of their span, so
    closed days (weekends, and holidays left as holes) are not counted as bars; an exchange's daily bars are its
    sessions a year (`sessions_per_year`), its intraday bars the bars held per year of their span; a number is that
    number."""
    index = pd.DatetimeIndex(index)
    chosen = detect_calendar(index, timeframe) if calendar is None else _parsed(calendar, source)
    if not isinstance(chosen, str):
        return chosen
    if chosen == ALL_WEEK:
        return YEAR / timeframe_delta(timeframe)
    if is_exchange(chosen) and timeframe_delta(timeframe) >= DAY and len(index):
        days = _days(index)
        return sessions_per_year(chosen, days[0], days[-1])
    return len(index) / (_span(index, timeframe) / MEAN_YEAR)


def sessions_per_year(code: str, first: np.datetime64, last: np.datetime64) -> float:
    """The mean of the calendar years' session counts of exchange `code` from `first` to `last` (days), each year
    weighted by the share of it the span covers: a file of 2024 on XNYS gets 2024's 252 sessions. A year the calendar
    knows only in part (its first) is counted at its known part's rate."""
    first, last = _as_day(first), _as_day(last)
    sessions, known = _known_days(code, first, last, False)
    total = weights = 0.0
    for year in range(_year(first), _year(last) + 1):
        start, end = np.datetime64(f"{year}-01-01"), np.datetime64(f"{year}-12-31")
        start_known, end_known = max(start, known[0]), min(end, known[1])
        count = int(((sessions >= start_known) & (sessions <= end_known)).sum())
        in_year = int((end - start).astype(int)) + 1
        rate = count * in_year / (int((end_known - start_known).astype(int)) + 1)
        weight = (int((min(end, last) - max(start, first)).astype(int)) + 1) / in_year
        total, weights = total + weight * rate, weights + weight
    return total / weights


def check_open_days(index: pd.DatetimeIndex, timeframe: str, calendar: str, source: str, key: str,
                    fix: str | Callable[[], str]) -> None:
    """No bar may open on a day `calendar` closes: InputError in one line naming the file, `key` (where the calendar
    was named), how many bars, the first and its date, and `fix` (a function when the fix costs work to name, such
    as detecting the bars' own calendar: called only for a refusal)."""
    index = pd.DatetimeIndex(index)
    closed = closed_bars(index, timeframe, calendar)
    if not closed.any():
        return
    first = index[int(np.argmax(closed))]
    days = "a Saturday or Sunday" if calendar == WEEKDAYS else f"a day {calendar} is closed (a weekend or holiday)"
    where = f"{source}: " if source else ""
    raise InputError(f"{where}{key} is {calendar}, but {int(closed.sum())} of its {len(index)} {timeframe} bars "
                     f"open on {days} (first {first:%Y-%m-%d %H:%M}, a {first:%A}): "
                     f"{fix() if callable(fix) else fix}")


def check_calendar(index: pd.DatetimeIndex, timeframe: str, calendar: str | float, source: str) -> None:
    """A calendar given in the config must be one (a name, an exchange code or a number > 0), and must not close
    days on which the data has bars: InputError in one line naming the key, the file, the first such bar and the
    fix."""
    chosen = _parsed(calendar, source)
    if isinstance(chosen, str):
        check_open_days(index, timeframe, chosen, source, CALENDAR_KEY,
                        lambda: f"set it to {detect_calendar(index, timeframe)} (these bars' own calendar) or to the "
                                "bars a year as a number")


def closed_bars_between(index: pd.DatetimeIndex, timeframe: str, calendar: str) -> np.ndarray:
    """Per pair of consecutive bars, how many bar openings the calendar closes between them: those of the days it
    closes from the first bar's day to the second's (under weekdays, Friday's last bar and Monday's first are
    consecutive; under XNYS, the last bar before a holiday and the first after it too); under 24/7 none. A gap is
    what is missing beyond these."""
    if calendar == ALL_WEEK or len(index) < 2:
        return np.zeros(max(len(index) - 1, 0), dtype=np.int64)
    days = _days(index)
    opened = open_days(calendar, days.min(), days.max(), timeframe)
    between = (days[1:] - days[:-1]).astype(np.int64)
    open_between = np.searchsorted(opened, days[1:]) - np.searchsorted(opened, days[:-1])  # open days in [a, b)
    return (between - open_between) * int(DAY // timeframe_delta(timeframe))
