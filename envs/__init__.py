"""Gymnasium environments (no Ray imports here).

Importing `envs` registers every environment id with Gymnasium, so `gymnasium.make(id)`
works with defaults, and maps each id to the function that scores a trained policy on
its held-out split (see `envs.report.EvaluationReport`).
"""
from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass
from typing import Any, Callable

import gymnasium as gym

from envs.errors import InputError
from envs.report import EvaluationReport, Policy

@dataclass(frozen=True)
class EnvFamily:
    """What the platform needs to know of one env id."""

    entry_point: str  # "module:Class" of the gymnasium.Env
    scorer: str       # "module:function(policy, env_config) -> EvaluationReport" on the held-out part
    # The env takes env_config `protocol` and `fold` (envs.splits), tells its parts' periods with
    # `split_periods()`, and its reports carry per-period returns and periods_per_year: experiments can
    # run walk-forward folds and end with a verdict (experiments.verdict).
    folds: bool = False
    # "module:Class" of a native gymnasium.vector.VectorEnv (N envs in one numpy step), or None: RLlib's env
    # runners then use gymnasium's SyncVectorEnv over single envs.
    vector_entry_point: str | None = None


ENVIRONMENTS: dict[str, EnvFamily] = {
    "trading/Spot-v0": EnvFamily("envs.trading.env:SpotTradingEnv", "envs.trading.backtest:evaluate_policy",
                                 folds=True, vector_entry_point="envs.trading.vector_env:SpotTradingVectorEnv"),
    "agents/TestPrioritization-v0": EnvFamily("envs.agents.testprio.env:PointwiseTestPrioritizationEnv",
                                              "envs.agents.testprio.evaluate:evaluate_policy"),
    "agents/TestPrioritizationPairwise-v0": EnvFamily("envs.agents.testprio.env:PairwiseTestPrioritizationEnv",
                                                      "envs.agents.testprio.evaluate:evaluate_pairwise_policy"),
}

for _env_id, _family in ENVIRONMENTS.items():
    if _env_id not in gym.registry:
        gym.register(id=_env_id, entry_point=_family.entry_point, vector_entry_point=_family.vector_entry_point)


def _load(entry_point: str) -> Any:
    module_name, attr = entry_point.split(":")
    return getattr(importlib.import_module(module_name), attr)


def require_registered(env_id: str) -> None:
    """An InputError with the closest registered id when `env_id` is unknown to Gymnasium."""
    if env_id not in gym.registry:
        close = difflib.get_close_matches(env_id, list(gym.registry), n=1)
        hint = f": did you mean {close[0]!r}?" if close else ": see envs.ENVIRONMENTS or gymnasium.registry"
        raise InputError(f"environment.env {env_id!r} is not a registered environment{hint}")


def make_env(env_id: str, env_config: dict[str, Any] | None = None) -> gym.Env:
    """The one way to build an env from an experiment's (env, env_config): platform envs take the
    config as one dict, any other Gymnasium id (e.g. CartPole-v1) as keyword arguments."""
    require_registered(env_id)
    config = dict(env_config or {})
    return gym.make(env_id, config=config) if env_id in ENVIRONMENTS else gym.make(env_id, **config)


def make_vector_env(env_id: str, num_envs: int, env_config: dict[str, Any] | None = None) -> gym.vector.VectorEnv:
    """`num_envs` copies of a platform env in one vector env: its native batched implementation when the
    family has one, else gymnasium's SyncVectorEnv (what RLlib's env runners get, see algos/dqn.py)."""
    require_registered(env_id)
    config = {key: value for key, value in dict(env_config or {}).items() if key != "num_envs"}
    if has_vector_env(env_id):
        return gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", config=config)
    return gym.vector.SyncVectorEnv([lambda: make_env(env_id, config) for _ in range(num_envs)])


def has_vector_env(env_id: str) -> bool:
    """Whether `env_id` has a native vector implementation (EnvFamily.vector_entry_point)."""
    entry = ENVIRONMENTS.get(env_id)
    return bool(entry and entry.vector_entry_point)


def evaluator_for(env_id: str) -> Callable[[Policy, dict[str, Any]], EvaluationReport] | None:
    """The out-of-sample scorer of a platform env id, or None for plain Gymnasium ids."""
    entry = ENVIRONMENTS.get(env_id)
    return _load(entry.scorer) if entry else None


def supports_folds(env_id: str) -> bool:
    """Whether `env_id` runs walk-forward folds and reports returns for a verdict."""
    entry = ENVIRONMENTS.get(env_id)
    return bool(entry and entry.folds)


__all__ = ["ENVIRONMENTS", "EnvFamily", "EvaluationReport", "Policy", "evaluator_for", "has_vector_env", "make_env",
           "make_vector_env", "require_registered", "supports_folds"]
