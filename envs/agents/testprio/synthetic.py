"""A small seeded generator of CI histories, so tests and the default config need no data.

The model has the structure that makes prioritization learnable, in miniature:
tests belong to modules; a change occasionally breaks a module for a few cycles, and
then most of its tests fail together (correlated, recurring failures: recent failures
predict failures); a few tests are flaky (failures without a cause); durations vary by
test and a little from run to run; tests join the suite over time and do not run in
every cycle. The output is a RETECS table, so it goes through the same loader as real
data and can be written to disk for users to inspect or edit.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from envs.agents.testprio.data import RETECS_HEADER, CIHistory, parse_retecs

DEFAULT_SEED = 7
_START = np.datetime64("2020-01-06T09:00:00", "s")
_MAX_STORED_RESULTS = 30
_FLAKY_SHARE = 0.1
_BREAK_PROBABILITY = 0.25  # per cycle: a change breaks one module
_FAIL_WHEN_BROKEN = 0.55
_FIX_PROBABILITY = 0.4


class _RunRecorder:
    """The RETECS rows of a generated history: each test's run with its duration, its previous run's time and its
    stored results (most recent first), as a CI system would have logged them."""

    def __init__(self, rng: np.random.Generator, typical_duration: np.ndarray, cycle_times: np.ndarray) -> None:
        self.rng, self.typical_duration, self.cycle_times = rng, typical_duration, cycle_times
        self.results: list[list[int]] = [[] for _ in range(len(typical_duration))]
        self.last_run: list[np.datetime64 | None] = [None] * len(typical_duration)
        self.rows: list[tuple] = []

    def record(self, test: int, verdict: int, cycle: int) -> None:
        duration = int(round(self.typical_duration[test] * self.rng.lognormal(0.0, 0.1)))
        previous = self.last_run[test] if self.last_run[test] is not None else self.cycle_times[cycle]
        self.rows.append((test, duration, str(previous).replace("T", " "), _format_results(self.results[test]),
                          verdict, cycle + 1))
        self.results[test].insert(0, verdict)
        del self.results[test][_MAX_STORED_RESULTS:]
        self.last_run[test] = self.cycle_times[cycle]

    def frame(self) -> pd.DataFrame:
        frame = pd.DataFrame(self.rows, columns=["Name", "Duration", "LastRun", "LastResults", "Verdict", "Cycle"])
        frame.insert(0, "Id", np.arange(1, len(frame) + 1))
        frame.insert(3, "CalcPrio", 0)
        return frame[list(RETECS_HEADER)]


def generate_frame(n_cycles: int = 160, n_tests: int = 60, seed: int = DEFAULT_SEED) -> pd.DataFrame:
    """A synthetic CI history as a RETECS table (`Verdict` 1 = failed, `LastResults` most recent first)."""
    rng = np.random.default_rng(seed)
    n_modules = max(2, n_tests // 6)
    module = rng.integers(n_modules, size=n_tests)
    flaky = rng.random(n_tests) < _FLAKY_SHARE
    base_failure = np.where(flaky, rng.uniform(0.05, 0.2, n_tests), rng.beta(0.3, 60.0, n_tests))
    typical_duration = rng.lognormal(np.log(60.0), 1.0, n_tests)
    first_cycle = np.where(rng.random(n_tests) < 0.7, 0, rng.integers(0, max(1, n_cycles // 2), n_tests))
    run_probability = rng.uniform(0.6, 1.0, n_tests)
    cycle_times = _START + np.cumsum(rng.uniform(0.3, 2.0, n_cycles) * 86400).astype("timedelta64[s]")

    broken = np.zeros(n_modules, dtype=bool)
    recorder = _RunRecorder(rng, typical_duration, cycle_times)
    for cycle in range(n_cycles):
        broken &= rng.random(n_modules) >= _FIX_PROBABILITY
        if rng.random() < _BREAK_PROBABILITY:
            broken[rng.integers(n_modules)] = True
        runs = np.flatnonzero((first_cycle <= cycle) & (rng.random(n_tests) < run_probability))
        if runs.size == 0:
            runs = rng.integers(n_tests, size=1)
        fail_probability = np.where(broken[module], np.maximum(base_failure, _FAIL_WHEN_BROKEN), base_failure)
        for test in runs:
            recorder.record(test, int(rng.random() < fail_probability[test]), cycle)
    return recorder.frame()


def generate_history(n_cycles: int = 160, n_tests: int = 60, seed: int = DEFAULT_SEED) -> CIHistory:
    """A synthetic `CIHistory`, normalized exactly like a loaded RETECS file."""
    return parse_retecs(generate_frame(n_cycles, n_tests, seed),
                        source=f"synthetic(n_cycles={n_cycles}, n_tests={n_tests}, seed={seed})")


# Recurring failures (generate_recurring_frame): a test that fails every 5-20 of its runs.
RECURRENCE_RUNS = (5, 20)
_RECURRING_SHARE = 0.2
_FAIL_WHEN_DUE = 0.7
_SPORADIC_FAILURE = 0.003


def generate_recurring_frame(n_cycles: int = 200, n_tests: int = 80, seed: int = DEFAULT_SEED) -> pd.DataFrame:
    """A synthetic CI history whose failures recur at 5-20 runs, as a RETECS table: a fifth of the tests each have
    a period p (uniform over RECURRENCE_RUNS) and, from p runs after their last failure on, fail with probability
    0.7 per run; every test also fails sporadically (0.3%). A test that last failed 5-20 runs ago is then the likeliest
    to fail next: the case where ordering it by duration with the tests that never fail (a tier of only the newest
    runs) finds failures later than the recent-failures heuristic (issue 51). Durations are independent of failures;
    tests run in 80-100% of the cycles."""
    rng = np.random.default_rng(seed)
    recurring = rng.random(n_tests) < _RECURRING_SHARE
    period = rng.integers(RECURRENCE_RUNS[0], RECURRENCE_RUNS[1] + 1, size=n_tests)
    since_failure = rng.integers(0, period + 1)  # each recurring test starts somewhere in its cycle
    typical_duration = rng.lognormal(np.log(60.0), 1.0, n_tests)
    run_probability = rng.uniform(0.8, 1.0, n_tests)
    cycle_times = _START + np.cumsum(rng.uniform(0.3, 2.0, n_cycles) * 86400).astype("timedelta64[s]")
    recorder = _RunRecorder(rng, typical_duration, cycle_times)
    for cycle in range(n_cycles):
        runs = np.flatnonzero(rng.random(n_tests) < run_probability)
        if runs.size == 0:
            runs = rng.integers(n_tests, size=1)
        for test in runs:
            due = recurring[test] and since_failure[test] + 1 >= period[test]
            verdict = int(rng.random() < (_FAIL_WHEN_DUE if due else _SPORADIC_FAILURE))
            since_failure[test] = 0 if verdict else since_failure[test] + 1
            recorder.record(test, verdict, cycle)
    return recorder.frame()


def _format_results(results: list[int]) -> str:
    return "[" + ", ".join(str(v) for v in results) + "]"
