"""The accounting check: the portfolio book replays universal-portfolios' weights on the first 1,000 days of NYSE(O)
and reaches the library's wealth; with costs, its exact cost stays a pinned gap from the library's first-order one.

`scripts/setup.sh test` installs the library (the `portfolio` step), so this runs in CI; elsewhere it is skipped with
the command that installs it. experiments/studies/portfolio_accounting.py gives the full-length numbers
(docs/portfolio.md, "The accounting check").
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from envs.errors import InputError
from envs.portfolio.olps import library_available, olps_run, olps_weights

DAYS = 1000


@pytest.fixture(scope="module")
def closes() -> pd.DataFrame:
    fix = library_available()
    if fix is not None:
        pytest.skip(fix)
    from experiments.studies.portfolio_accounting import nyse_o

    return nyse_o(DAYS)


@pytest.fixture(scope="module")
def table(closes: pd.DataFrame) -> pd.DataFrame:
    from experiments.studies.portfolio_accounting import accounting_table

    return accounting_table(closes, 0.001)


def test_the_calendar_is_weekdays_from_1962_07_03(closes: pd.DataFrame) -> None:
    assert closes.shape == (DAYS, 36) and not closes.isna().to_numpy().any()
    assert str(closes.index[0].date()) == "1962-07-03" and closes.index.dayofweek.max() == 4


def test_without_costs_the_book_reaches_the_library_wealth(table: pd.DataFrame) -> None:
    assert list(table.index) == ["ucrp", "ubah", "olmar", "pamr"]
    assert np.all(np.abs(table["gap"].to_numpy(float)) < 1e-9), table


def test_with_costs_the_exact_book_keeps_its_gap_to_the_first_order_library(table: pd.DataFrame) -> None:
    """The book's first purchase (all cash to 1/N) costs 1 - 1/1.001 and the library's is free, so the study divides
    it out (exact: every later rebalance scales with the wealth); without that the gap would be about -1e-3.
    What is left for UCRP is -8.194e-6: the library takes fee x turnover off the period's gross return, as if the
    fee left after the period's move, while the book pays it at the fill and the cost counts itself. A book that
    charged the first-order cost (1 - fee x turnover) would be at -8.879e-6, one that paid half or double the fee at
    +5.2e-3 or -1.04e-2, so 1e-8 fails each of them."""
    assert table.loc["ucrp", "gap_fee"] == pytest.approx(-8.194e-6, abs=1e-8)
    assert abs(table.loc["ubah", "gap_fee"]) < 1e-12  # bought once, never rebalanced: no cost after the first
    # OLMAR and PAMR trade far more than UCRP: the same two effects, larger (docs/portfolio.md)
    assert np.all(table.loc[["olmar", "pamr"], "gap_fee"].to_numpy(float) < 0.0)


def test_library_row_t_is_held_over_the_relative_ending_at_t(closes: pd.DataFrame) -> None:
    """olps_weights' timing: row t is held over p_t / p_{t-1}, so the library's wealth is the product over t >= 1."""
    run = olps_run("pamr", closes)
    relatives = (closes / closes.shift(1)).to_numpy()[1:]
    assert np.prod((run.weights[1:] * relatives).sum(axis=1)) == pytest.approx(run.wealths[0], rel=1e-12)


def test_a_frame_with_nan_or_an_unknown_algorithm_is_refused() -> None:
    prices = pd.DataFrame({"a": [1.0, np.nan, 1.1], "b": [1.0, 1.1, 1.2]})
    with pytest.raises(InputError, match="holds NaN in a"):
        olps_weights("olmar", prices)
    with pytest.raises(InputError, match="not one of olmar, pamr"):
        olps_weights("ucrp", prices.fillna(1.0))


@pytest.mark.parametrize("name", ["nyse_o", "tse", "djia"])
def test_the_env_walking_its_rows_with_window_1_reaches_the_librarys_ucrp_wealth(name: str, tmp_path) -> None:
    """The env itself, not only its book: an OLPS data set's first 1,000 days (NYSE(O); also TSE's 88 stocks and
    DJIA's 507 days, data this project never tuned on) as a close-only wide table on a weekday calendar, window 1, a
    decision every day, no costs; a policy whose scores put e^-100 on cash walks the train part (99% of the rows) in
    one episode. Its equity is the library's UCRP wealth over the same relatives."""
    from envs.portfolio.env import PortfolioEnv
    from envs.portfolio.olps import bundled_prices
    from experiments.studies.portfolio_accounting import CALENDAR_START

    fix = library_available()
    if fix is not None:
        pytest.skip(fix)
    prices = bundled_prices(name).iloc[:DAYS]
    closes = prices.set_axis(pd.bdate_range(CALENDAR_START, periods=len(prices), name="date"))

    path = tmp_path / "nyse_o.csv"
    closes.rename(columns=lambda c: f"S{c}:close").rename_axis("date").reset_index().to_csv(path, index=False)
    env = PortfolioEnv({"table_path": str(path), "timeframe": "1d", "window": 1, "decision_interval": 1,
                        "features": ["log_return"], "fee_bps": 0.0, "slippage_bps": 0.0, "kappa": 50.0,
                        "split_fractions": [0.99, 0.005, 0.005], "episode_length": None, "split": "train"})
    scores = np.r_[-1.0, np.ones(closes.shape[1])].astype(np.float32)
    obs, info = env.reset(seed=0)
    first, done = info["row"], False
    while not done:
        obs, _, terminated, truncated, info = env.step(scores)
        done = terminated or truncated
    last = info["row"]
    library = olps_run("ucrp", closes.iloc[first:last + 1], [0.0]).wealths[0]
    assert info["equity"] == pytest.approx(library, rel=1e-9)
    assert last - first > 0.95 * len(closes)
