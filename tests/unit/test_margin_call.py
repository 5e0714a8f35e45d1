"""A short's margin call (envs.trading.ledger): liquidated at the mark that revealed the breach, equity
floored, the episode terminated; the same in the ledger, the single env, the batched env and the backtest."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from envs.errors import InputError
from envs.trading.backtest import agent_targets, evaluate_policy
from envs.trading.data import save_bars
from envs.trading.env import SpotTradingEnv
from envs.trading.ledger import EQUITY_FLOOR, Ledger, simulate_positions

SHORT = 0  # long_short's action order is (-1, 0, 1)


def _short_ledger(maintenance_margin: float = 0.1) -> Ledger:
    ledger = Ledger(fee_rate=0.0, slippage_rate=0.0, maintenance_margin=maintenance_margin)
    ledger.rebalance(-1.0, 100.0)  # sells 0.01 coin: cash 2, units -0.01
    return ledger


def test_a_short_is_called_at_the_maintenance_margin_and_not_before():
    # equity = 2 - p/100, borrowed value = p/100: called when 2 - p/100 <= 0.1 p/100, i.e. p >= 181.818...
    ledger = _short_ledger()
    assert not ledger.margin_call(181.8) and ledger.units == -0.01 and not ledger.margin_called
    assert ledger.margin_call(181.82)
    assert ledger.units == 0.0 and ledger.position == 0.0 and ledger.margin_called and ledger.trades == 2
    assert math.isclose(ledger.equity(500.0), 2 - 1.8182)  # flat: later prices no longer matter


def test_a_gap_past_zero_equity_floors_the_account_instead_of_going_negative():
    ledger = _short_ledger()
    assert ledger.margin_call(350.0)  # equity would be 2 - 3.5 < 0
    assert ledger.cash == EQUITY_FLOOR and ledger.equity(350.0) > 0


def test_longs_are_never_called():
    ledger = Ledger(fee_rate=0.001, slippage_rate=0.0)
    ledger.rebalance(1.0, 100.0)
    assert not ledger.margin_call(1.0) and ledger.units > 0


def test_simulated_equity_stays_at_the_liquidated_value_after_a_call():
    # Short 1/120 coin at the first open (cash 2); at 220, equity 2 - 220/120 = 1/6 <= 0.1 x 220/120.
    closes = np.array([100.0, 120.0, 150.0, 220.0, 130.0, 90.0])
    equity, ledger = simulate_positions(np.full(6, -1.0), closes, closes, 0.0, 0.0)
    assert ledger.margin_called
    assert np.allclose(equity, [1.0, 1.0, 0.75, 1 / 6, 1 / 6, 1 / 6])


def test_always_short_through_a_rally_terminates_with_a_margin_call_on_the_bundled_data():
    """The case that raised "math domain error": reset(seed=38) of the bundled BTC train split, held short."""
    env = SpotTradingEnv({"positions": "long_short"})
    env.reset(seed=38)
    rewards, terminated, truncated = [], False, False
    while not (terminated or truncated):
        _, reward, terminated, truncated, info = env.step(SHORT)
        rewards.append(reward)
    assert terminated and not truncated and info["margin_call"] and info["position"] == 0.0
    assert all(math.isfinite(r) for r in rewards)
    # The rewards still add up to the log of the final equity (reward_scale 100).
    assert math.isclose(sum(rewards) / 100.0, math.log(info["equity"]), rel_tol=1e-9)
    assert 0 < info["equity"] < 0.2


def test_the_validation_walk_ends_at_the_call_before_equity_would_go_negative():
    env = SpotTradingEnv({"positions": "long_short", "split": "validation", "episode_length": None})
    env.reset(seed=0)
    terminated = truncated = False
    while not (terminated or truncated):
        _, reward, terminated, truncated, info = env.step(SHORT)
        assert math.isfinite(reward)
    called_at = pd.Timestamp(env.market.timestamps[info["row"]])
    assert terminated and called_at < pd.Timestamp("2019-05-11 06:00", tz="UTC")


def _rally_file(tmp_path) -> str:
    """1% up every hour: any short held for a few days of the test split is called."""
    n = 600
    closes = 100 * 1.01 ** np.arange(1, n + 1)
    opens = closes / 1.01
    bars = pd.DataFrame({"open": opens, "high": closes * 1.001, "low": opens * 0.999, "close": closes,
                         "volume": np.ones(n)},
                        index=pd.date_range("2022-01-01", periods=n, freq="1h", tz="UTC", name="timestamp"))
    return str(save_bars(bars, tmp_path / "RALLY-USD_1h.parquet", "RALLY-USD", "1h"))


def always_short(obs: np.ndarray) -> np.ndarray:
    return np.full(len(obs), SHORT)


def test_the_backtest_replays_the_call_like_the_env_walk(tmp_path):
    config = {"data_path": _rally_file(tmp_path), "positions": "long_short", "window": 8, "episode_length": 50,
              "split_fractions": [0.6, 0.2, 0.2], "split": "test"}
    env = SpotTradingEnv({**config, "episode_length": None})
    targets = agent_targets(always_short, env)
    assert env.ledger.margin_called and targets[-1] == 0.0 and targets[0] == -1.0
    report = evaluate_policy(always_short, config)
    agent = report.table.loc["agent"]
    assert math.isclose(agent["final_equity"], env.ledger.equity(env.market.closes[-1]), rel_tol=1e-12)
    assert 0 < agent["final_equity"] < 0.2 and agent["trades"] == 2


@pytest.mark.parametrize("margin", [0.0, 1.0, -0.5])
def test_maintenance_margin_must_be_a_fraction(margin):
    with pytest.raises(InputError, match="maintenance_margin"):
        SpotTradingEnv({"positions": "long_short", "maintenance_margin": margin})
