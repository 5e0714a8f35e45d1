"""What every env family is: the base class the platform reads, and the family of a plain Gymnasium id.

A family is one object (`FAMILY = SpotFamily()` in its package's `family` module), registered once in the flat list
of `envs/__init__.py`, as Gymnasium's `register()` calls are. The base class holds what every platform env id has:
its env class, the model of its env_config, its scorer, its baselines, the env_config keys that tag and name its
runs. What only some families can do is an ability (envs/abilities.py) the family's class inherits; the platform
asks `isinstance(family, abilities.Retrains)` and calls a method with a real signature. Imports of a family's own
modules stay inside its methods, so reading the table imports no env, no data library, no torch and no Ray.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable

import gymnasium as gym

from envs.baselines import Baseline
from envs.report import EvaluationReport, Policy
from envs.validation import StrictModel, validate

Scorer = Callable[[Policy, dict[str, Any]], EvaluationReport]


class EnvFamily(ABC):
    """The base of every family: what the platform needs to know of one env id.

    Class attributes a family sets (all optional):
    - `tag_keys`: env_config keys that tag the MLflow runs (each trial its own value);
    - `data_keys`: env_config keys that choose the data (a --set of one renames the registered model); the first one
      set labels the run's data;
    - `path_keys`: env_config keys (besides *_path and *_dir), at any depth, whose values are files: relative ones
      resolve against the experiment file's folder;
    - `comparison_columns`: the agent's headline test metrics that `experiments.compare` shows per trial;
    - `smoke_overrides`: --set overrides that make its --smoke-test runs short, on top of the platform's and the
      algorithm's.
    """

    env_id: str = ""
    tag_keys: tuple[str, ...] = ()
    data_keys: tuple[str, ...] = ()
    path_keys: tuple[str, ...] = ()
    comparison_columns: tuple[str, ...] = ()
    smoke_overrides: tuple[str, ...] = ()

    @abstractmethod
    def env_class(self) -> type[gym.Env]:
        """The gymnasium.Env class; a platform family's constructor takes the env_config as one dict (`config=`)."""

    def vector_env_class(self) -> type[gym.vector.VectorEnv] | None:
        """A native vector env (N envs in one numpy step), or None: RLlib's env runners then use gymnasium's
        SyncVectorEnv over single envs."""
        return None

    def config_model(self) -> type[StrictModel] | None:
        """The env_config's model, checked before Ray starts; None: the env takes keyword arguments unchecked."""
        return None

    def evaluator(self) -> Scorer | None:
        """The out-of-sample scorer of a trained policy on the held-out part, or None for plain Gymnasium ids."""
        return None

    def baseline_table(self) -> tuple[Baseline, ...]:
        """The family's baselines, headline first, which its scorer runs next to the agent (empty: plain ids, scored
        against random actions)."""
        return ()

    def data_parts(self, env_config: dict[str, Any]) -> list[Any]:
        """The parts of the data `env_config` trains, selects and is scored on (envs.datasets.DataPart), logged as
        MLflow dataset inputs of its runs; empty when the family reads no data file."""
        return []

    @property
    def has_vector_env(self) -> bool:
        """Whether the family has a native vector implementation: it overrides vector_env_class (asking the method
        would import the env module, and the table is read at import time)."""
        return type(self).vector_env_class is not EnvFamily.vector_env_class

    def make(self, env_config: dict[str, Any] | None = None) -> gym.Env:
        from envs import make_env

        return make_env(self.env_id, env_config)

    def check_config(self, env_config: dict[str, Any], source: str, prefix: str = "environment.env_config.") -> None:
        """Validate an env_config against the family's model (no data is read); InputError naming the key."""
        model = self.config_model()
        if model is not None:
            validate(model, dict(env_config), source, prefix)

    def run_tags(self, env_config: dict[str, Any]) -> dict[str, str]:
        """MLflow tags of a run of this env: the family's tag keys and the data it reads."""
        tags = {key: str(env_config[key]) for key in self.tag_keys if env_config.get(key) is not None}
        return {**tags, "data": self.data_label(env_config)}

    def data_label(self, env_config: dict[str, Any]) -> str:
        """What data a run reads: the first of the family's data keys that is set, else the env id."""
        return next((str(env_config[key]) for key in self.data_keys if env_config.get(key) is not None), self.env_id)

    def register(self) -> None:
        """Register the env id with Gymnasium, through this object (no "module:Class" string): `gymnasium.make(id)`
        then builds the family's env with defaults."""
        if self.env_id in gym.registry:
            return
        vector = self._make_vector if self.has_vector_env else None
        gym.register(id=self.env_id, entry_point=self._make_env, vector_entry_point=vector)

    def _make_env(self, **kwargs: Any) -> gym.Env:
        return self.env_class()(**kwargs)

    def _make_vector(self, **kwargs: Any) -> gym.vector.VectorEnv:
        return self.vector_env_class()(**kwargs)  # registered only where has_vector_env

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.env_id!r})"


class GymFamily(EnvFamily):
    """The family of a plain Gymnasium id (CartPole-v1, Pendulum-v1): it scores, caches and tags nothing; the env
    takes its env_config as keyword arguments."""

    def __init__(self, env_id: str) -> None:
        self.env_id = env_id

    def env_class(self) -> type[gym.Env]:
        """The class Gymnasium registered for the id (its entry point, loaded by Gymnasium's own loader)."""
        from gymnasium.envs.registration import load_env_creator

        creator = gym.spec(self.env_id).entry_point
        return load_env_creator(creator) if isinstance(creator, str) else creator
