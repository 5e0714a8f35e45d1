"""Continuous position sizing (`positions: continuous | continuous_long_short`): the action is a target exposure.

Exposures 0, 1 and -1 trade exactly as the discrete sets' targets; a fractional target is filled at the next bar's
open on the equity there; a move under `min_trade` is not traded; the batched env, the backtest, the bar reader and
paper trading agree with the single env."""
from __future__ import annotations

import json
import math
from dataclasses import fields

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
from gymnasium.utils.env_checker import check_env

import envs
from envs.errors import InputError
from envs.trading.backtest import agent_targets, evaluate_policy
from envs.trading.bar_reader import FORMAT, BarReader
from envs.trading.data import load_bars, save_bars
from envs.trading.env import SpotTradingEnv
from envs.trading.ledger import simulate_positions
from envs.trading.positions import policy_action
from envs.trading.vector_env import SpotTradingVectorEnv
from tests.conftest import REPO, bare_market, paper_replay_of_test_window, random_walk_bars

ENV_ID = "trading/Spot-v0"
DATA = REPO / "data" / "raw" / "BTC-USD_1h.parquet"


@pytest.fixture(scope="module")
def walk_file(tmp_path_factory) -> str:
    """3,000 random-walk bars: long enough for 400-step episodes of the train part."""
    folder = tmp_path_factory.mktemp("bars")
    return str(save_bars(random_walk_bars(n=3000, seed=21), folder / "WALK-USD_1h.parquet", "WALK-USD", "1h"))



def _bare_env(opens, closes, **config) -> SpotTradingEnv:
    settings = {"positions": "continuous", "window": 1, "episode_length": None, "split": "test", **config}
    env = SpotTradingEnv(settings, market=bare_market(opens, closes))
    env.reset(seed=0)
    return env


def _walk(env: SpotTradingEnv, actions, seed: int = 0) -> list[tuple]:
    """(reward, terminated, truncated, info) of each step until the episode ends."""
    env.reset(seed=seed)
    steps = []
    for action in actions:
        _, reward, terminated, truncated, info = env.step(action)
        steps.append((reward, terminated, truncated, info))
        if terminated or truncated:
            break
    return steps


# --- Whole exposures are the discrete sets' targets


def _runs(rng: np.random.Generator, choices: int, n: int, keep: float) -> list[int]:
    """`n` action indices, each the last one again with probability `keep`, else a fresh draw."""
    indices, repeat = rng.integers(0, choices, n), rng.random(n) < keep
    for i in range(1, n):
        indices[i] = indices[i - 1] if repeat[i] else indices[i]
    return indices.tolist()


@pytest.mark.parametrize("interval", [1, 3])
@pytest.mark.parametrize("discrete, continuous, targets", [
    ("long_flat", "continuous", (0.0, 1.0)),
    ("long_short", "continuous_long_short", (-1.0, 0.0, 1.0)),
])
def test_whole_exposures_trade_exactly_as_the_discrete_set(walk_file, interval, discrete, continuous, targets):
    """The same data, seeds and decisions: identical rewards, equity, fees, trades and episode ends; min_trade
    (default 0.02) holds back no change of a whole position. Decisions drawn anew every step walk 300 steps with
    hundreds of trades; runs of about ten steps hold shorts long enough for a maintenance margin of 0.9 to call."""
    config = {"data_path": walk_file, "window": 8, "episode_length": 900, "decision_interval": interval,
              "split_fractions": [0.4, 0.3, 0.3]}
    rng = np.random.default_rng(interval)
    calls = 0
    for seed, keep in enumerate([0.0, 0.0, 0.9, 0.9, 0.9]):
        indices = _runs(rng, len(targets), 300, keep)
        settings = {**config, "maintenance_margin": 0.1 if keep == 0.0 else 0.9}
        whole = _walk(SpotTradingEnv({**settings, "positions": discrete}), indices, seed)
        sized = _walk(SpotTradingEnv({**settings, "positions": continuous}),
                      [np.array([targets[i]], dtype=np.float32) for i in indices], seed)
        assert sized == whole
        if keep == 0.0:
            assert len(whole) == 300 and whole[-1][3]["trades"] >= 100
        calls += whole[-1][3]["margin_call"]
    assert calls >= (2 if discrete == "long_short" else 0)


