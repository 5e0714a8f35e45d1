"""Non-learning orderings of a cycle that every agent is compared with.

Each function returns a permutation of the cycle's rows (position 0 runs first).
`recent_failures` sees only pre-cycle information, like the agent; `optimal` reads the
outcomes and is the upper bound.
"""
from __future__ import annotations

import numpy as np


def random_order(n_tests: int, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random order (the floor any prioritization should beat)."""
    return rng.permutation(n_tests)


def recent_failures_order(
    history: np.ndarray, failure_rate: np.ndarray, duration_estimates: np.ndarray
) -> np.ndarray:
    """Most recent failures first, then higher failure rate, then shorter estimated duration.

    `history` is the (n, window) verdict window, most recent first (1 failed). "Most recent
    failures first" compares the windows lexicographically: a failure in the last run beats
    any older failure, and among tests that failed last time, failing the run before too
    ranks higher. Remaining ties keep the cycle's row order.
    """
    failed_runs = (history == 1).astype(np.int8)
    # np.lexsort sorts by the last key first: the most recent run, then older runs, then the rest.
    older_to_newer = [-failed_runs[:, k] for k in range(failed_runs.shape[1] - 1, -1, -1)]
    return np.lexsort([duration_estimates, -failure_rate, *older_to_newer])


def optimal_order(verdicts: np.ndarray, durations: np.ndarray) -> np.ndarray:
    """Failing tests first, shortest first within each verdict (uses the outcomes)."""
    return np.lexsort((durations, ~np.asarray(verdicts, dtype=bool)))
