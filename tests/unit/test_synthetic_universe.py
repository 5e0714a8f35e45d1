"""SYNTHETIC universe: deterministic valid bars, one market factor, and a cross-sectional edge only where planted.

The planted universe is a canary for portfolio agents: a plain rule that a model reading each coin's own window
could find (long the coins with the best last day, against 1/N) must earn a clear edge there, and nothing on the
noise twin, which is the same market with the signal shuffled away. If the rule found nothing on the planted
universe, a portfolio agent's failure to learn would say nothing about the agent.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from envs.trading.synthetic import START
from envs.trading.synthetic_universe import synthetic_universe, universe_symbols

N_ASSETS, N_BARS, SEED = 20, 20_000, 0
LOOKBACK = HOLD = 24  # one day of hourly bars: the planted horizon
COST = 0.001  # 10 bps of the traded notional


def closes(universe: dict[str, pd.DataFrame]) -> np.ndarray:
    """(bar, coin) close prices."""
    return np.column_stack([bars["close"].to_numpy() for bars in universe.values()])


@pytest.fixture(scope="module")
def planted() -> np.ndarray:
    return closes(synthetic_universe(N_ASSETS, "1h", N_BARS, SEED, planted=True))


@pytest.fixture(scope="module")
def noise() -> np.ndarray:
    return closes(synthetic_universe(N_ASSETS, "1h", N_BARS, SEED, planted=False))


def book_returns(weights: np.ndarray, growth: np.ndarray, cost: float) -> np.ndarray:
    """Each period's simple return of a book rebalanced to `weights` (period, coin) at the period's start, where
    the coins grow by `growth`, paying `cost` per unit of notional traded (the first period buys from cash)."""
    value = (weights * growth).sum(axis=1)
    drifted = weights * growth / value[:, None]
    held = np.vstack([np.zeros(weights.shape[1]), drifted[:-1]])
    return (1.0 - cost * np.abs(weights - held).sum(axis=1)) * value - 1.0


def top_quartile_excess(close: np.ndarray, lookback: int = LOOKBACK, cost: float = 0.0) -> np.ndarray:
    """Per HOLD-bar period: the return of the equal-weighted top quartile by trailing `lookback`-bar return minus
    that of 1/N, both rebalanced every HOLD bars. Oracle-free: it reads past closes only."""
    starts = np.arange(lookback, len(close) - HOLD, HOLD)
    growth = close[starts + HOLD] / close[starts]
    n_top = close.shape[1] // 4
    top = np.argsort(close[starts - lookback] / close[starts], axis=1)[:, :n_top]  # best trailing return first
    rule = np.zeros_like(growth)
    np.put_along_axis(rule, top, 1.0 / n_top, axis=1)
    equal = np.full_like(growth, 1.0 / close.shape[1])
    return book_returns(rule, growth, cost) - book_returns(equal, growth, cost)


def t_stat(x: np.ndarray) -> float:
    return float(x.mean() / x.std(ddof=1) * np.sqrt(len(x)))


def mean_pairwise_correlation(close: np.ndarray) -> float:
    corr = np.corrcoef(np.diff(np.log(close), axis=0).T)
    n = len(corr)
    return float((corr.sum() - n) / (n * (n - 1)))


def test_deterministic_per_seed():
    first = synthetic_universe(4, "1h", 500, seed=3, planted=True)
    again = synthetic_universe(4, "1h", 500, seed=3, planted=True)
    other = synthetic_universe(4, "1h", 500, seed=4, planted=True)
    for symbol, bars in first.items():
        pd.testing.assert_frame_equal(bars, again[symbol])
        assert bars.attrs == again[symbol].attrs
        assert not np.allclose(bars["close"], other[symbol]["close"])


def test_symbols_lengths_and_valid_bars():
    universe = synthetic_universe(12, "4h", 700, seed=1, planted=False)
    assert list(universe) == universe_symbols(12) == [f"SYN{i:03d}-USD" for i in range(12)]
    index = pd.date_range(START, periods=700, freq="4h", name="timestamp")
    for symbol, bars in universe.items():
        pd.testing.assert_index_equal(bars.index, index)
        assert list(bars.columns) == ["open", "high", "low", "close", "volume"]
        assert (bars["low"] <= bars[["open", "close"]].min(axis=1)).all()
        assert (bars["high"] >= bars[["open", "close"]].max(axis=1)).all()
        assert (bars["volume"] > 0).all()
        assert bars.attrs["symbol"] == symbol and bars.attrs["timeframe"] == "4h"
        assert bars.attrs["synthetic"] is True
        assert "noise twin" in bars.attrs["generator"] and "seed 1" in bars.attrs["generator"]
    assert "planted" in synthetic_universe(2, "4h", 10, seed=1, planted=True)["SYN000-USD"].attrs["generator"]


def test_a_coin_does_not_depend_on_the_universe_size():
    small = synthetic_universe(3, "1h", 300, seed=2, planted=False)
    large = synthetic_universe(7, "1h", 300, seed=2, planted=False)
    for symbol, bars in small.items():
        pd.testing.assert_frame_equal(bars, large[symbol])


def test_a_common_market_factor(planted, noise):
    assert mean_pairwise_correlation(planted) > 0.2
    assert mean_pairwise_correlation(noise) > 0.2


def test_the_noise_twin_is_the_same_market_without_the_signal(planted, noise):
    planted_returns, noise_returns = np.diff(np.log(planted), axis=0), np.diff(np.log(noise), axis=0)
    # Same factor: the equal-weighted market return moves bar for bar with the planted one's.
    assert np.corrcoef(planted_returns.mean(axis=1), noise_returns.mean(axis=1))[0, 1] > 0.99
    # Same volatility per coin, to 1% (the drift's share of a bar's variance is under 1%).
    np.testing.assert_allclose(noise_returns.std(axis=0), planted_returns.std(axis=0), rtol=0.01)


def test_the_planted_signal_is_found_and_only_there(planted, noise):
    assert t_stat(top_quartile_excess(planted)) > 3.0
    assert abs(t_stat(top_quartile_excess(noise))) < 2.5


def test_the_planted_edge_survives_daily_costs(planted):
    assert top_quartile_excess(planted, cost=COST).mean() > 0.0


def test_a_30_day_lookback_sees_little_of_it(planted):
    """The planted horizon is a day or two: the classic momentum baseline must not get the edge for free (over
    seeds 0-29 it earns 0-55% of the 1-day lookback's mean excess return, about 30% typically)."""
    assert top_quartile_excess(planted, lookback=30 * 24).mean() < 0.6 * top_quartile_excess(planted).mean()
