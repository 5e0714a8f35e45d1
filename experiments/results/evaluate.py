"""Score a policy out of sample: the family's scorer on the given env_config, as an `EvaluationReport` (printing and
logging it are experiments/results/printing.py and mlflow_logging.py).

Platform envs bring their own scorer (`envs.EnvFamily.evaluator`): trading backtests the test
period against buy-and-hold, flat and an SMA rule; test prioritization scores held-out CI
cycles. Any other Gymnasium id gets mean greedy return next to a uniformly random policy.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd

import envs
from envs.report import EvaluationReport, Policy


def _episode_returns(env_id: str, env_config: dict[str, Any], choose, episodes: int, seed: int) -> list[float]:
    env = envs.make_env(env_id, env_config)
    returns = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        done, total = False, 0.0
        while not done:
            obs, reward, terminated, truncated, _ = env.step(choose(obs))
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return returns


def evaluate_gym_policy(policy: Policy, env_id: str, env_config: dict[str, Any],
                        episodes: int = 10, seed: int = 10_000) -> EvaluationReport:
    """Greedy return over fresh seeds vs a random policy, for plain Gymnasium envs."""
    space = envs.make_env(env_id, env_config).action_space
    space.seed(seed)  # the random baseline's actions are the same on every run

    def greedy(observation: np.ndarray) -> Any:
        action = policy(np.asarray(observation)[None])[0]  # an index for a Discrete space, a vector for a Box
        return int(action) if isinstance(space, gym.spaces.Discrete) else action

    rows = {
        "agent": _episode_returns(env_id, env_config, greedy, episodes, seed),
        "random": _episode_returns(env_id, env_config, lambda o: space.sample(), episodes, seed),
    }
    table = pd.DataFrame({name: {"episode_return_mean": np.mean(r), "episode_return_std": np.std(r),
                                 "episodes": len(r)} for name, r in rows.items()}).T
    return EvaluationReport(
        title=f"{env_id}: {episodes} evaluation episodes on unseen seeds",
        table=table,
        agent_metrics={"eval/return_mean": float(np.mean(rows["agent"]))},
        series=pd.DataFrame(rows, index=pd.RangeIndex(episodes, name="episode")),
        series_label="episode return",
    )


def evaluate_checkpoint(policy: Policy, family: envs.EnvFamily, env_config: dict[str, Any]) -> EvaluationReport:
    scorer = family.evaluator()
    if scorer is None:
        return evaluate_gym_policy(policy, family.env_id, env_config)
    return scorer(policy, env_config)
