"""Exchange holidays are closed days (issue 51, point 7): a calendar may be an exchange code of exchange_calendars
(XNYS, ...). Under it a holiday is no gap (the import fills none, a reader sees no hole), a year is the exchange's
sessions (XNYS 2024: 252), a bar on a day it closes is refused in one line, and a daily file whose missing weekdays
are an exchange's holidays is detected as on that exchange. The files here are built from exchange_calendars'
sessions, not from data outside the repository."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import exchange_calendars
import numpy as np
import pandas as pd
import pytest

from envs.errors import InputError
from envs.portfolio.env import PortfolioEnv
from envs.trading.calendar import bars_per_year, closed_bars_between, detect_calendar, sessions_per_year
from envs.trading.csv_import import import_csv
from envs.trading.data import find_gaps, load_bars, save_bars, validate_bars
from envs.trading.env import SpotTradingEnv
from experiments import data as data_cli
from tests.conftest import daily_csv as csv_of
from tests.conftest import random_walk_bars

REPO = Path(__file__).resolve().parents[2]
SMALL = {"window": 8, "episode_length": 50, "split_fractions": [0.6, 0.2, 0.2]}
CHRISTMAS = pd.Timestamp("2024-12-25", tz="UTC")


def sessions(start: str, end: str, code: str = "XNYS") -> pd.DatetimeIndex:
    """The exchange's session dates as daily bar stamps (00:00 UTC)."""
    days = exchange_calendars.get_calendar(code, start=start, end=end).sessions
    return pd.DatetimeIndex(days).tz_localize("UTC").rename("timestamp")


def daily_bars(index: pd.DatetimeIndex, seed: int = 0) -> pd.DataFrame:
    """A random walk on the given days (a stock index's daily bars)."""
    bars = random_walk_bars(len(index), seed=seed, freq="1D")
    bars.index = index
    return bars


def same_days(index: pd.DatetimeIndex, days: pd.DatetimeIndex) -> bool:
    """The same instants, whatever their resolution (a parquet keeps microseconds)."""
    return np.array_equal(index.as_unit("ns").asi8, days.as_unit("ns").asi8)


def session_counts(first_year: int, last_year: int) -> list[int]:
    return [len(sessions(f"{year}-01-01", f"{year}-12-31")) for year in range(first_year, last_year + 1)]


def holidays_in(index: pd.DatetimeIndex) -> int:
    """The weekdays from the first bar to the last that hold no bar."""
    weekdays = pd.bdate_range(index[0], index[-1])
    return int((~weekdays.isin(index)).sum())


def test_xnys_2024_has_252_sessions_and_its_daily_bars_252_bars_a_year():
    days = sessions("2024-01-01", "2024-12-31")
    assert len(days) == 252
    assert detect_calendar(days, "1d") == "XNYS"
    assert bars_per_year(days, "1d", "XNYS") == pytest.approx(252, abs=1e-9)
    assert bars_per_year(days, "1d") == pytest.approx(252, abs=1e-9)  # detected
    assert bars_per_year(days, "1d", "nyse") == pytest.approx(252, abs=1e-9)  # an alias names its code
    assert bars_per_year(days, "1d", "weekdays") == pytest.approx(252 * 365.25 / 365)  # its bars over 01-02..12-31
    # a holiday between two sessions is closed, not a gap: Friday 2024-03-28 -> Monday 2024-04-01 (Good Friday)
    easter = days[(days >= "2024-03-27") & (days <= "2024-04-02")]
    assert list(closed_bars_between(easter, "1d", "XNYS")) == [0, 3, 0]
    assert find_gaps(days, "1d", "XNYS").missing_bars == 0 and find_gaps(days, "1d", "weekdays").missing_bars == 9