def test_a_margin_called_whole_short_ends_as_in_long_short():
    """The bundled case that is called while held short (reset(seed=38) of BTC's train part): the same call."""
    short = _walk(SpotTradingEnv({"positions": "long_short"}), [0] * 800, seed=38)
    sized = _walk(SpotTradingEnv({"positions": "continuous_long_short"}), [np.array([-1.0], np.float32)] * 800, seed=38)
    assert sized == short
    assert short[-1][1] and short[-1][3]["margin_call"] and short[-1][3]["position"] == 0.0


# --- Fills, min_trade, costs, clipping


def test_the_target_fills_at_the_next_bars_open_on_the_equity_there():
    """Bought at the next open moved by the slippage (never at the close the agent saw), the fee set aside; a
    larger target on the same side is one fill of the difference, sized on the equity at that open."""
    opens = np.array([100.0, 110.0, 120.0, 130.0, 140.0, 150.0])
    closes = np.array([105.0, 115.0, 125.0, 135.0, 145.0, 155.0])
    env = _bare_env(opens, closes, fee_bps=10.0, slippage_bps=2.0)
    env.step(np.array([0.5], np.float32))  # decided at close 0 (105), filled at open 1 (110)
    ledger = env.ledger
    price = 110.0 * (1.0 + 2e-4)
    assert ledger.units == 0.5 * 1.0 / (1.0 + 1e-3) / price and ledger.traded_notional == ledger.units * price
    assert ledger.units != 0.5 * 1.0 / (1.0 + 1e-3) / (105.0 * (1.0 + 2e-4))  # not the decision bar's close
    assert math.isclose(ledger.cash, 1.0 - ledger.units * price * (1.0 + 1e-3), rel_tol=1e-15)
    held, equity_at_open = ledger.units, ledger.cash + ledger.units * 120.0
    env.step(np.array([0.75], np.float32))  # resized at open 2 (120) to 0.75 of the equity there: one fill
    assert ledger.trades == 2 and ledger.position == 0.75
    assert ledger.units == held + (0.75 * equity_at_open / (1.0 + 1e-3) / (120.0 * (1.0 + 2e-4)) - held)
    assert math.isclose(ledger.traded_notional - held * price, (ledger.units - held) * 120.0 * (1.0 + 2e-4))
    assert math.isclose(ledger.units * 120.0 / equity_at_open, 0.75, rel_tol=2e-3)


def test_a_target_within_min_trade_of_the_held_exposure_is_not_traded():
    prices = 100.0 * 1.01 ** np.arange(8)
    env = _bare_env(prices, prices, min_trade=0.02)
    env.step(np.array([0.5], np.float32))
    trades, fees, units = env.ledger.trades, env.ledger.fees_paid, env.ledger.units
    _, reward, _, _, info = env.step(np.array([0.51], np.float32))  # 0.01 away: no order, no fee
    assert (env.ledger.trades, env.ledger.fees_paid, env.ledger.units) == (trades, fees, units)
    assert info["position"] == 0.5 and env.ledger.units > 0
    assert reward == math.log(env.ledger.equity(prices[2]) / env.ledger.equity(prices[1])) * 100.0
    env.step(np.array([0.53], np.float32))  # 0.03 away: traded
    assert env.ledger.trades == trades + 1 and env.ledger.fees_paid > fees
    assert env.ledger.position == float(np.float32(0.53))


def test_a_real_rebalance_costs_its_fee_and_slippage_in_the_reward():
    """Flat prices: a costless account earns 0; with costs, each rebalance's reward is the log of what it paid."""
    prices = np.full(6, 100.0)
    free, costly = _bare_env(prices, prices, fee_bps=0.0, slippage_bps=0.0), _bare_env(prices, prices)
    for target in (0.5, 0.8, 0.3):  # from flat, then a larger and a smaller long: one fill each
        action = np.array([target], np.float32)
        before, fees, units = costly.ledger.equity(100.0), costly.ledger.fees_paid, costly.ledger.units
        _, free_reward, *_ = free.step(action)
        _, reward, *_ = costly.step(action)
        paid, traded = costly.ledger.fees_paid - fees, abs(costly.ledger.units - units)
        assert free_reward == 0.0 and reward < 0.0 and paid > 0.0
        # The equity lost is the fee plus the slippage on the traded units (2 bps of 100 each).
        assert math.isclose(before - costly.ledger.equity(100.0), paid + traded * 100.0 * 2e-4, rel_tol=1e-9)
        assert math.isclose(reward, 100.0 * math.log(costly.ledger.equity(100.0) / before), rel_tol=1e-12)


