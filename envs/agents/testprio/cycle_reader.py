"""A registered execution agent's raw input: one CI cycle as a table, ranked through MLflow's pyfunc.

The family's `input_reader` (envs.EnvFamily): the model registered after a run keeps this reader, so
`mlflow.pyfunc.load_model(uri).predict(frame)` (or `mlflow models serve`) takes the tests of one coming cycle in
the RETECS columns a CI server has before the cycle runs (`Name`, `Duration`, `LastRun`, `LastResults`; `Id`,
`Verdict` and `Cycle` may be there and are not read) and answers the order: each test's name, its position (1 runs
first) and the row it came from. Only models trained on the portable features can do this: the other feature sets
scale by statistics of the training history that a lone cycle does not carry, and their readers say so.

The reader also remembers how its model was trained (the histories, the split fractions, the ranking mode), which
is what scoring that model on another history needs (envs.agents.testprio.transfer).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar

import numpy as np
import pandas as pd

from envs.agents.testprio.config import parse_config
from envs.agents.testprio.data import RETECS_HEADER, parse_retecs
from envs.agents.testprio.dataset import prepare
from envs.agents.testprio.features import build_portable
from envs.agents.testprio.ranking import order_cycle, tiebreak_order
from envs.errors import InputError

FORMAT = "testprio-cycle-reader-1"
# What a cycle's table must carry: the pre-cycle columns of the RETECS format.
CYCLE_COLUMNS = ("Name", "Duration", "LastRun", "LastResults")


@dataclass(frozen=True)
class CycleReader:
    """A cycle's table -> the policy's order of its tests (see the module docstring)."""

    mode: str                          # "pairwise" (a comparator) or "pointwise" (priority buckets)
    window: int
    features: str
    priority_buckets: int
    seed: int
    training_data: tuple[str, ...]     # the histories the model learned from (absolute paths on the training machine)
    synthetic_histories: int           # and how many synthetic ones joined them (env_config.synthetic_histories)
    train_fraction: float
    validation_fraction: float
    refusal: str = ""                  # why a lone cycle cannot give this policy's observation ("" when it can)
    tiers: str = "none"                # env_config.tiers: the heuristic's tiers the policy orders within, or none
    residual_rounds: int | None = None  # env_config.residual_rounds: how far it may move a test from the prior
    tier_window: int | None = None      # the newest runs that define a tier (env_config.tier_window, at most window)
    # The mode an env_config without `mode` means (the pairwise env implies it; its family names the subclass).
    DEFAULT_MODE: ClassVar[str] = "pointwise"

    @classmethod
    def for_env_config(cls, env_config: dict[str, Any]) -> CycleReader:
        """The reader of the env a policy was trained in."""
        config = parse_config({"mode": cls.DEFAULT_MODE, **env_config})
        paths = config.data_paths or ((config.data_path,) if config.data_path else ())
        refusal = "" if config.features == "portable" else (
            f"its features ({config.features}) are scaled by its training history's statistics; train with "
            "env_config.features: portable to rank a lone cycle")
        window = prepare(config).window
        return cls(mode=config.mode, window=window, features=config.features,
                   priority_buckets=config.priority_buckets, seed=config.seed,
                   training_data=tuple(str(Path(p)) for p in paths), synthetic_histories=config.synthetic_histories,
                   train_fraction=config.train_fraction, validation_fraction=config.validation_fraction,
                   refusal=refusal, tiers=config.tiers, residual_rounds=config.residual_rounds,
                   tier_window=config.tier_runs(window) if config.tiers == "recent_failures" else None)

    def env_config(self, data_path: str) -> dict[str, Any]:
        """The env_config that featurizes another history as this model's training data was."""
        return {"data_path": data_path, "features": self.features, "mode": self.mode,
                "history_window": self.window, "priority_buckets": self.priority_buckets,
                "seed": self.seed, "train_fraction": self.train_fraction, "tiers": self.tiers,
                "residual_rounds": self.residual_rounds, "tier_window": self.tier_window}

    def training_config(self) -> dict[str, Any] | None:
        """The env_config of the data this model learned from, or None when any of its histories is not on this
        machine (the paths are the training machine's)."""
        if not self.training_data or not all(Path(path).is_file() for path in self.training_data):
            return None
        pooled = len(self.training_data) > 1 or self.synthetic_histories
        sources = ({"data_paths": list(self.training_data), "synthetic_histories": self.synthetic_histories}
                   if pooled else {"data_path": self.training_data[0]})
        return {**sources, "features": self.features, "history_window": self.window, "seed": self.seed,
                "train_fraction": self.train_fraction, "validation_fraction": self.validation_fraction}

    def describe(self) -> str:
        """What the model takes, as a clause whose subject is the model ("it reads ...", "it takes ..."): the
        registration line, the model's description, its `inputs` tag and the serving command's line."""
        if self.refusal:
            return f"takes observations only: {self.refusal}"
        return f"ranks one CI cycle given as a table with the columns {', '.join(CYCLE_COLUMNS)} ({self.mode})"

    def tags(self) -> dict[str, str]:
        """Model version tags: what it reads and which histories it learned from (file names only)."""
        return {"inputs": self.describe(), "training_histories": ", ".join(Path(p).name for p in self.training_data),
                "features": self.features}

    def save(self, path: str | Path) -> None:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump({"format": FORMAT, **asdict(self)}, handle)

    @classmethod
    def load(cls, path: str | Path) -> CycleReader:
        with open(path, encoding="utf-8") as handle:
            config = json.load(handle)
        if config.pop("format", None) != FORMAT:
            raise InputError(f"{path}: not a cycle reader of this platform ({FORMAT})")
        return cls(**{**config, "training_data": tuple(config["training_data"])})

    @staticmethod
    def accepts(model_input: Any) -> bool:
        """Whether a model's input is a cycle's table (it names its tests), not observations."""
        return isinstance(model_input, pd.DataFrame) and "Name" in model_input.columns

    def decide(self, cycle: pd.DataFrame, policy: Callable[[np.ndarray], np.ndarray]) -> pd.DataFrame:
        """The order of the cycle's tests: name, position (1 runs first) and the input row, first to last."""
        if self.refusal:
            raise InputError(f"this model cannot rank a cycle's table: {self.refusal}")
        missing = [column for column in CYCLE_COLUMNS if column not in cycle.columns]
        if missing:
            raise InputError(f"a cycle's table needs the columns {', '.join(CYCLE_COLUMNS)}; missing: "
                             f"{', '.join(missing)}")
        frame = cycle.astype(str).assign(Verdict="0", Cycle="0")
        history = parse_retecs(frame[[c for c in RETECS_HEADER if c in frame.columns]], "the cycle's table")
        features = build_portable(history, self.window)
        tiebreak = tiebreak_order(len(frame), np.random.default_rng(self.seed))
        order = order_cycle(policy, features.matrix, tiebreak, mode=self.mode, priority_buckets=self.priority_buckets,
                            tiers=self.tiers, window=self.window, tier_window=self.tier_window,
                            durations=features.duration_estimates, failure_rates=history.failure_rates,
                            residual_rounds=self.residual_rounds)
        return pd.DataFrame({"Name": history.test_ids[order], "position": np.arange(1, len(order) + 1),
                             "row": order})


class PairwiseCycleReader(CycleReader):
    """The reader of a comparator trained on agents/TestPrioritizationPairwise-v0 (whose env_config need not say
    `mode: pairwise`)."""

    DEFAULT_MODE: ClassVar[str] = "pairwise"
