"""The sweep's finished trials as the scoring sees them: each placed in its group, fold, seed and searched
configuration; which planned folds, seeds and groups are missing; which one to deploy; and their checkpoints as
local folders (downloaded once from S3).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from algos.base import Algorithm
from algos.export.numpy_policy import NumpyPolicy
from envs.errors import InputError, RunFault
from envs.report import Policy
from experiments.config.experiment import ExperimentConfig
from experiments.config.protocol import FOLD_KEY, fold_indices
from experiments.records.checkpoints import ScoredCheckpoint, best_checkpoint
from experiments.records.learning_curves import CurveJudgement, judge_curve, validation_curve
from experiments.records.params import ParamSpace, searched_values
from experiments.results.policy import MODULE_SUBPATH, numpy_policy, torch_policy
from experiments.storage.filesystem import Storage

ALL = "all"


@dataclass(frozen=True)
class Trial:
    """One finished Tune trial, placed in its group, fold, seed and searched configuration."""

    result: Any  # ray.tune.Result
    checkpoint: ScoredCheckpoint
    group: str
    fold: int
    seed: int
    point: str
    curve: CurveJudgement | None = None  # whether its validation curve had flattened when it stopped

    @property
    def env_config(self) -> dict[str, Any]:
        return dict(self.result.config.get("env_config") or {})

    @property
    def trial_id(self) -> str:
        return str(self.result.metrics.get("trial_id", ""))


def point_name(values: dict[str, Any], hidden: set[str]) -> str:
    """A searched configuration's name from its values, e.g. "lr=0.00031 gamma=0.95" ("default": none)."""
    shown = [f"{key.split('.')[-1]}={_short(value)}" for key, value in sorted(values.items()) if key not in hidden]
    return " ".join(shown) or "default"


def _short(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def trials_by_group(results: Any, params: ParamSpace, exp: ExperimentConfig) -> dict[str, list[Trial]]:
    """Every trial that kept a scored checkpoint, by value of `tune.group_by` ("all" without it), each with the
    judgement of its validation curve (experiments/records/learning_curves.py)."""
    group_key = exp.tune.group_by
    metric, mode, min_delta = exp.tune.curve_rule()
    hidden = {FOLD_KEY, "seed", *([group_key] if group_key else [])}
    groups: dict[str, list[Trial]] = {}
    for result in results:
        checkpoint = best_checkpoint(result, exp.tune.mode) if result.error is None else None
        if checkpoint is None:
            continue
        values = searched_values(result.config, params)
        group = str(values[group_key]) if group_key else ALL
        trial = Trial(result, checkpoint, group, int(values.get(FOLD_KEY, 0)), int(result.config.get("seed") or 0),
                      point_name(values, hidden), judge_curve(validation_curve(result.metrics_dataframe, metric), mode,
                                                              min_delta))
        groups.setdefault(group, []).append(trial)
    if not groups:
        errors = "; ".join(str(r.error).splitlines()[0] for r in results if r.error)
        raise SweepFailed(f"no trial kept a scored checkpoint: {errors or 'no results'}")
    return groups


class SweepFailed(Exception):
    """No trial of the sweep can be scored (every one failed, or none kept a checkpoint)."""


def planned_folds(exp: ExperimentConfig) -> list[int]:
    """The folds the sweep trains, as trials are placed in them (0 when the protocol searches none)."""
    return fold_indices(exp) if FOLD_KEY in exp.tune.search_space else [0]


def missing_trials(trials: list[Trial], exp: ExperimentConfig) -> str:
    """The planned folds and seeds without a scored trial in a group, e.g. "fold 3 seed 1 missing" ("" when
    none is)."""
    seeds = exp.tune.seeds
    have = {(t.fold, t.seed) for t in trials}
    parts = []
    for fold in planned_folds(exp):
        lost = [seed for seed in seeds if (fold, seed) not in have]
        if len(lost) == len(seeds):
            parts.append(f"fold {fold}")
        elif lost:
            parts.append(f"fold {fold} seed{'s' if len(lost) > 1 else ''} {', '.join(map(str, lost))}")
    return f"{'; '.join(parts)} missing" if parts else ""


def missing_groups(groups: dict[str, list[Trial]], exp: ExperimentConfig) -> list[str]:
    """Planned values of `tune.group_by` (e.g. coins) of which no trial could be scored."""
    domain = exp.tune.search_space.get(exp.tune.group_by or "") or {}
    return [str(value) for value in domain.get("grid", []) if str(value) not in groups]


def deployable(trials: list[Trial], mode: str, point: str | None = None) -> Trial:
    """The most recent fold's trial of `point` (default: any) with the best validation score."""
    last = max(t.fold for t in trials)
    candidates = [t for t in trials if t.fold == last and (point is None or t.point == point)]
    pick = max if mode == "max" else min
    return pick(candidates, key=lambda t: t.checkpoint.score)


@dataclass(frozen=True)
class CheckpointReader:
    """Trials' checkpoints as local folders: in place on a local storage, else downloaded once into `cache`
    (the policy's module only, for scoring; the whole checkpoint for the chosen trial's artifact). The cache
    is the run's local output folder, so a checkpoint on S3 is downloaded once per run; and each checkpoint's policy
    is exported to numpy once, then shared by scoring, feature importance and registration."""

    storage: Storage
    cache: Path
    _policies: dict[str, tuple[Policy, InputError | None]] = field(default_factory=dict, compare=False, repr=False)

    def policy(self, checkpoint: ScoredCheckpoint, algorithm: Algorithm) -> Policy:
        """The checkpoint's greedy policy: its numpy forward pass, or torch for a module numpy cannot run."""
        return self._exported(checkpoint, algorithm)[0]

    def numpy_policy(self, checkpoint: ScoredCheckpoint, algorithm: Algorithm) -> NumpyPolicy:
        """The numpy forward pass a registered model serves with; the export's refusal when it has none."""
        policy, refusal = self._exported(checkpoint, algorithm)
        if refusal is not None:
            raise refusal
        return policy

    def _exported(self, checkpoint: ScoredCheckpoint, algorithm: Algorithm) -> tuple[Policy, InputError | None]:
        if checkpoint.path not in self._policies:
            module_dir = self.module(checkpoint)
            try:
                self._policies[checkpoint.path] = (numpy_policy(module_dir, algorithm), None)
            except InputError as refusal:
                self._policies[checkpoint.path] = (torch_policy(module_dir, algorithm.greedy), refusal)
        return self._policies[checkpoint.path]

    def module(self, checkpoint: ScoredCheckpoint) -> Path:
        module_dir = self.storage.local_copy(f"{checkpoint.path}/{MODULE_SUBPATH.as_posix()}", self.cache / "policies")
        if not module_dir.exists():
            raise RunFault(f"{self.storage.display(checkpoint.path)}: not an RLlib algorithm checkpoint "
                               f"(no {MODULE_SUBPATH})")
        return module_dir

    def whole(self, checkpoint: ScoredCheckpoint) -> Path:
        return self.storage.local_copy(checkpoint.path, self.cache / "checkpoints")