@pytest.mark.parametrize("positions, given, target", [
    ("continuous", 1.7, 1.0), ("continuous", -0.4, 0.0), ("continuous_long_short", -2.5, -1.0),
    ("continuous_long_short", 3.0, 1.0), ("continuous_long_short", -0.6, -0.6),
])
def test_actions_outside_the_bounds_are_clipped_into_them(positions, given, target):
    prices = 100.0 * 1.01 ** np.arange(6)
    clipped = _bare_env(prices, prices, positions=positions)
    exact = _bare_env(prices, prices, positions=positions)
    first = clipped.step(np.array([given], np.float32))
    second = exact.step(np.array([target], np.float32))
    assert first[1:] == second[1:] and np.array_equal(first[0], second[0])
    assert first[4]["position"] == float(np.float32(target)) and first[0][-1] == np.float32(target)
    assert clipped.target_of(np.array([given])) == target


def test_a_negative_zero_action_is_flat_zero():
    """-0.0 becomes 0.0 in the single env and the batched env alike: a long closed by it holds the same bits."""
    prices = np.full(4, 100.0)
    env = _bare_env(prices, prices)
    env.step(np.array([0.5], np.float32))
    observation, *_ = env.step(np.array([-0.0], np.float32))
    assert math.copysign(1.0, env.ledger.position) == 1.0 and math.copysign(1.0, observation[-1]) == 1.0
    batched = SpotTradingVectorEnv({"positions": "continuous", "window": 1, "episode_length": None, "split": "test"},
                                   num_envs=2, market=bare_market(prices, prices))
    batched.reset(seed=0)
    batched.step(np.full((2, 1), 0.5, dtype=np.float32))
    observations, *_, info = batched.step(np.array([[-0.0], [-0.3]], dtype=np.float32))
    assert np.array_equal(np.copysign(1.0, observations[:, -1]), [1.0, 1.0])
    assert np.array_equal(np.copysign(1.0, info["position"]), [1.0, 1.0])


def test_a_nan_action_is_refused_in_one_line():
    prices = np.full(4, 100.0)
    with pytest.raises(InputError, match=r"a continuous action is one number in \[0, 1\], got \[nan\]"):
        _bare_env(prices, prices).step(np.array([np.nan], np.float32))


def test_continuous_long_short_goes_short_and_a_partial_short_is_called_later_than_a_whole_one():
    """A 24-bar hold of a short through an open at 200 (everything else at 100): a whole short is called there
    (at ~181.8 with the default margin), half a short is not (it would be at ~272.7)."""
    opens, closes = np.full(60, 100.0), np.full(60, 100.0)
    opens[10] = 200.0
    ends = {}
    for exposure in (-1.0, -0.5):
        env = _bare_env(opens, closes, positions="continuous_long_short", decision_interval=24)
        _, _, terminated, _, info = env.step(np.array([exposure], np.float32))
        assert env.ledger.trades >= 1
        ends[exposure] = (terminated, info["margin_call"], info["row"])
    assert ends[-1.0] == (True, True, 10)
    assert ends[-0.5] == (False, False, 24)


def test_the_env_passes_gymnasium_checks_and_says_its_spaces(walk_file):
    for positions, low in (("continuous", 0.0), ("continuous_long_short", -1.0)):
        env = SpotTradingEnv({"data_path": walk_file, "positions": positions, "window": 8, "episode_length": 50})
        check_env(env, skip_render_check=True)
        assert env.action_space == gym.spaces.Box(low, 1.0, shape=(1,), dtype=np.float32)
        obs, _ = env.reset(seed=0)
        assert obs.shape == (8 * 8 + 1,) and obs[-1] == 0.0  # the held exposure: flat
        obs, *_ = env.step(np.array([0.25], np.float32))
        assert obs[-1] == np.float32(0.25)


