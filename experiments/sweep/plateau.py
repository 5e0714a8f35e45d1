"""When Tune stops a trial: `tune.stop` (the maximum budget) and, when the file sets it, `tune.plateau` (a trial whose
validation score has not improved for `patience` iterations).

Tune takes either a dict of thresholds or a Stopper, not both (ray/tune/experiment/experiment.py): a dict becomes
each trial's `stopping_criterion`, which `Trial.should_stop` compares, key by key on the flattened result, with `>=`.
Without a plateau the dict goes to Tune as it always did. With one, `ThresholdStopper` says what that dict says and
`PlateauStopper` adds the plateau; `CombinedStopper` stops a trial at the first of them.

Unlike ASHA (`tune.scheduler: asha`), which stops a trial that is worse than its peers at a rung, the plateau compares
a trial with its own past only: it stops the best trial too, once it stops improving, and it never compares one
fold's validation window with another's.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ray.tune.stopper import CombinedStopper, Stopper
from ray.tune.utils import flatten_dict

from algos.rllib.config import lookup
from experiments.config.experiment import ExperimentConfig
from experiments.records.learning_curves import is_score, iterations_since_best


class ThresholdStopper(Stopper):
    """A `tune.stop` dict as a Stopper: a trial stops once any named result key reaches its threshold (`>=`), as
    Tune's `Trial.should_stop` reads the dict; a key the result lacks stops nothing."""

    def __init__(self, criteria: Mapping[str, float]) -> None:
        self.criteria = dict(criteria)

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        flat = flatten_dict(result)
        return any(key in flat and flat[key] >= threshold for key, threshold in self.criteria.items())

    def stop_all(self) -> bool:
        return False


class PlateauStopper(Stopper):
    """Stops a trial once `patience` iterations have passed since its last new best of `metric` (a gain of more than
    `min_delta`, experiments/records/learning_curves.py). It keeps each trial's curve by training iteration, so the
    iterations a trial retried from its last checkpoint reports again replace theirs rather than count twice; a
    sweep resumed with --resume counts each unfinished trial's patience afresh from where it resumes."""

    def __init__(self, metric: str, mode: str, patience: int, min_delta: float = 0.0) -> None:
        self.metric, self.mode, self.patience, self.min_delta = metric, mode, patience, min_delta
        self._curves: dict[str, dict[int, float]] = {}  # trial id -> training iteration -> value (NaN: none)

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        value = lookup(result, self.metric)
        curve = self._curves.setdefault(trial_id, {})
        iteration = result.get("training_iteration")
        if not isinstance(iteration, int):
            iteration = max(curve, default=0) + 1
        for replayed in [i for i in curve if i >= iteration]:  # reported again after a retry from a checkpoint
            del curve[replayed]
        curve[iteration] = float(value) if is_score(value) else float("nan")
        since = iterations_since_best(list(curve.values()), self.mode, self.min_delta)
        return since is not None and since >= self.patience

    def stop_all(self) -> bool:
        return False


def stop_rule(exp: ExperimentConfig) -> dict[str, float] | Stopper:
    """What `RunConfig(stop=...)` gets: the `tune.stop` dict as it is without a plateau; with one, that dict's
    thresholds or the plateau, whichever comes first."""
    plateau = exp.tune.plateau
    if plateau is None:
        return exp.tune.stop
    metric, mode, min_delta = exp.tune.curve_rule()
    return CombinedStopper(ThresholdStopper(exp.tune.stop), PlateauStopper(metric, mode, plateau.patience, min_delta))
