"""envs.trading.vector_env: N trading envs in one numpy step give exactly what N single envs give in
gymnasium's SyncVectorEnv (next-step autoreset): same seeds, same actions -> the same observations,
rewards, terminations, truncations and infos, bit for bit, across many episode ends."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

import envs
from envs.errors import InputError
from envs.trading import vector_env
from envs.trading.csv_import import import_csv
from envs.trading.data import save_bars
from envs.trading.vector_env import SpotTradingVectorEnv
from tests.conftest import random_walk_bars

ENV_ID = "trading/Spot-v0"


def _kraken_style_csv(tmp_path):
    """Another venue's export (Kraken-style OHLCVT in epoch seconds, no header), imported like a user's file."""
    bars = random_walk_bars(n=700, seed=7, start="2022-06-01")
    seconds = (bars.index - pd.Timestamp("1970-01-01", tz="UTC")) // pd.Timedelta("1s")
    lines = [f"{s},{o:.4f},{h:.4f},{lo:.4f},{c:.4f},{v:.3f},{i}" for i, (s, o, h, lo, c, v) in enumerate(zip(
        seconds, bars["open"], bars["high"], bars["low"], bars["close"], bars["volume"], strict=True))]
    path = tmp_path / "XBTEUR_60.csv"
    path.write_text("\n".join(lines) + "\n")
    imported, _ = import_csv(path, "1h")
    return str(save_bars(imported, tmp_path / "XBT-EUR_1h.parquet", "XBT-EUR", "1h"))


def _sources(tmp_path):
    walk = str(save_bars(random_walk_bars(n=900, seed=3), tmp_path / "WALK-USD_1h.parquet", "WALK-USD", "1h"))
    return {
        "bundled BTC": {},
        "random walk file": {"data_path": walk},
        "other venue CSV": {"data_path": _kraken_style_csv(tmp_path)},
        "synthetic regimes": {"source": "synthetic", "synthetic_bars": 3000, "symbol": "SYN-USD"},
    }


def _compare(config, num_envs=6, steps=260, seed=11, action_seed=0, action_p=None, count="truncated"):
    """Step both with the same random actions (drawn with probabilities `action_p`); the number of episode
    ends of kind `count` (truncated or terminated) the comparison crossed."""
    batched = envs.make_vector_env(ENV_ID, num_envs, config)
    assert isinstance(batched.unwrapped, SpotTradingVectorEnv)
    reference = gym.vector.SyncVectorEnv([lambda: envs.make_env(ENV_ID, config) for _ in range(num_envs)])
    assert batched.single_observation_space == reference.single_observation_space
    assert batched.single_action_space == reference.single_action_space
    ends = 0
    first, second = batched.reset(seed=seed), reference.reset(seed=seed)
    _assert_same("reset", first, second)
    actions = np.random.default_rng(action_seed).choice(batched.single_action_space.n, size=(steps, num_envs),
                                                        p=action_p)
    buffer = np.empty(num_envs, dtype=np.int64)  # one reused action array, as a runner's: the env must copy it
    for step, action in enumerate(actions):
        buffer[:] = action
        first = batched.step(buffer)
        second = reference.step(action)
        _assert_same(f"step {step}", first, second)
        ends += int(second[3 if count == "truncated" else 2].sum())
        _scribble(first)
    return ends


def _scribble(result):
    """Write over everything a step returned, as a caller keeping or reusing the arrays may: the env's state must
    not be in them (the next steps would differ from the single envs')."""
    observations, rewards, terminated, truncated, infos = result
    for array in (observations, rewards, terminated, truncated, *(v for k, v in infos.items() if k[0] != "_")):
        array[...] = 1


def _assert_same(where, first, second):
    names = ("obs", "reward", "terminated", "truncated", "info")
    # a reset returns (obs, info), a step all five: the names past what was returned are not used
    for name, a, b in zip(names, first[-len(second):], second, strict=False):
        if name == "info" or isinstance(b, dict):
            assert a.keys() == b.keys(), where
            for key in b:
                assert a[key].dtype == b[key].dtype and np.array_equal(a[key], b[key]), f"{where}: info {key}"
        else:
            assert a.dtype == b.dtype and np.array_equal(a, b), f"{where}: {name}"


@pytest.mark.parametrize("source", ["bundled BTC", "random walk file", "other venue CSV", "synthetic regimes"])
@pytest.mark.parametrize("interval", [1, 3])
@pytest.mark.parametrize("positions", ["long_flat", "long_short"])
def test_batched_env_equals_single_envs_bit_for_bit(tmp_path, source, interval, positions):
    config = {**_sources(tmp_path)[source], "window": 6, "episode_length": 30, "decision_interval": interval,
              "positions": positions, "fee_bps": 10, "slippage_bps": 2}
    ends = _compare(config)
    assert ends >= 12  # the comparison crossed many episode ends (autoreset)


@pytest.mark.parametrize("positions", ["long_flat", "long_short"])
@pytest.mark.parametrize("costs", [(0.0, 0.0), (25.0, 15.0)])
def test_an_interval_that_does_not_divide_the_episode_and_other_costs(tmp_path, positions, costs):
    """Episodes of 31 bars held 4 at a time: each ends with a shorter hold (the step's last row clipped to the
    episode's end); fees and slippage of zero and of several times the default."""
    fee_bps, slippage_bps = costs
    config = {**_sources(tmp_path)["random walk file"], "window": 5, "episode_length": 31, "decision_interval": 4,
              "positions": positions, "fee_bps": fee_bps, "slippage_bps": slippage_bps}
    assert _compare(config, steps=120) >= 12


def test_an_action_outside_the_set_is_an_index_error(tmp_path):
    """As in the single env, whose position set is indexed by the action."""
    batched = SpotTradingVectorEnv({**_sources(tmp_path)["random walk file"], "episode_length": 30}, num_envs=3)
    batched.reset(seed=0)
    with pytest.raises(IndexError):
        batched.step(np.array([0, 2, 1]))


def _gap_up_file(tmp_path) -> str:
    """Every bar opens 3% above the last close and closes 1% below its open: a short's equity is lowest at
    the opens, so margin calls happen at a fill bar's open (before the order), not only at closes."""
    n = 900
    closes = 100 * (1.03 * 0.99) ** np.arange(1, n + 1)
    opens = closes / 0.99
    bars = pd.DataFrame({"open": opens, "high": opens * 1.001, "low": closes * 0.999, "close": closes,
                         "volume": np.ones(n)},
                        index=pd.date_range("2022-01-01", periods=n, freq="1h", tz="UTC", name="timestamp"))
    return str(save_bars(bars, tmp_path / "GAP-USD_1h.parquet", "GAP-USD", "1h"))


@pytest.mark.parametrize("interval", [1, 5])
@pytest.mark.parametrize("source", ["bundled BTC", "gap-up file"])
def test_margin_calls_terminate_the_same_sub_envs_at_the_same_bars(tmp_path, interval, source):
    """Mostly short, with a maintenance margin high enough that a few % rally calls: many sub-envs are
    margin-called, at the fill bar's open or at a close inside a held interval, while others truncate."""
    data = {} if source == "bundled BTC" else {"data_path": _gap_up_file(tmp_path)}
    config = {**data, "window": 6, "episode_length": 150, "decision_interval": interval,
              "positions": "long_short", "maintenance_margin": 0.9, "split_fractions": [0.6, 0.2, 0.2]}
    calls = _compare(config, num_envs=8, steps=400, seed=5, action_p=[0.8, 0.1, 0.1], count="terminated")
    assert calls >= 10  # the comparison did cross margin calls


@pytest.mark.parametrize("split", ["validation", "test"])  # test: the part ends at the data's last bar
def test_held_out_splits_walk_the_whole_part_in_every_sub_env(tmp_path, split):
    config = {**_sources(tmp_path)["random walk file"], "split": split, "episode_length": None,
              "split_fractions": [0.6, 0.2, 0.2], "positions": "long_short"}
    assert _compare(config, num_envs=3, steps=400) >= 3


def test_reseeding_and_unseeded_resets_match(tmp_path):
    """reset(seed=list) seeds each sub-env (None: it keeps its generator); reset() without a seed continues them."""
    config = {**_sources(tmp_path)["random walk file"], "window": 6, "episode_length": 30}
    batched = envs.make_vector_env(ENV_ID, 3, config)
    reference = gym.vector.SyncVectorEnv([lambda: envs.make_env(ENV_ID, config) for _ in range(3)])
    _assert_same("seed", batched.reset(seed=3), reference.reset(seed=3))
    _assert_same("seed list", batched.reset(seed=[5, None, 9]), reference.reset(seed=[5, None, 9]))
    for round_ in range(3):
        _assert_same(f"unseeded reset {round_}", batched.reset(), reference.reset())


def test_an_off_by_one_fill_price_is_caught(tmp_path, monkeypatch):
    """The comparison has power: filling at the decision bar's own open (one bar early) is detected."""
    config = {**_sources(tmp_path)["random walk file"], "window": 6, "episode_length": 30}
    original = SpotTradingVectorEnv._trade

    def early_fill(self, change, actions):
        self._t -= 1
        try:
            original(self, change, actions)
        finally:
            self._t += 1

    monkeypatch.setattr(SpotTradingVectorEnv, "_trade", early_fill)
    with pytest.raises(AssertionError, match="reward|info"):
        _compare(config)


def test_the_reward_log_must_be_math_log(tmp_path, monkeypatch):
    """numpy's vectorized log may differ from math.log (the single env's) in the last bit: the comparison sees it."""
    import math

    ratios = np.random.default_rng(0).uniform(0.98, 1.02, 10_000)
    if np.array_equal(np.log(ratios), np.array([math.log(r) for r in ratios])):
        pytest.skip("numpy's log equals math.log on this machine")
    config = {**_sources(tmp_path)["random walk file"], "window": 6, "episode_length": 30}
    monkeypatch.setattr(vector_env, "map", lambda _, values: np.log(np.array(values)), raising=False)
    with pytest.raises(AssertionError, match="reward"):
        _compare(config)


def test_make_vec_uses_the_native_vector_env_and_bad_num_envs_is_an_input_error():
    vec = gym.make_vec(ENV_ID, num_envs=4, vectorization_mode="vector_entry_point", config={})
    assert isinstance(vec.unwrapped, SpotTradingVectorEnv) and vec.num_envs == 4
    assert envs.family(ENV_ID).has_vector_env and not envs.family("agents/TestPrioritization-v0").has_vector_env
    with pytest.raises(InputError, match="num_envs"):
        SpotTradingVectorEnv({}, num_envs=0)
