"""A year is counted in the data's own bars: 365 days of bars around the clock, the bars a year of its span where
nothing trades on weekends (daily stocks: about 252, not 365, which overstated Sharpe by about 20%). The importer
makes no flat bars for a weekdays file's weekends, whatever --gaps says, and records the calendar; env_config's
`calendar` overrides the annualization and is refused where the data trades on days it closes."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from envs.errors import InputError
from envs.trading.backtest import evaluate_policy
from envs.trading.bar_reader import BarReader
from envs.trading.bars_update import NewBars, plan_update
from envs.trading.calendar import bars_per_year, check_calendar, detect_calendar
from envs.trading.data import find_gaps, load_bars, save_bars
from envs.trading.env import SpotTradingEnv
from experiments import data as data_cli
from tests.conftest import daily_csv as csv_of
from tests.conftest import random_walk_bars

SMALL = {"window": 8, "episode_length": 50, "split_fractions": [0.6, 0.2, 0.2]}
HOLIDAY = pd.Timestamp("2021-07-05", tz="UTC")  # a Monday


def weekday_bars(years: float = 3.0, holidays_per_year: int = 9, seed: int = 0) -> pd.DataFrame:
    """Daily bars on weekdays only, from 2021-01-04 (a Monday), with `holidays_per_year` weekdays left out each year
    (HOLIDAY among them when there are any): a stock's daily file."""
    days = random_walk_bars(int(years * 365), seed=seed, start="2021-01-04", freq="1D")
    bars = days[days.index.day_of_week < 5]
    if holidays_per_year:
        every = len(bars) // int(holidays_per_year * years)
        holes = set(bars.index[every // 2::every]) | {HOLIDAY}
        bars = bars.drop(index=sorted(holes))
    return bars


def test_a_weekday_daily_series_has_about_252_bars_a_year_and_24_7_series_have_365_days_of_bars():
    stocks = weekday_bars()
    assert detect_calendar(stocks.index, "1d") == "weekdays"
    assert bars_per_year(stocks.index, "1d") == pytest.approx(252, abs=3)
    assert detect_calendar(random_walk_bars(1000, freq="1D").index, "1d") == "24/7"
    assert bars_per_year(random_walk_bars(1000, freq="1D").index, "1d") == 365
    assert bars_per_year(random_walk_bars(2000).index, "1h") == 8760
    hours = random_walk_bars(24 * 30)
    weekday_hours = hours[hours.index.day_of_week < 5]
    assert detect_calendar(weekday_hours.index, "1h") == "weekdays"  # hourly stock bars: no weekend either
    assert bars_per_year(weekday_hours.index, "1h") == pytest.approx(24 * 261, rel=0.05)
    assert detect_calendar(stocks.index[:9], "1d") == "24/7"  # under two weeks: no weekend seen, nothing shown
    assert bars_per_year(stocks.index, "1d", 260) == 260
    assert bars_per_year(stocks.index, "1d", "24/7") == 365


def test_the_scorer_annualizes_a_weekday_file_with_its_own_bars_a_year(tmp_path):
    path = save_bars(weekday_bars(), tmp_path / "SPY-USD_1d.parquet", "SPY-USD", "1d", gaps="drop",
                     calendar="weekdays")
    own = evaluate_policy(hold, {"data_path": str(path), **SMALL})
    around_the_clock = evaluate_policy(hold, {"data_path": str(path), **SMALL, "calendar": "24/7"})
    assert own.periods_per_year == pytest.approx(252, abs=3) and around_the_clock.periods_per_year == 365
    for name in ("agent", "buy_and_hold"):
        ratio = own.table.loc[name, "sharpe"] / around_the_clock.table.loc[name, "sharpe"]
        assert ratio == pytest.approx(math.sqrt(own.periods_per_year / 365), rel=1e-12)
    assert own.table.loc["buy_and_hold", "total_return"] == around_the_clock.table.loc["buy_and_hold", "total_return"]


def hold(obs: np.ndarray) -> np.ndarray:
    """Always long: the agent is buy-and-hold."""
    return np.ones(len(obs), dtype=int)


def _import(capsys, tmp_path: Path, *flags: str) -> tuple[int, str, str, Path]:
    out = tmp_path / "SPY-USD_1d.parquet"
    code = data_cli.main(["import", str(csv_of(weekday_bars(), tmp_path / "spy.csv")), "--symbol", "SPY-USD",
                          "--timeframe", "1d", "--out", str(out), "--force", *flags])
    captured = capsys.readouterr()
    return code, captured.out, captured.err, out


def test_importing_weekday_bars_makes_no_weekend_bars_fills_holidays_and_records_the_calendar(capsys, tmp_path):
    code, stdout, stderr, out = _import(capsys, tmp_path)
    assert code == 0, stderr
    bars = load_bars(out)
    assert not (bars.index.day_of_week >= 5).any()
    assert HOLIDAY in bars.index and bars.loc[HOLIDAY, "volume"] == 0  # a weekday hole: filled flat (--gaps ffill)
    assert bars.attrs["calendar"] == "weekdays" and bars.attrs["gaps"] == "ffill"
    assert find_gaps(bars.index, "1d", "weekdays").missing_bars == 0
    per_year = bars_per_year(bars.index, "1d", "weekdays")
    assert per_year == pytest.approx(261, abs=1)  # every weekday is a bar: the holidays were filled
    assert ("calendar: weekdays (no bar falls on a Saturday or Sunday): weekends are closed, not gaps; "
            f"{per_year:.0f} bars a year") in stdout
    env = SpotTradingEnv({"data_path": str(out), **SMALL})
    assert env.market.calendar == "weekdays" and env.market.bars_per_year == per_year


def test_with_gaps_drop_a_holiday_stays_a_hole(capsys, tmp_path):
    code, stdout, stderr, out = _import(capsys, tmp_path, "--gaps", "drop")
    assert code == 0, stderr
    bars = load_bars(out)
    assert HOLIDAY not in bars.index and not (bars.index.day_of_week >= 5).any()
    assert bars.attrs["calendar"] == "weekdays" and "(handled: drop)" in stdout
    holidays = len(weekday_bars(holidays_per_year=0)) - len(weekday_bars())
    assert f"gaps: {holidays} missing bars" in stdout  # the holidays only: no weekend among them
    assert SpotTradingEnv({"data_path": str(out), **SMALL}).market.bars_per_year == pytest.approx(252, abs=3)


def test_a_crypto_file_stays_24_7_and_its_holes_are_filled_on_weekends_too(capsys, tmp_path):
    days = random_walk_bars(60, freq="1D").drop(index=pd.Timestamp("2021-01-09", tz="UTC"))  # a Saturday
    out = tmp_path / "BTC-USD_1d.parquet"
    assert data_cli.main(["import", str(csv_of(days, tmp_path / "btc.csv")), "--symbol", "BTC-USD", "--timeframe",
                          "1d", "--out", str(out)]) == 0
    stdout = capsys.readouterr().out
    assert "calendar:" not in stdout and "1 missing bars" in stdout
    bars = load_bars(out)
    assert len(bars) == 60 and bars.attrs["calendar"] == "24/7"


def test_calendar_weekdays_on_a_file_with_weekend_bars_is_refused_in_one_line(tmp_path):
    path = save_bars(random_walk_bars(400, freq="1D"), tmp_path / "BTC-USD_1d.parquet", "BTC-USD", "1d")
    with pytest.raises(InputError) as caught:
        SpotTradingEnv({"data_path": str(path), **SMALL, "calendar": "weekdays"})
    message = str(caught.value)
    assert "\n" not in message and "environment.env_config.calendar is weekdays" in message
    assert str(path) in message and "first 2021-01-02 00:00, a Saturday" in message
    assert "set it to 24/7" in message  # the fix


def test_a_number_overrides_the_bars_a_year(tmp_path):
    path = save_bars(random_walk_bars(400, freq="1D"), tmp_path / "BTC-USD_1d.parquet", "BTC-USD", "1d")
    assert SpotTradingEnv({"data_path": str(path), **SMALL}).market.bars_per_year == 365
    env = SpotTradingEnv({"data_path": str(path), **SMALL, "calendar": 260})
    assert env.market.bars_per_year == 260 and env.market.calendar == "24/7"
    assert any("annualized with 260.0 bars a year (environment.env_config.calendar)" in line
               for line in env.plan_lines())


@pytest.mark.parametrize("calendar", [0, -252, "weekends", True, float("inf")])
def test_a_bad_calendar_is_refused_naming_the_key(bars_file, calendar):
    with pytest.raises(InputError, match=r"env_config\.calendar: not a calendar: use 24/7") as caught:
        SpotTradingEnv({"data_path": str(bars_file), **SMALL, "calendar": calendar})
    assert "\n" not in str(caught.value)
    with pytest.raises(InputError, match=r"^spy\.csv: environment\.env_config\.calendar .*: not a calendar"):
        check_calendar(weekday_bars().index, "1d", calendar, "spy.csv")


def test_a_weekdays_model_reads_friday_then_monday_as_consecutive_bars(tmp_path):
    bars = weekday_bars(holidays_per_year=0)
    path = save_bars(bars, tmp_path / "SPY-USD_1d.parquet", "SPY-USD", "1d", calendar="weekdays")
    reader = BarReader.for_env_config({"data_path": str(path), **SMALL})
    assert reader.calendar == "weekdays" and reader.periods_per_year(bars) == pytest.approx(261, abs=2)
    window = bars.iloc[-reader.bars_needed - 1:]
    assert (window.index[1:] - window.index[:-1]).max() == pd.Timedelta(days=3)  # weekends in it
    reader.read(window)  # no refusal: the weekends are closed, not holes
    with pytest.raises(InputError, match="consecutive 1d bars"):
        reader.read(window.drop(index=window.index[-3]))  # a weekday missing is a hole


def test_an_update_appends_monday_after_friday_without_filling_the_weekend(tmp_path):
    bars = weekday_bars(years=1, holidays_per_year=0)
    fridays = np.flatnonzero(bars.index.day_of_week == 4)
    cut = int(fridays[len(fridays) // 2]) + 1  # the stored bars end on a Friday
    stored = load_bars(save_bars(bars.iloc[:cut], tmp_path / "SPY-USD_1d.parquet", "SPY-USD", "1d",
                                 calendar="weekdays"))
    update = plan_update(stored, NewBars(bars.iloc[cut:], "new.csv", "SPY-USD", "1d"), "SPY-USD_1d.parquet",
                         "ffill", force=False)
    assert update.bars.index.equals(bars.index) and update.gaps.missing_bars == 0