@pytest.mark.parametrize("config, fragment", [
    ({"positions": "long_flat", "min_trade": 0.05}, "env_config.min_trade 0.05 applies to continuous positions only"),
    ({"positions": "continuous", "min_trade": 1.0}, "env_config.min_trade"),
    ({"positions": "continuous", "min_trade": -0.1}, "env_config.min_trade"),
])
def test_min_trade_must_fit_the_positions(walk_file, config, fragment):
    with pytest.raises(InputError, match=None) as refused:
        SpotTradingEnv({"data_path": walk_file, **config})
    assert fragment in str(refused.value) and "\n" not in str(refused.value)


# --- The batched env


def _same(where, first, second):
    assert len(first) == len(second), where
    # a reset returns (obs, info), a step all five: the names past what was returned are not used
    for name, a, b in zip(("obs", "reward", "terminated", "truncated", "info"), first, second, strict=False):
        if isinstance(b, dict):
            assert a.keys() == b.keys(), where
            for key in b:
                assert a[key].dtype == b[key].dtype and np.array_equal(a[key], b[key]), f"{where}: info {key}"
        else:
            assert a.dtype == b.dtype and np.array_equal(a, b), f"{where}: {name}"


def _exposures(rng: np.random.Generator, steps: int, num_envs: int, low: float) -> np.ndarray:
    """float32 actions (steps, num_envs, 1) that hit every case: whole targets, out-of-bounds (clipped), fractions,
    and moves of 0.005 off the last action (held back by min_trade)."""
    actions = np.empty((steps, num_envs, 1), dtype=np.float32)
    last = np.zeros(num_envs)
    for step in range(steps):
        kind = rng.integers(0, 4, num_envs)
        fresh = np.where(kind == 0, rng.choice([low, 0.0, 1.0], num_envs), rng.uniform(low - 0.3, 1.3, num_envs))
        last = np.where(kind == 3, np.clip(last, low, 1.0) + rng.choice([-0.005, 0.005], num_envs), fresh)
        actions[step, :, 0] = last
    return actions


def _gap_file(folder) -> str:
    """Every bar opens 3% above the last close and closes 1% below its open: shorts are called at opens too."""
    n = 900
    closes = 100 * (1.03 * 0.99) ** np.arange(1, n + 1)
    bars = pd.DataFrame({"open": closes / 0.99, "high": closes / 0.99 * 1.001, "low": closes * 0.999,
                         "close": closes, "volume": np.ones(n)},
                        index=pd.date_range("2022-01-01", periods=n, freq="1h", tz="UTC", name="timestamp"))
    return str(save_bars(bars, folder / "GAP-USD_1h.parquet", "GAP-USD", "1h"))


@pytest.mark.parametrize("interval", [1, 3])
@pytest.mark.parametrize("positions, source", [("continuous", "walk"), ("continuous_long_short", "walk"),
                                               ("continuous_long_short", "gaps")])
def test_the_batched_env_equals_single_envs_bit_for_bit(walk_file, tmp_path, interval, positions, source):
    data = walk_file if source == "walk" else _gap_file(tmp_path)
    config = {"data_path": data, "window": 6, "episode_length": 30, "decision_interval": interval,
              "positions": positions, "maintenance_margin": 0.9 if source == "gaps" else 0.3,
              "split_fractions": [0.6, 0.2, 0.2]}
    num_envs = 6
    batched = envs.make_vector_env(ENV_ID, num_envs, config)
    assert isinstance(batched.unwrapped, SpotTradingVectorEnv)
    reference = gym.vector.SyncVectorEnv([lambda: envs.make_env(ENV_ID, config) for _ in range(num_envs)])
    assert batched.single_observation_space == reference.single_observation_space
    assert batched.single_action_space == reference.single_action_space
    _same("reset", batched.reset(seed=4), reference.reset(seed=4))
    low = batched.single_action_space.low[0]
    buffer = np.empty((num_envs, 1), dtype=np.float32)  # reused, as a runner's: the env must copy it
    ends = calls = 0
    for step, action in enumerate(_exposures(np.random.default_rng(interval), 300, num_envs, low)):
        buffer[:] = action
        first, second = batched.step(buffer), reference.step(action)
        _same(f"step {step}", first, second)
        ends += int(second[3].sum())
        calls += int(second[2].sum())
    assert ends >= 10
    if source == "gaps":
        assert calls >= 5  # the comparison crossed margin calls


