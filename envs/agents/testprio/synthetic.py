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
    results: list[list[int]] = [[] for _ in range(n_tests)]
    last_run: list[np.datetime64 | None] = [None] * n_tests
    rows: list[tuple] = []
    for cycle in range(n_cycles):
        broken &= rng.random(n_modules) >= _FIX_PROBABILITY
        if rng.random() < _BREAK_PROBABILITY:
            broken[rng.integers(n_modules)] = True
        runs = np.flatnonzero((first_cycle <= cycle) & (rng.random(n_tests) < run_probability))
        if runs.size == 0:
            runs = rng.integers(n_tests, size=1)
        fail_probability = np.where(broken[module], np.maximum(base_failure, _FAIL_WHEN_BROKEN), base_failure)
        for test in runs:
            verdict = int(rng.random() < fail_probability[test])
            duration = int(round(typical_duration[test] * rng.lognormal(0.0, 0.1)))
            previous = last_run[test] if last_run[test] is not None else cycle_times[cycle]
            rows.append((test, duration, str(previous).replace("T", " "), _format_results(results[test]),
                         verdict, cycle + 1))
            results[test].insert(0, verdict)
            del results[test][_MAX_STORED_RESULTS:]
            last_run[test] = cycle_times[cycle]
    frame = pd.DataFrame(rows, columns=["Name", "Duration", "LastRun", "LastResults", "Verdict", "Cycle"])
    frame.insert(0, "Id", np.arange(1, len(frame) + 1))
    frame.insert(3, "CalcPrio", 0)
    return frame[list(RETECS_HEADER)]


def generate_history(n_cycles: int = 160, n_tests: int = 60, seed: int = DEFAULT_SEED) -> CIHistory:
    """A synthetic `CIHistory`, normalized exactly like a loaded RETECS file."""
    return parse_retecs(generate_frame(n_cycles, n_tests, seed),
                        source=f"synthetic(n_cycles={n_cycles}, n_tests={n_tests}, seed={seed})")


def _format_results(results: list[int]) -> str:
    return "[" + ", ".join(str(v) for v in results) + "]"
