"""Scores of one prioritized CI cycle: APFDc, the time to the first failure, APFD, NAPFD and NRPA.

Every function takes the cycle's verdicts (True = failed) and, where needed, the tests'
actual durations, both already in the order being scored. Each failing test counts as
one fault (the data has verdicts, not fault matrices).

Conventions:
* APFD = 1 - sum(TF_i) / (n m) + 1 / (2n), TF_i the 1-based position of the i-th failing
  test, n tests, m failing tests. A cycle with no failure has no APFD (NaN): means over
  cycles skip it, as Bagherzadeh et al. and Spieker et al. do.
* NAPFD (Qu et al.) = p - sum(TF_i) / (n m) + p / (2n) for a time budget: tests run in the
  given order and a test that does not fit into the remaining budget is skipped (later,
  shorter ones may still run), as in the RETECS scheduler. p is the share of failing tests
  that ran; TF_i are their positions among the tests that ran, and a failing test that did
  not run adds nothing to the sum (it is penalized through p). With no cut NAPFD = APFD.
  NaN for a cycle with no failure.
* NRPA (Bagherzadeh et al.) = RPA(order) / RPA(optimal order). The optimal order puts
  failing tests first and shorter tests first within each verdict; a test's rank value R
  is n for the best test down to 1 for the worst, averaged over tests that tie on
  (verdict, duration) so that any optimal order scores exactly 1. RPA = sum over
  positions i = 1..n of (n - i + 1) R(test at i), which is the sum of the R of all prefixes.
  Defined for every cycle, including cycles with no failure.
* APFDc (cost-cognizant APFD; Elbaum, Malishevsky & Rothermel, ICSE 2001, with every fault of equal severity)
  = sum over failing tests i of (sum_{j >= TF_i} t_j - t_{TF_i} / 2) / (T m), t_j the actual duration of the test
  at position j and T the cycle's total: the share of the cycle's TIME during which each failure is already
  known, averaged over failures. A team waits for minutes, not positions, so this is what a CI user feels: a
  long test run first to find a failure costs what it costs. With equal durations it equals APFD. A cycle whose
  tests all took no measured time has no cost to weigh: every test then counts 1 (APFDc = APFD). NaN without
  a failure.
* Time to the first failure = (sum of t_j for j <= TF_1) / T: the share of the cycle's duration that runs before
  the first failing test has finished (lower is better; the same unit-cost fallback). NaN without a failure.
* A single-test cycle has one possible order: APFD = NAPFD = 0.5 (no cut) and NRPA = 1.
  The evaluator does not score such cycles; see `envs.agents.testprio.evaluate`.
"""
from __future__ import annotations

import numpy as np


def apfd(verdicts: np.ndarray) -> float:
    """Average percentage of faults detected; NaN when the cycle has no failing test."""
    failed = np.asarray(verdicts, dtype=bool)
    n, m = failed.size, int(failed.sum())
    if m == 0:
        return float("nan")
    positions = np.flatnonzero(failed) + 1
    return float(1.0 - positions.sum() / (n * m) + 1.0 / (2 * n))


def apfdc(verdicts: np.ndarray, durations: np.ndarray) -> float:
    """Cost-cognizant APFD (module docstring); NaN when the cycle has no failing test."""
    failed = np.asarray(verdicts, dtype=bool)
    m = int(failed.sum())
    if m == 0:
        return float("nan")
    costs = _costs(durations, failed.size)
    total = costs.sum()
    from_here = total - np.cumsum(costs) + costs  # sum of t_j for j >= each position
    return float((from_here - costs / 2)[failed].sum() / (total * m))


def time_to_first_failure(verdicts: np.ndarray, durations: np.ndarray) -> float:
    """Share of the cycle's duration spent until the first failing test has finished; NaN without a failure."""
    failed = np.asarray(verdicts, dtype=bool)
    if not failed.any():
        return float("nan")
    costs = _costs(durations, failed.size)
    return float(costs[: int(np.argmax(failed)) + 1].sum() / costs.sum())


def _costs(durations: np.ndarray, n: int) -> np.ndarray:
    """The tests' costs for APFDc: their durations, or 1 each when the cycle took no measured time at all."""
    costs = np.asarray(durations, dtype=np.float64)
    if costs.shape != (n,) or not np.all(np.isfinite(costs)) or np.any(costs < 0):
        raise ValueError(f"durations must be {n} finite, non-negative numbers; got {costs!r}")
    return costs if costs.sum() > 0 else np.ones(n)


def napfd(verdicts: np.ndarray, durations: np.ndarray, time_budget: float) -> float:
    """APFD normalized for a time budget (a fraction of the cycle's total duration)."""
    failed = np.asarray(verdicts, dtype=bool)
    n, m = failed.size, int(failed.sum())
    if m == 0:
        return float("nan")
    ran = scheduled(np.asarray(durations, dtype=np.float64), time_budget)
    positions_among_ran = np.cumsum(ran)[ran & failed]
    p = positions_among_ran.size / m
    return float(p - positions_among_ran.sum() / (n * m) + p / (2 * n))


def scheduled(durations: np.ndarray, time_budget: float) -> np.ndarray:
    """Which tests of an ordered cycle run within `time_budget` × the total duration."""
    if time_budget >= 1.0:
        return np.ones(durations.size, dtype=bool)
    available = time_budget * durations.sum()
    ran = np.zeros(durations.size, dtype=bool)
    used = 0.0
    for position, duration in enumerate(durations):
        if used + duration <= available:
            ran[position] = True
            used += duration
    return ran


def nrpa(verdicts: np.ndarray, durations: np.ndarray) -> float:
    """Normalized rank-percentile average of an order against the optimal one."""
    failed = np.asarray(verdicts, dtype=bool)
    rank_value = optimal_rank_values(failed, np.asarray(durations, dtype=np.float64))
    weights = np.arange(failed.size, 0, -1, dtype=np.float64)
    return float(weights @ rank_value / (weights @ np.sort(rank_value)[::-1]))


def optimal_rank_values(verdicts: np.ndarray, durations: np.ndarray) -> np.ndarray:
    """R per test: n for the first test of the optimal order ... 1 for the last, ties averaged."""
    n = verdicts.size
    order = np.lexsort((durations, ~verdicts))
    keys = np.column_stack([~verdicts[order], durations[order]])
    new_group = np.ones(n, dtype=bool)
    new_group[1:] = np.any(keys[1:] != keys[:-1], axis=1)
    group = np.cumsum(new_group) - 1
    value_at_position = np.arange(n, 0, -1, dtype=np.float64)
    group_mean = np.bincount(group, weights=value_at_position) / np.bincount(group)
    rank_value = np.empty(n)
    rank_value[order] = group_mean[group]
    return rank_value