# --- Backtest, bar reader, paper trading


def _sizer(width: int, seed: int = 0):
    """A deterministic continuous policy: observations (n, width) -> exposures (n, 1), often out of bounds."""
    weights = np.random.default_rng(seed).normal(size=(width, 1)).astype(np.float32) * 0.05
    return lambda observations: 0.5 + np.asarray(observations, dtype=np.float32) @ weights


def test_the_backtest_scores_a_constant_half_exposure_next_to_the_baselines(walk_file):
    config = {"data_path": walk_file, "positions": "continuous", "window": 8, "split_fractions": [0.6, 0.2, 0.2]}
    report = evaluate_policy(lambda obs: np.full((len(obs), 1), 0.5, dtype=np.float32), config)
    assert list(report.table.index) == ["agent", *(b.name for b in envs.family(ENV_ID).baseline_table())]
    agent, hold = report.table.loc["agent"], report.table.loc["buy_and_hold"]
    assert agent["trades"] == 1 and agent["target_exposure"] == 0.5
    assert agent["exposure"] != 0.5 and abs(agent["exposure"] - 0.5) < 0.1  # what was held drifted with the price
    # Half in the coin: half buy-and-hold's return, give or take the costs of one fill.
    assert math.isclose(agent["final_equity"] - 1.0, (hold["final_equity"] - 1.0) / 2, abs_tol=0.01)
    assert report.table.loc["flat", "final_equity"] == 1.0 and hold["trades"] == 1


@pytest.mark.parametrize("interval", [1, 4])
def test_the_backtests_replay_of_a_continuous_walk_is_the_env_walk(walk_file, interval):
    config = {"data_path": walk_file, "positions": "continuous_long_short", "window": 8, "decision_interval": interval,
              "split_fractions": [0.6, 0.2, 0.2], "split": "test", "episode_length": None}
    env = SpotTradingEnv(config)
    policy = _sizer(env.observation_space.shape[0], seed=interval)
    targets = agent_targets(policy, env)
    lo, hi = env.market.bounds["test"]
    equity, ledger = simulate_positions(targets, env.market.opens[lo:hi], env.market.closes[lo:hi], env.fee_rate,
                                        env.slippage_rate, env.cfg.maintenance_margin, env.cfg.min_trade)
    assert equity[-1] == env.ledger.equity(env.market.closes[hi - 1])
    assert ledger.trades == env.ledger.trades and ledger.fees_paid == env.ledger.fees_paid
    moves = np.abs(np.diff(targets))
    assert env.ledger.trades > 20 and (targets < 0).any() and ((moves > 0) & (moves < 0.02)).any()
    report = evaluate_policy(policy, config)
    assert report.table.loc["agent", "final_equity"] == equity[-1]


BTC = load_bars(DATA)
WALK_PROTOCOL = {"type": "walk_forward", "folds": 4, "train": "expanding", "validation_size": 1500,
                 "test_size": 1500, "embargo": 24}


def _btc_config(**extra) -> dict:
    return {"data_path": str(DATA), "features": ["basic"], "protocol": WALK_PROTOCOL, "fold": 3,
            "positions": "continuous_long_short", "min_trade": 0.05, **extra}


@pytest.fixture(scope="module")
def reader() -> BarReader:
    return BarReader.for_env_config(_btc_config())


def test_a_continuous_reader_round_trips_and_decides_from_bars_as_the_env(reader, tmp_path):
    cfg = _btc_config(split="test", episode_length=None)
    assert (reader.position_mode, reader.positions, reader.min_trade) == ("continuous", (-1.0, 1.0), 0.05)
    reader.save(tmp_path / "inputs.npz")
    loaded = BarReader.load(tmp_path / "inputs.npz")
    settings = [f.name for f in fields(BarReader) if f.name not in ("mean", "std")]
    assert [getattr(loaded, name) for name in settings] == [getattr(reader, name) for name in settings]
    assert np.array_equal(loaded.mean, reader.mean) and np.array_equal(loaded.std, reader.std)
    env = SpotTradingEnv(cfg)
    policy = _sizer(env.observation_space.shape[0], seed=7)
    obs, info = env.reset(seed=0)
    for _ in range(120):
        row = info["row"]
        window = BTC.iloc[row + 1 - loaded.bars_needed:row + 1]
        decision = loaded.decide(window.assign(position=info["position"]).reset_index(), policy)
        observation, _ = loaded.read(window, info["position"])
        assert np.array_equal(observation[0], obs)
        action = policy_action(policy(obs[None]), continuous=True)
        assert decision["action"].iloc[0] == action[0]
        assert decision["target_position"].iloc[0] == env.target_of(action)
        assert pd.Timestamp(decision["applies_from"].iloc[0]) == BTC.index[row + 1]
        obs, _, terminated, truncated, info = env.step(action)
        assert not (terminated or truncated)
    assert env.ledger.trades > 10