def test_a_daily_index_with_holidays_imports_on_xnys_with_no_filled_bar(capsys, tmp_path):
    days = sessions("2015-01-01", "2020-12-31")
    out = tmp_path / "SPX-USD_1d.parquet"
    code = data_cli.main(["import", str(csv_of(daily_bars(days), tmp_path / "spx.csv")), "--symbol", "SPX-USD",
                          "--timeframe", "1d", "--out", str(out)])  # --gaps ffill, the default
    stdout = capsys.readouterr().out
    assert code == 0
    missing = holidays_in(days)
    assert missing == 54
    assert "gaps: no gaps" in stdout
    assert (f"calendar: XNYS (detected: no bar on a day XNYS closes, whose {missing} closed weekdays are 100% of the "
            f"file's {missing} missing weekdays): weekends and holidays are closed, not gaps; 252 bars a year"
            ) in stdout
    bars = load_bars(out)
    assert same_days(bars.index, days) and bars.attrs["calendar"] == "XNYS"  # no holiday filled
    env = SpotTradingEnv({"data_path": str(out), **SMALL})
    assert env.market.calendar == "XNYS"
    assert env.market.bars_per_year == pytest.approx(sessions_per_year("XNYS", days[0], days[-1]))
    assert 251.5 < env.market.bars_per_year < 252.2
    assert data_cli.main(["show", str(out)]) == 0
    assert "calendar: XNYS, 252 bars a year" in capsys.readouterr().out


def test_calendar_weekdays_still_fills_the_holidays(capsys, tmp_path):
    days = sessions("2015-01-01", "2020-12-31")
    out = tmp_path / "SPX-USD_1d.parquet"
    assert data_cli.main(["import", str(csv_of(daily_bars(days), tmp_path / "spx.csv")), "--symbol", "SPX-USD",
                          "--timeframe", "1d", "--out", str(out), "--calendar", "weekdays"]) == 0
    stdout = capsys.readouterr().out
    assert "gaps: 54 missing bars" in stdout and "(handled: ffill)" in stdout
    assert "calendar: weekdays (--calendar): weekends are closed, not gaps; 261 bars a year" in stdout
    bars = load_bars(out)
    assert len(bars) == len(days) + 54 and bars.attrs["calendar"] == "weekdays"


def test_a_bar_on_christmas_under_xnys_is_refused_in_one_line(tmp_path):
    days = sessions("2024-01-01", "2024-12-31").append(pd.DatetimeIndex([CHRISTMAS])).sort_values()
    bars = daily_bars(days)
    with pytest.raises(InputError) as caught:
        validate_bars(bars, "spx.parquet", "1d", calendar="XNYS")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("spx.parquet: the calendar in its metadata is XNYS, but 1 of its 253 1d bars open on "
                              "a day XNYS is closed (a weekend or holiday) (first 2024-12-25 00:00, a Wednesday): "
                              "re-import")
    csv = csv_of(bars, tmp_path / "spx.csv")
    with pytest.raises(InputError) as caught:
        import_csv(csv, "1d", calendar="XNYS")
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{csv}: --calendar is XNYS, but 1 of its 253 1d bars")
    assert "first 2024-12-25 00:00, a Wednesday" in message
    assert message.endswith("drop those bars from the export, or import with --calendar weekdays (the calendar its "
                            "bars show)")
    assert detect_calendar(days, "1d") == "weekdays"  # a bar on its holiday: not XNYS
    path = save_bars(bars, tmp_path / "SPX-USD_1d.parquet", "SPX-USD", "1d", gaps="drop", calendar="weekdays")
    with pytest.raises(InputError, match=r"environment\.env_config\.calendar is XNYS, but 1 of its 253 1d bars .* "
                                         r"set it to weekdays \(these bars' own calendar\)"):
        SpotTradingEnv({"data_path": str(path), **SMALL, "timeframe": "1d", "calendar": "XNYS"})


