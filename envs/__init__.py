"""Gymnasium environments (no Ray imports here).

Importing `envs` registers every environment id with Gymnasium, so `gymnasium.make(id)`
works with defaults, and maps each id to the function that scores a trained policy on
its held-out split (see `envs.report.EvaluationReport`).
"""
from __future__ import annotations

import importlib
from typing import Any, Callable

import gymnasium as gym

from envs.report import EvaluationReport, Policy

# id -> (env entry point, evaluator entry point "module:function(policy, env_config) -> EvaluationReport")
ENVIRONMENTS: dict[str, tuple[str, str]] = {
    "trading/Spot-v0": ("envs.trading.env:SpotTradingEnv", "envs.trading.backtest:evaluate_policy"),
    "agents/TestPrioritization-v0": (
        "envs.agents.testprio.env:PointwiseTestPrioritizationEnv",
        "envs.agents.testprio.evaluate:evaluate_policy",
    ),
    "agents/TestPrioritizationPairwise-v0": (
        "envs.agents.testprio.env:PairwiseTestPrioritizationEnv",
        "envs.agents.testprio.evaluate:evaluate_pairwise_policy",
    ),
}

for _env_id, (_entry_point, _) in ENVIRONMENTS.items():
    if _env_id not in gym.registry:
        gym.register(id=_env_id, entry_point=_entry_point)


def _load(entry_point: str) -> Any:
    module_name, attr = entry_point.split(":")
    return getattr(importlib.import_module(module_name), attr)


def evaluator_for(env_id: str) -> Callable[[Policy, dict[str, Any]], EvaluationReport] | None:
    """The out-of-sample scorer of a platform env id, or None for plain Gymnasium ids."""
    entry = ENVIRONMENTS.get(env_id)
    return _load(entry[1]) if entry else None


__all__ = ["ENVIRONMENTS", "EvaluationReport", "Policy", "evaluator_for"]
