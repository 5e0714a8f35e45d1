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

The "portable" set (for several histories learned as one, and models that score a history they never saw) uses
only what every history gives, each on a scale that needs no statistics of the history, so a new project's cycle
is featurized on its own, as it comes: no code metrics (some formats lack them), no z-scores (a training history's
mean duration says nothing about another project's), durations and recency as ranks and ratios within the cycle:
  history_1..history_w, failure_rate, failure_ema_0.5, failure_ema_0.8, flip_rate, cycle_last_failed_share
                                    as above
  failure_streak, runs_since_failure log1p(count) / log1p(64), in [0, 1]
  duration_share                    estimated duration / the cycle's longest
  duration_rank                     the estimate's rank in the cycle, 0 = shortest, 1 = longest
  log_duration_ratio                log(estimate / the cycle's median estimate), clipped
  recency_rank                      time since the last run, ranked in the cycle (1 = longest ago or never ran)
  runs_rank                         earlier runs, ranked in the cycle
  new_test                          1 if the test never ran before
  cycle_size                        log(tests in the cycle) / log(1000)
A test with no duration estimate gets its cycle's median estimate (1 if the cycle has none).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

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
    failure_rate = history.failure_rates

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


def build_portable(history: CIHistory, window: int) -> FeatureSet:
    """The portable features of every row (module docstring): no statistic is fitted, so the rows of any history,
    any cycle, alone or pooled with others, get the same features whatever else was loaded."""
    cycle_of_row = np.repeat(np.arange(history.n_cycles), history.cycle_sizes)
    by_cycle = pd.Series(cycle_of_row)
    duration = history.duration_estimates.copy()
    cycle_median = pd.Series(duration).groupby(by_cycle).transform("median").to_numpy()
    duration = np.where(np.isnan(duration), np.nan_to_num(cycle_median, nan=1.0), duration)
    longest = np.maximum.reduceat(duration, history.offsets[:-1])[cycle_of_row]
    median = pd.Series(duration).groupby(by_cycle).transform("median").to_numpy()
    since = np.where(np.isnan(history.days_since_last_run), np.inf, history.days_since_last_run)
    stats = _verdict_statistics(history, cycle_of_row)
    capacity = history.history.shape[1]
    sizes = history.cycle_sizes.astype(np.float64)
    columns = {
        "failure_rate": history.failure_rates,
        "failure_ema_0.5": stats.rates[0],
        "failure_ema_0.8": stats.rates[1],
        "flip_rate": stats.flips,
        "cycle_last_failed_share": stats.last_failed_share,
        "failure_streak": np.log1p(stats.streak) / np.log1p(capacity),
        "runs_since_failure": np.log1p(stats.runs_since_failure) / np.log1p(capacity),
        "duration_share": np.divide(duration, longest, out=np.zeros_like(duration), where=longest > 0),
        "duration_rank": _rank_in_cycle(duration, by_cycle),
        "log_duration_ratio": np.clip(np.log((duration + 1e-9) / (median + 1e-9)), -CLIP, CLIP),
        "recency_rank": _rank_in_cycle(since, by_cycle),
        "runs_rank": _rank_in_cycle(history.prior_runs.astype(np.float64), by_cycle),
        "new_test": (history.prior_runs == 0).astype(np.float64),
        "cycle_size": np.minimum(np.log(np.maximum(sizes, 1)) / np.log(1000.0), CLIP)[cycle_of_row],
    }
    matrix = np.column_stack([history.history[:, :window].astype(np.float32), *columns.values()]).astype(np.float32)
    matrix.setflags(write=False)
    names = tuple(f"history_{k + 1}" for k in range(window)) + tuple(columns)
    return FeatureSet(matrix=matrix, names=names, duration_estimates=duration)


def _rank_in_cycle(values: np.ndarray, by_cycle: pd.Series) -> np.ndarray:
    """Each value's rank among its cycle's, scaled to [0, 1] (ties share their mean rank; one test: 0.5)."""
    ranks = pd.Series(values).groupby(by_cycle).rank(method="average").to_numpy()
    sizes = by_cycle.map(by_cycle.value_counts()).to_numpy()
    return np.where(sizes > 1, (ranks - 1) / np.maximum(sizes - 1, 1), 0.5)


@dataclass(frozen=True)
class _VerdictStatistics:
    """What the stored verdict window says of each row, shared by the extended and the portable sets."""

    rates: tuple[np.ndarray, np.ndarray]  # recency-weighted failure rates, decays 0.5 and 0.8
    streak: np.ndarray                    # consecutive failures, most recent first (the window's length if all)
    runs_since_failure: np.ndarray        # runs since the last failure (the window's length if none)
    flips: np.ndarray                     # verdict changes / runs in the window (flakiness)
    last_failed_share: np.ndarray         # share of the row's cycle whose last run failed


def _verdict_statistics(history: CIHistory, cycle_of_row: np.ndarray) -> _VerdictStatistics:
    past = history.history.astype(np.float64)
    ran, failed = past >= 0, past == 1
    capacity = past.shape[1]
    rates = []
    for decay in (0.5, 0.8):
        weights = decay ** np.arange(capacity)
        rates.append((failed * weights).sum(1) / np.maximum((ran * weights).sum(1), 1e-12))
    last_failed = np.bincount(cycle_of_row, failed[:, 0], minlength=history.n_cycles)
    return _VerdictStatistics(
        rates=(rates[0], rates[1]),
        streak=np.where(failed.all(1), capacity, np.argmax(~failed, axis=1)).astype(np.float64),
        runs_since_failure=np.where(failed.any(1), np.argmax(failed, axis=1), capacity).astype(np.float64),
        flips=((past[:, 1:] != past[:, :-1]) & ran[:, 1:]).sum(1) / np.maximum(ran.sum(1) - 1, 1),
        last_failed_share=(last_failed / np.maximum(history.cycle_sizes.astype(np.float64), 1))[cycle_of_row],
    )


def _extended(
    history: CIHistory, cycle_of_row: np.ndarray, train_rows: slice
) -> tuple[np.ndarray, tuple[str, ...]]:
    """History and cycle-context features of the "extended" set (pre-cycle information only)."""
    stats = _verdict_statistics(history, cycle_of_row)
    log_size = np.log(np.maximum(history.cycle_sizes.astype(np.float64), 1))[cycle_of_row]
    scaled = _standardize(np.column_stack([np.log1p(stats.streak), np.log1p(stats.runs_since_failure), log_size]),
                          train_rows)
    matrix = np.column_stack([*stats.rates, scaled[:, :2], stats.flips, stats.last_failed_share, scaled[:, 2]])
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
