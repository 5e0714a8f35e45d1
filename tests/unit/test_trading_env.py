"""The trading env's contract: causality, reward = ledger, costs, seeds, splits."""

from __future__ import annotations

import math
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import envs  # noqa: F401  (registers the ids)
from envs.errors import InputError
from envs.trading.backtest import evaluate_policy, performance
from envs.trading.data import save_bars
from envs.trading.env import SpotTradingEnv
from envs.trading.ledger import Ledger
from tests.conftest import random_walk_bars

SMALL = {"window": 8, "episode_length": 50, "split_fractions": [0.6, 0.2, 0.2]}


def make(bars_file, **overrides) -> SpotTradingEnv:
    return SpotTradingEnv({"data_path": str(bars_file), **SMALL, **overrides})


def rollout(env: SpotTradingEnv, actions, seed=0):
    obs, info = env.reset(seed=seed)
    observations, rewards, infos = [obs], [], [info]
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        observations.append(obs)
        rewards.append(reward)
        infos.append(info)
        assert not terminated
        if truncated:
            break
    return observations, rewards, infos


def test_passes_gymnasium_env_checker(bars_file):
    """Gymnasium's checker raises on a broken API and warns on a doubtful one (dtypes, bounds, seeding): neither."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(make(bars_file), skip_render_check=True)
    assert [str(w.message) for w in caught] == []


def test_default_make_loads_bundled_btc():
    env = gym.make("trading/Spot-v0")
    obs, _ = env.reset(seed=1)
    assert env.observation_space.contains(obs)
    assert env.unwrapped.market.timeframe == "1h"


def test_no_look_ahead(tmp_path, bars_file):
    """Changing every price after bar t changes nothing the agent saw or earned up to t."""
    bars = random_walk_bars()
    env = make(bars_file, split="test", episode_length=None)
    obs0, _ = env.reset(seed=0)
    t0 = env._t
    cut = t0 + 30  # decisions up to row `cut` have been filled by step 30
    changed = bars.copy()
    scale = np.where(np.arange(len(bars)) > cut, 3.0, 1.0)
    for column in ("open", "high", "low", "close"):
        changed[column] = bars[column] * scale
    changed_file = save_bars(changed, tmp_path / "CHANGED_1h.parquet", "CHANGED", "1h")
    # Note: the features' normalization is fitted on the train split, which the change leaves intact.
    actions = [1, 1, 0, 1, 0, 0, 1] * 10
    a_obs, a_rewards, a_infos = rollout(make(bars_file, split="test", episode_length=None), actions)
    b_obs, b_rewards, b_infos = rollout(make(changed_file, split="test", episode_length=None), actions)
    steps = cut - t0  # observation k sees rows up to t0 + k; reward k is earned at close t0 + k + 1
    for k in range(steps + 1):
        np.testing.assert_array_equal(a_obs[k], b_obs[k])
    np.testing.assert_allclose(a_rewards[:steps], b_rewards[:steps])
    assert not np.allclose(a_rewards[steps:], b_rewards[steps:])  # the change is visible afterwards


def test_reward_is_ledger_log_equity_change(bars_file):
    env = make(bars_file, reward_scale=1.0)
    rng = np.random.default_rng(0)
    _, rewards, infos = rollout(env, rng.integers(0, 2, 200))
    equity = np.array([info["equity"] for info in infos])
    np.testing.assert_allclose(rewards, np.diff(np.log(equity)), rtol=1e-12)
    assert math.isclose(sum(rewards), math.log(equity[-1]), rel_tol=1e-9)


def test_fill_at_next_open_with_fees_only_on_changes(bars_file):
    env = make(bars_file, split="test", episode_length=None, fee_bps=25, slippage_bps=10, reward_scale=1.0)
    env.reset(seed=0)
    t = env._t
    opens, closes = env.market.opens, env.market.closes
    # Hold flat: no fee.
    env.step(0)
    assert env.ledger.fees_paid == 0 and env.ledger.trades == 0
    # Go long: filled at the next open with slippage, fee on the notional.
    _, reward, _, _, info = env.step(1)
    fill = opens[t + 2] * 1.001
    units = 1.0 / (1.0025 * fill)
    assert math.isclose(env.ledger.fees_paid, units * fill * 0.0025, rel_tol=1e-12)
    assert math.isclose(info["equity"], units * closes[t + 2], rel_tol=1e-12)
    assert math.isclose(reward, math.log(info["equity"]), rel_tol=1e-12)
    fees = env.ledger.fees_paid
    # Hold long: no new fee.
    env.step(1)
    assert env.ledger.fees_paid == fees and env.ledger.trades == 1
    # Close: one more fee, on the sale.
    env.step(0)
    assert env.ledger.trades == 2 and env.ledger.fees_paid > fees and env.ledger.units == 0


def test_long_short_flip_is_two_orders():
    ledger = Ledger(fee_rate=0.001, slippage_rate=0.0)
    ledger.rebalance(1.0, 100.0)
    ledger.rebalance(-1.0, 100.0)
    assert ledger.trades == 3 and ledger.units < 0
    assert math.isclose(ledger.equity(100.0), (1 / 1.001) * 0.999 * (1 - 0.001 / 1.001), rel_tol=1e-9)


def test_same_seed_same_episode(bars_file):
    actions = [0, 1] * 40
    a = rollout(make(bars_file), actions, seed=7)
    b = rollout(make(bars_file), actions, seed=7)
    c = rollout(make(bars_file), actions, seed=8)
    np.testing.assert_array_equal(np.array(a[0]), np.array(b[0]))
    assert a[1] == b[1]
    assert not np.array_equal(np.array(a[0]), np.array(c[0]))


def test_splits_do_not_overlap_and_episodes_stay_inside(bars_file):
    bounds = make(bars_file).market.bounds
    assert bounds["train"][1] <= bounds["validation"][0] < bounds["validation"][1] <= bounds["test"][0]
    env = make(bars_file)
    for seed in range(20):
        env.reset(seed=seed)
        start = env._t
        truncated = False
        while not truncated:
            _, _, _, truncated, info = env.step(1)
        assert bounds["train"][0] <= start and info["row"] <= bounds["train"][1] - 1


def test_validation_split_walks_whole_split(bars_file):
    env = make(bars_file, split="validation", episode_length=None)
    _, _, infos = rollout(env, [1] * 10_000)
    lo, hi = env.market.bounds["validation"]
    assert infos[0]["row"] == lo and infos[-1]["row"] == hi - 1


@pytest.mark.parametrize(
    "config, fragment",
    [
        ({"splitt": "test"}, "unknown key 'env_config.splitt': did you mean 'env_config.split'"),
        ({"window": "twenty"}, "env_config.window: Input should be a valid integer"),
        ({"fee_bps": 1e9}, "env_config.fee_bps: Input should be less than 10000"),
        ({"synthetic_model": "gbm"}, "env_config.synthetic_model: must be one of"),
        ({"split": "holdout"}, "split"),
        ({"positions": "leveraged"}, "positions"),
        ({"split_fractions": [0.5, 0.5]}, "split_fractions"),
        ({"fee_bps": -1}, "fee_bps"),
        ({"data_path": "/nonexistent/BTC.parquet"}, "not found"),
        ({"decision_interval": 100_000}, "decision_interval 100000 bars leaves fewer than 2 decisions in an episode"),
    ],
)
def test_config_errors_are_clear(config, fragment):
    with pytest.raises(InputError, match=fragment):
        SpotTradingEnv(config)


def test_buy_and_hold_row_matches_hand_computation(bars_file):
    config = {"data_path": str(bars_file), **SMALL, "fee_bps": 10, "slippage_bps": 5}
    report = evaluate_policy(lambda obs: np.zeros(len(obs), dtype=int), config)
    env = make(bars_file, split="test")
    lo, hi = env.market.bounds["test"]
    fill = env.market.opens[lo + 1] * 1.0005
    units = 1.0 / (1.001 * fill)
    expected = units * env.market.closes[hi - 1] - 1.0
    row = report.table.loc["buy_and_hold"]
    assert math.isclose(row["total_return"], expected, rel_tol=1e-12)
    assert row["trades"] == 1
    assert report.table.loc["agent", "total_return"] == 0.0  # always flat
    assert report.table.loc["flat", "total_return"] == 0.0
    assert list(report.series.columns)[:2] == ["agent", "buy_and_hold"]


def test_always_long_agent_equals_buy_and_hold(bars_file):
    report = evaluate_policy(lambda obs: np.ones(len(obs), dtype=int), {"data_path": str(bars_file), **SMALL})
    np.testing.assert_allclose(report.series["agent"], report.series["buy_and_hold"])


def test_performance_metrics_by_hand():
    equity = np.array([1.0, 1.1, 0.99, 1.2])
    metrics = performance(equity, periods_per_year=365)
    r = np.diff(np.log(equity))
    assert math.isclose(metrics["sharpe"], r.mean() / r.std(ddof=1) * math.sqrt(365))
    assert math.isclose(metrics["max_drawdown"], 1 - 0.99 / 1.1)
    assert math.isclose(metrics["total_return"], 0.2)


def test_an_interval_longer_than_a_part_is_refused_naming_the_parts(bars_file):
    """decision_interval: 100000 on 20,111 bars passed --dry-run: every part must hold two decisions."""
    config = {"data_path": str(bars_file), **SMALL, "episode_length": None, "decision_interval": 61, "split": "test"}
    with pytest.raises(InputError, match=r"decision_interval 61 bars leaves fewer than 2 decisions in some parts "
                                         r"\(validation 120, test 120 bars\)"):
        SpotTradingEnv(config)


def test_tables_are_labelled_by_the_datas_symbol_not_the_configs_default(tmp_path):
    """A Kraken file imported as XBT-USD was labelled BTC-USD (the config's default symbol) in tables."""
    from envs.trading.data import save_bars
    from tests.conftest import random_walk_bars

    path = save_bars(random_walk_bars(), tmp_path / "XBT-USD_1h.parquet", "XBT-USD", "1h")
    report = evaluate_policy(lambda obs: np.zeros(len(obs), dtype=int), {"data_path": str(path), **SMALL})
    assert report.data_label == "XBT-USD 1h" and report.title.startswith("XBT-USD 1h test period")
