"""Per-test feature vectors, built from pre-cycle information only.

Features of a test in cycle c use what a CI server knows before c runs: the test's
previous verdicts, its failure rate so far, its estimated duration, how long ago it last
ran, and (enriched data) static code metrics. The cycle's verdicts and actual durations
are never read here. Scale statistics are fitted on the training cycles only, so the
test split influences nothing but its own rows.

Layout (in `FeatureSet.names` order), all within [-CLIP, CLIP]:
  history_1..history_w  previous verdicts, most recent first: 1 failed, 0 passed, -1 no run
  failure_rate          failed runs / runs so far (0 for a new test)
  duration_share        estimated duration / longest estimated duration in the cycle
  log_duration          standardized log1p(estimated duration)
  log_days_since_run    standardized log1p(time since the last run); 0 (the mean) if never ran
  log_runs              standardized log1p(number of earlier runs)
  <static metrics>      standardized sign(x)·log1p(|x|) of each metric (heavy tails tamed)
A test with no duration estimate gets the training median, so unknown is "typical".
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from envs.agents.testprio.data import CIHistory

CLIP = 5.0


@dataclass(frozen=True)
class FeatureSet:
    """One float32 feature row per test execution, aligned with the history's rows."""

    matrix: np.ndarray  # (N, d) float32, read-only
    names: tuple[str, ...]
    # Estimated durations with unknowns filled by the training median: the tie-breaker
    # and the cost estimate that baselines may use (pre-cycle information).
    duration_estimates: np.ndarray  # (N,) float64

    @property
    def dim(self) -> int:
        return self.matrix.shape[1]


def build_features(history: CIHistory, window: int, train_cycles: int) -> FeatureSet:
    """Features for every row; scale statistics come from the first `train_cycles` cycles."""
    train_rows = slice(0, int(history.offsets[train_cycles]))
    verdict_window = history.history[:, :window].astype(np.float32)
    failure_rate = history.prior_failures / np.maximum(history.prior_runs, 1)

    duration = history.duration_estimates.copy()
    known_train = duration[train_rows][~np.isnan(duration[train_rows])]
    duration[np.isnan(duration)] = float(np.median(known_train)) if known_train.size else 1.0
    cycle_of_row = np.repeat(np.arange(history.n_cycles), history.cycle_sizes)
    longest = np.maximum.reduceat(duration, history.offsets[:-1])[cycle_of_row]
    duration_share = np.divide(duration, longest, out=np.zeros_like(duration), where=longest > 0)

    scaled = np.column_stack(
        [
            np.log1p(duration),
            np.log1p(history.days_since_last_run),
            np.log1p(history.prior_runs.astype(np.float64)),
            np.sign(history.static_features) * np.log1p(np.abs(history.static_features)),
        ]
    )
    standardized = _standardize(scaled, train_rows)
    matrix = np.column_stack([verdict_window, failure_rate, duration_share, standardized]).astype(np.float32)
    matrix.setflags(write=False)
    names = (
        tuple(f"history_{k + 1}" for k in range(window))
        + ("failure_rate", "duration_share", "log_duration", "log_days_since_run", "log_runs")
        + history.static_feature_names
    )
    return FeatureSet(matrix=matrix, names=names, duration_estimates=duration)


def _standardize(values: np.ndarray, train_rows: slice) -> np.ndarray:
    """z-scores with training-row statistics; NaN (unknown) becomes 0, the training mean."""
    train = values[train_rows]
    mean = np.zeros(values.shape[1])
    std = np.ones(values.shape[1])
    for column in range(values.shape[1]):
        known = train[:, column][~np.isnan(train[:, column])]
        if known.size:
            mean[column] = known.mean()
            spread = known.std()
            std[column] = spread if spread > 0 else 1.0
    z = (values - mean) / std
    return np.clip(np.nan_to_num(z, nan=0.0), -CLIP, CLIP)
