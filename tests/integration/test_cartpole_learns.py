"""conf/dqn_cartpole.yaml learns through the platform's own path (experiments.config.experiment -> hardware ->
algos.dqn.algorithm) with its `training.implementation: fast` (algos.dqn.fast_dqn.FastDQN, whose checkpoint
experiments.results.policy loads). test_fast_learns_as_well.py compares it with stock RLlib DQN.

Thresholds are modest returns reached well before "solved"; no wall-clock time is asserted.
"""
from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np

from tests.conftest import REPO

THRESHOLD = 100.0   # greedy evaluation return (random play: about 20)
MAX_ITERATIONS = 15  # x 1000 env steps


def _config(*overrides: str):
    from experiments.config.load import load_experiment
    from experiments.hardware import load_preset, resolve_plan
    from experiments.sweep.rllib_config import build_config

    exp = load_experiment(REPO / "conf" / "dqn_cartpole.yaml", list(overrides))
    return build_config(exp, resolve_plan(load_preset("cpu"), exp.timeframe, 1), seed=0)


def _train_until(algo, threshold: float) -> list[float]:
    returns = []
    for _ in range(MAX_ITERATIONS):
        result = algo.train()
        returns.append(result["evaluation"]["env_runners"].get("episode_return_mean", float("nan")))
        if returns[-1] >= threshold:
            break
    return returns


def test_fast_dqn_learns_cartpole_and_its_checkpoint_loads(ray_session, tmp_path):
    from algos import algorithm
    from algos.dqn.fast_dqn import FastDQN
    from experiments.results.policy import MODULE_SUBPATH, load_module_policy

    algo = _config().build_algo()  # the conf says training.implementation: fast
    assert isinstance(algo, FastDQN)
    try:
        returns = _train_until(algo, THRESHOLD)
        checkpoint = algo.save_to_path(str(tmp_path / "checkpoint"))
    finally:
        algo.stop()
    assert max(returns) >= THRESHOLD, returns

    policy = load_module_policy(Path(checkpoint) / MODULE_SUBPATH, algorithm("dqn"))
    env = gym.make("CartPole-v1")
    total = 0.0
    for seed in range(3):
        obs, _ = env.reset(seed=seed)
        done = False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(int(policy(np.asarray(obs)[None])[0]))
            total += reward
            done = terminated or truncated
    assert total / 3 > 30.0  # the loaded module is the trained one, not a fresh random network


def test_ppo_solves_cartpole_through_the_algorithm_table(ray_session, tmp_path):
    """conf/ppo_cartpole.yaml (algos/ppo/, the second entry of the algorithm table): RLlib's greedy evaluation
    reaches 475 (solved), and the checkpoint's greedy policy (PPO's rule: argmax of the logits) plays as well."""
    from algos import algorithm
    from experiments.config.load import load_experiment
    from experiments.hardware import load_preset, resolve_plan
    from experiments.results.policy import MODULE_SUBPATH, load_module_policy
    from experiments.sweep.rllib_config import build_config

    exp = load_experiment(REPO / "conf" / "ppo_cartpole.yaml")
    plan = resolve_plan(load_preset("cpu"), exp.timeframe, 1, exp.training.train_batch_size_per_learner)
    algo = build_config(exp, plan, seed=0).build_algo()
    try:
        returns = []
        for _ in range(40):  # x 2000 env steps; seed 0 solves in 8
            result = algo.train()
            returns.append(result["evaluation"]["env_runners"].get("episode_return_mean", float("nan")))
            if returns[-1] >= 475:
                break
        checkpoint = algo.save_to_path(str(tmp_path / "checkpoint"))
    finally:
        algo.stop()
    assert max(returns) >= 475, returns
    policy = load_module_policy(Path(checkpoint) / MODULE_SUBPATH, algorithm("ppo"))
    env = gym.make("CartPole-v1")
    played = []
    for seed in range(3):
        obs, _ = env.reset(seed=100 + seed)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(int(policy(np.asarray(obs)[None])[0]))
            total += reward
            done = terminated or truncated
        played.append(total)
    assert np.mean(played) >= 400, played
