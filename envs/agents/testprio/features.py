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

The "extended" set (env_config.features) appends, from the same pre-cycle information:
  failure_ema_0.5, failure_ema_0.8  recency-weighted failure rates over the stored history
  log_failure_streak                standardized log1p(consecutive failures, most recent first)
  log_runs_since_failure            standardized log1p(runs since the last failure; 64 if none)
  flip_rate                         verdict changes / runs in the stored history (flakiness)
  cycle_last_failed_share           share of the cycle's tests whose last run failed
  log_cycle_size                    standardized log(number of tests in the cycle)
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


def build_features(history: CIHistory, window: int, train_cycles: int, extended: bool = False) -> FeatureSet:
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
    columns = [verdict_window, failure_rate, duration_share, standardized]
    names = (
        tuple(f"history_{k + 1}" for k in range(window))
        + ("failure_rate", "duration_share", "log_duration", "log_days_since_run", "log_runs")
        + history.static_feature_names
    )
    if extended:
        extra, extra_names = _extended(history, cycle_of_row, train_rows)
        columns.append(extra)
        names += extra_names
    matrix = np.column_stack(columns).astype(np.float32)
    matrix.setflags(write=False)
    return FeatureSet(matrix=matrix, names=names, duration_estimates=duration)


def _extended(
    history: CIHistory, cycle_of_row: np.ndarray, train_rows: slice
) -> tuple[np.ndarray, tuple[str, ...]]:
    """History and cycle-context features of the "extended" set (pre-cycle information only)."""
    past = history.history.astype(np.float64)
    ran, failed = past >= 0, past == 1
    capacity = past.shape[1]
    rates = []
    for decay in (0.5, 0.8):
        weights = decay ** np.arange(capacity)
        rates.append((failed * weights).sum(1) / np.maximum((ran * weights).sum(1), 1e-12))
    streak = np.where(failed.all(1), capacity, np.argmax(~failed, axis=1)).astype(np.float64)
    since = np.where(failed.any(1), np.argmax(failed, axis=1), capacity).astype(np.float64)
    flips = ((past[:, 1:] != past[:, :-1]) & ran[:, 1:]).sum(1) / np.maximum(ran.sum(1) - 1, 1)
    sizes = history.cycle_sizes.astype(np.float64)
    last_failed = np.bincount(cycle_of_row, failed[:, 0], minlength=history.n_cycles)
    last_failed_share = last_failed / np.maximum(sizes, 1)
    log_size = np.log(np.maximum(sizes, 1))[cycle_of_row]
    scaled = _standardize(np.column_stack([np.log1p(streak), np.log1p(since), log_size]), train_rows)
    matrix = np.column_stack([*rates, scaled[:, :2], flips, last_failed_share[cycle_of_row], scaled[:, 2]])
    names = ("failure_ema_0.5", "failure_ema_0.8", "log_failure_streak", "log_runs_since_failure",
             "flip_rate", "cycle_last_failed_share", "log_cycle_size")
    return matrix, names


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
