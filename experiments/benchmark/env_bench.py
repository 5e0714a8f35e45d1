"""`env`: steps/s of trading/Spot-v0 vs gym-anytrading's StocksEnv on the same bundled BTC-USD 1h bars.

Rows: the single env (class and gymnasium.make), gymnasium's SyncVectorEnv over single envs, and the
native numpy vector env (envs.trading.vector_env, what RLlib's env runners step) at several envs per
call, whose env steps/s are set against the peer's single env: the target is 3x per env step.

Both envs get the same window (24 bars), the same train-split rows, the same pre-drawn random
actions and reset when an episode ends. Each measurement is repeated, platform and peer
interleaved, and the best repetition counts (the least disturbed by other processes on the
machine); every repetition is in the JSON. Work per step differs in the platform's disfavour:
its observation is 24 x 8 features + a position one-hot (194 floats) and its training episodes
are 720 bars (more resets), gym-anytrading's is 24 x 2 (price, diff) over one long episode.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from experiments.benchmark.common import Budget, Figure, Report, require

WINDOW = 24
NUM_ENVS = 8  # SyncVectorEnv comparison
BATCHED_ENVS = (8, 32, 64, 128)  # envs per call of the native vector env (the cpu preset runs 32 per env runner)
REPEATS = 3
TARGET = 3.0  # x gym-anytrading's single env, per env step


def _bars_and_bounds():
    import pandas as pd

    from envs.trading.env import DEFAULT_DATA, TradingConfig, load_market

    bars = pd.read_parquet(DEFAULT_DATA)
    market = load_market(TradingConfig(window=WINDOW))
    lo, hi = market.bounds["train"]
    frame = bars.rename(columns={c: c.capitalize() for c in bars.columns})  # Open High Low Close Volume
    return market, frame, lo, hi


def _platform_factory(market) -> Callable[[], Any]:
    from envs.trading.env import SpotTradingEnv

    return lambda: SpotTradingEnv({"window": WINDOW}, market=market)


def _platform_make() -> Callable[[], Any]:
    import gymnasium as gym

    import envs  # noqa: F401

    return lambda: gym.make("trading/Spot-v0", config={"window": WINDOW})


def _peer_factory(frame, lo: int, hi: int) -> Callable[[], Any]:
    stocks = require("gym_anytrading.envs", "gym-anytrading")
    start = max(lo, WINDOW)
    return lambda: stocks.StocksEnv(df=frame, window_size=WINDOW, frame_bound=(start, hi))


def _peer_make(frame, lo: int, hi: int) -> Callable[[], Any]:
    import gymnasium as gym

    require("gym_anytrading", "gym-anytrading")
    start = max(lo, WINDOW)
    return lambda: gym.make("stocks-v0", df=frame, window_size=WINDOW, frame_bound=(start, hi))


def steps_per_second(make: Callable[[], Any], actions: list[int], seed: int) -> float:
    env = make()
    env.reset(seed=seed)
    step, reset = env.step, env.reset
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = step(action)
        if terminated or truncated:
            reset()
    elapsed = time.perf_counter() - start
    env.close()
    return len(actions) / elapsed


def _vector_env_steps_per_second(vec: Any, actions: np.ndarray, seed: int) -> float:
    """Env steps/s (calls x envs) of a vector env that autoresets, over the rows of `actions`."""
    vec.reset(seed=seed)
    step = vec.step
    start = time.perf_counter()
    for row in actions:
        step(row)
    elapsed = time.perf_counter() - start
    vec.close()
    return actions.size / elapsed


def vector_steps_per_second(make: Callable[[], Any], actions: np.ndarray, seed: int) -> float:
    """gymnasium's SyncVectorEnv over single envs."""
    from gymnasium.vector import SyncVectorEnv

    return _vector_env_steps_per_second(SyncVectorEnv([make] * actions.shape[1]), actions, seed)


def batched_steps_per_second(market, actions: np.ndarray, seed: int) -> float:
    """The native numpy vector env (envs.trading.vector_env)."""
    from envs.trading.vector_env import SpotTradingVectorEnv

    vec = SpotTradingVectorEnv({"window": WINDOW}, num_envs=actions.shape[1], market=market)
    return _vector_env_steps_per_second(vec, actions, seed)


def _best(samples: list[float]) -> float:
    return max(samples)


def run(budget: Budget) -> Report:
    steps = budget.pick(full=200_000, quick=2_000)
    repeats = 1 if budget.quick else REPEATS
    market, frame, lo, hi = _bars_and_bounds()
    peer_raw, peer_make = _peer_factory(frame, lo, hi), _peer_make(frame, lo, hi)
    platform_raw, platform_make = _platform_factory(market), _platform_make()
    rng = np.random.default_rng(budget.seed)
    actions = rng.integers(0, 2, size=steps).tolist()
    vector_actions = rng.integers(0, 2, size=(max(steps // NUM_ENVS, 1), NUM_ENVS))

    cases: dict[str, tuple[Callable[[], float], Callable[[], float]]] = {
        "single env, class instance": (
            lambda: steps_per_second(platform_raw, actions, budget.seed),
            lambda: steps_per_second(peer_raw, actions, budget.seed)),
        "single env, gymnasium.make (with its wrappers)": (
            lambda: steps_per_second(platform_make, actions, budget.seed),
            lambda: steps_per_second(peer_make, actions, budget.seed)),
        f"SyncVectorEnv x{NUM_ENVS} (env steps/s)": (
            lambda: vector_steps_per_second(platform_raw, vector_actions, budget.seed),
            lambda: vector_steps_per_second(peer_raw, vector_actions, budget.seed)),
    }
    for n in BATCHED_ENVS:
        batched_actions = rng.integers(0, 2, size=(max(steps // n, 1), n))
        cases[f"native vector env, {n} envs per call (env steps/s) vs the peer's single env"] = (
            lambda a=batched_actions: batched_steps_per_second(market, a, budget.seed),
            lambda: steps_per_second(peer_raw, actions, budget.seed))
    samples: dict[str, dict[str, list[float]]] = {}
    figures = []
    for what, (platform_case, peer_case) in cases.items():
        ours, theirs = [], []
        for _ in range(repeats):  # interleaved, so a burst of load hits both sides
            ours.append(platform_case())
            theirs.append(peer_case())
        samples[what] = {"platform": ours, "peer": theirs}
        figure = Figure(what, "steps/s", _best(ours), _best(theirs))
        if what.startswith("native vector env"):
            figure.target = f">= {TARGET:.1f}x peer"
            figure.met = figure.ratio is not None and figure.ratio >= TARGET
        figures.append(figure)

    probe = platform_raw()
    peer_probe = peer_raw()
    details = {
        "steps_per_case": steps, "repeats": repeats, "statistic": "best of repeats",
        "samples": samples,
        "platform_observation_shape": list(probe.observation_space.shape),
        "peer_observation_shape": list(peer_probe.observation_space.shape),
        "platform_episode_length": probe.cfg.episode_length,
        "bars": {"data": "data/raw/BTC-USD_1h.parquet (bundled)", "train_rows": [int(lo), int(hi)],
                 "window": WINDOW},
    }
    return Report("env", __doc__.splitlines()[0], "trading/Spot-v0 (envs.trading.env.SpotTradingEnv)",
                  "gym-anytrading StocksEnv", figures, details)
