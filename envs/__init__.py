"""Gymnasium environments (no Ray imports here) and the flat list of env families the platform reads.

Importing `envs` registers every family's env id with Gymnasium, so `gymnasium.make(id)` works with defaults. Each
platform id has one family object (envs/families.py: the base class; envs/abilities.py: what only some families can
do), exported by its package's `family` module and listed once in `FAMILIES`. It owns everything specific to it:
its env and config model, how its data is made ready, which env_config keys name its data and tag its MLflow runs,
its scorer and baselines, and its optional abilities (paper trading, retraining, transfer...). The platform
(`experiments/`) spells no family's ids or keys; adding a family is one entry here plus its own package
(docs/DESIGN.md, "Adding an env family").
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym

from envs import work_counts
from envs.agents.testgen.family import FAMILY as TEST_GENERATION
from envs.agents.testprio.family import FAMILY as TEST_PRIORITIZATION
from envs.agents.testprio.family import PAIRWISE_FAMILY as TEST_PRIORITIZATION_PAIRWISE
from envs.errors import InputError
from envs.families import EnvFamily, GymFamily
from envs.portfolio.family import FAMILY as PORTFOLIO
from envs.report import EvaluationReport, Policy
from envs.trading.family import FAMILY as SPOT
from envs.validation import did_you_mean

FAMILIES: tuple[EnvFamily, ...] = (SPOT, PORTFOLIO, TEST_PRIORITIZATION, TEST_PRIORITIZATION_PAIRWISE,
                                   TEST_GENERATION)
ENVIRONMENTS: dict[str, EnvFamily] = {entry.env_id: entry for entry in FAMILIES}
for _family in FAMILIES:
    _family.register()


def require_registered(env_id: str) -> None:
    """An InputError with the closest registered id when `env_id` is unknown to Gymnasium."""
    if env_id not in gym.registry:
        hint = did_you_mean(env_id, gym.registry) or ": see envs.ENVIRONMENTS or gymnasium.registry"
        raise InputError(f"environment.env {env_id!r} is not a registered environment{hint}")


def make_env(env_id: str, env_config: dict[str, Any] | None = None) -> gym.Env:
    """The one way to build an env from an experiment's (env, env_config): platform envs take the
    config as one dict, any other Gymnasium id (e.g. CartPole-v1) as keyword arguments."""
    require_registered(env_id)
    work_counts.count(work_counts.ENV_BUILDS)
    config = dict(env_config or {})
    if env_id in ENVIRONMENTS:
        return gym.make(env_id, config=config)
    try:
        return gym.make(env_id, **config)
    except TypeError as error:  # a keyword the env does not take: the file's mistake, said in one line
        raise InputError(f"env_config for {env_id}: {str(error).split(' was raised', 1)[0]}: give only the keyword "
                         f"arguments {env_id} takes") from None


def make_vector_env(env_id: str, num_envs: int, env_config: dict[str, Any] | None = None) -> gym.vector.VectorEnv:
    """`num_envs` copies of a platform env in one vector env: its native batched implementation when the
    family has one, else gymnasium's SyncVectorEnv (what RLlib's env runners get, see algos/rllib/config.py)."""
    require_registered(env_id)
    config = {key: value for key, value in dict(env_config or {}).items() if key != "num_envs"}
    if family(env_id).has_vector_env:
        return gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", config=config)
    return gym.vector.SyncVectorEnv([lambda: make_env(env_id, config) for _ in range(num_envs)])


def family(env_id: str) -> EnvFamily:
    """The family of an env id, resolved once per run and handed down (`ExperimentConfig.family`); plain Gymnasium
    ids (CartPole-v1) get an empty one that scores, caches and tags nothing."""
    return ENVIRONMENTS.get(env_id) or GymFamily(env_id)


def plan_lines(env: gym.Env) -> list[str]:
    """What an env says about itself for the plan (e.g. its features and their warm-ups), if it says anything."""
    describe = getattr(env.unwrapped, "plan_lines", None)
    return list(describe()) if callable(describe) else []


__all__ = ["ENVIRONMENTS", "FAMILIES", "EnvFamily", "EvaluationReport", "Policy", "family", "make_env",
           "make_vector_env", "plan_lines", "require_registered"]