@pytest.mark.parametrize("held, fragment", [
    (1.5, "position 1.5 is outside this model's exposure bounds [-1, 1]"),
    (float("nan"), "position nan is outside this model's exposure bounds [-1, 1]"),
])
def test_a_held_exposure_outside_the_bounds_is_refused_in_one_line(reader, held, fragment):
    with pytest.raises(InputError, match=None) as refused:
        reader.decide(BTC.iloc[-300:].assign(position=held).reset_index(), _sizer(24 * 8 + 1))
    assert fragment in str(refused.value) and "\n" not in str(refused.value)


def test_a_reader_saved_before_continuous_positions_loads_as_discrete(reader, tmp_path):
    config = {f.name: getattr(reader, f.name) for f in fields(BarReader)
              if f.name not in ("mean", "std", "position_mode", "min_trade")}
    config.update(format=FORMAT, positions=[-1.0, 0.0, 1.0])  # what a long_short reader saved then
    with open(tmp_path / "old.npz", "wb") as handle:
        np.savez(handle, config=np.array(json.dumps(config)), mean=reader.mean, std=reader.std)
    old = BarReader.load(tmp_path / "old.npz")
    assert (old.position_mode, old.positions, old.min_trade) == ("discrete", (-1.0, 0.0, 1.0), 0.0)


def test_a_paper_replay_of_a_continuous_policy_is_the_backtests_equity_curve(reader):
    cfg = _btc_config()
    env = SpotTradingEnv({**cfg, "split": "test", "episode_length": None})
    policy = _sizer(env.observation_space.shape[0], seed=3)
    report = evaluate_policy(policy, cfg)
    equity, book = paper_replay_of_test_window(reader, policy, BTC, env)
    assert np.array_equal(equity, report.series["agent"].to_numpy())
    assert book.ledger.trades == report.table.loc["agent", "trades"] > 10


def test_exposure_is_what_was_held_after_drift_and_min_trade_and_the_target_is_its_own_column(walk_file):
    """`exposure` is the mean |units x close| / equity over the closes after the first, stepped here bar by bar with
    the ledger; `target_exposure` the mean target asked. With min_trade, small moves of the target are not traded and
    the held exposure drifts with the price, so the two differ."""
    from envs.trading.ledger import Ledger, trade_bar

    config = {"data_path": walk_file, "positions": "continuous", "window": 8, "split_fractions": [0.6, 0.2, 0.2],
              "min_trade": 0.05, "split": "test", "episode_length": None}
    env = SpotTradingEnv(config)
    policy = _sizer(env.observation_space.shape[0], seed=11)
    report = evaluate_policy(policy, config)
    targets = agent_targets(policy, env)
    lo, hi = env.market.bounds["test"]
    opens, closes = env.market.opens[lo:hi], env.market.closes[lo:hi]
    ledger, held = Ledger(env.fee_rate, env.slippage_rate, env.cfg.maintenance_margin, min_trade=0.05), []
    for i in range(1, hi - lo):
        equity = trade_bar(ledger, float(targets[i - 1]), float(opens[i]), float(closes[i]))
        held.append(abs(ledger.units) * closes[i] / equity)
    agent = report.table.loc["agent"]
    assert math.isclose(agent["exposure"], float(np.mean(held)), rel_tol=1e-12)
    assert agent["target_exposure"] == float(np.mean(np.abs(targets[:-1])))
    assert abs(agent["exposure"] - agent["target_exposure"]) > 1e-4