def test_the_import_command_refuses_a_holiday_bar_under_calendar_xnys_in_one_line_exit_2(tmp_path):
    days = sessions("2024-01-01", "2024-12-31").append(pd.DatetimeIndex([CHRISTMAS])).sort_values()
    csv = csv_of(daily_bars(days), tmp_path / "spx.csv")
    out = tmp_path / "SPX-USD_1d.parquet"
    done = subprocess.run([sys.executable, "-m", "experiments.data", "import", str(csv), "--symbol", "SPX-USD",
                           "--timeframe", "1d", "--calendar", "XNYS", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert str(csv) in lines[0] and "--calendar is XNYS" in lines[0] and "2024-12-25 00:00" in lines[0]
    assert not out.exists()


def test_an_unknown_exchange_code_is_refused_naming_the_key_and_known_codes(capsys, tmp_path, bars_file):
    with pytest.raises(InputError) as caught:
        SpotTradingEnv({"data_path": str(bars_file), **SMALL, "calendar": "XNYQ"})
    message = str(caught.value)
    assert "\n" not in message and "env_config.calendar: not a calendar" in message
    assert "XNYS, XLON, XTKS" in message and "weekdays" in message
    csv = csv_of(daily_bars(sessions("2024-01-01", "2024-03-31")), tmp_path / "spx.csv")
    assert data_cli.main(["import", str(csv), "--symbol", "SPX-USD", "--timeframe", "1d", "--calendar", "XNYQ",
                          "--out", str(tmp_path / "out.parquet")]) == 2
    stderr = capsys.readouterr().err.strip()
    assert "\n" not in stderr and "--calendar 'XNYQ': not a calendar" in stderr
    assert data_cli.main(["import", str(csv), "--symbol", "SPX-USD", "--timeframe", "1d", "--calendar", "252",
                          "--out", str(tmp_path / "out.parquet")]) == 2
    assert "a file records a calendar, not a number of bars a year" in capsys.readouterr().err


def test_a_file_from_1990_works_under_xnys(tmp_path):
    days = sessions("1990-01-01", "1994-12-31")  # before exchange_calendars' default start (about 20 years back)
    assert detect_calendar(days, "1d") == "XNYS"
    assert bars_per_year(days, "1d", "XNYS") == pytest.approx(np.mean(session_counts(1990, 1994)), abs=0.02)
    bars, report = import_csv(csv_of(daily_bars(days), tmp_path / "old.csv"), "1d", calendar="XNYS")
    assert same_days(bars.index, days) and report.calendar == "XNYS" and report.gaps.missing_bars == 0


def test_detection_wants_the_holidays_of_one_exchange_and_few_other_holes():
    days = sessions("2015-01-01", "2020-12-31")
    assert detect_calendar(days, "1d") == "XNYS"
    assert detect_calendar(days.delete(100), "1d") == "weekdays"  # 1 of 55 missing weekdays is a session: < 99%
    assert detect_calendar(sessions("2015-01-01", "2020-12-31", "XLON"), "1d") == "XLON"
    assert detect_calendar(pd.bdate_range("2015-01-01", "2020-12-31", tz="UTC"), "1d") == "weekdays"  # none missing


def test_hourly_bars_on_xnys_take_a_session_day_as_open_all_day():
    hours = pd.date_range("2024-01-10", "2024-01-18", freq="1h", tz="UTC", inclusive="left")
    open_hours = hours[(hours.day_of_week < 5) & (hours.normalize() != "2024-01-15")]  # Monday 15th: MLK day
    assert find_gaps(open_hours, "1h", "XNYS").missing_bars == 0
    assert find_gaps(open_hours, "1h", "weekdays").missing_bars == 24
    assert bars_per_year(open_hours, "1h", "XNYS") == bars_per_year(open_hours, "1h", "weekdays")


def test_a_universe_on_xnys_annualizes_by_its_sessions(tmp_path):
    days = sessions("2016-01-01", "2019-12-31")
    closes = {f"S{i}:close": daily_bars(days, seed=i)["close"].to_numpy() for i in range(3)}
    table = tmp_path / "stocks.csv"
    pd.DataFrame({"date": days.strftime("%Y-%m-%d"), **closes}).to_csv(table, index=False)
    config = {"window": 4, "decision_interval": 1, "episode_length": None, "fee_bps": 10.0, "slippage_bps": 2.0,
              "features": ["log_return"], "table_path": str(table), "timeframe": "1d"}
    by_sessions = sessions_per_year("XNYS", days[0].to_datetime64(), days[-1].to_datetime64())
    assert by_sessions == pytest.approx(np.mean(session_counts(2016, 2019)), abs=0.02)
    assert PortfolioEnv({**config, "calendar": "XNYS"}).market.bars_per_year == pytest.approx(by_sessions)
    assert PortfolioEnv(config).market.bars_per_year == pytest.approx(by_sessions)  # detected
    weekdays = PortfolioEnv({**config, "calendar": "weekdays"}).market.bars_per_year
    assert weekdays == pytest.approx(len(days) / ((days[-1] - days[0] + pd.Timedelta(days=1)).days / 365.25))
