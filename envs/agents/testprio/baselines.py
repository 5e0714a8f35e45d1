"""Non-learning orderings of a cycle that every agent is compared with (`BASELINES`, envs.baselines' contract).

Each returns a permutation of the cycle's rows (position 0 runs first). `recent_failures` sees only pre-cycle
information, like the agent; `optimal` reads the outcomes and is the upper bound.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from envs.baselines import Baseline, baseline_table


@dataclass(frozen=True)
class Cycle:
    """What a baseline may read of one CI cycle's tests (rows in the cycle's order)."""

    history: np.ndarray             # (n, window) verdicts of the previous runs, most recent first (1 failed)
    failure_rate: np.ndarray        # (n,) failures / runs before this cycle
    duration_estimates: np.ndarray  # (n,) estimated from earlier runs
    verdicts: np.ndarray            # (n,) this cycle's outcomes: only the upper bound may read them
    durations: np.ndarray           # (n,) this cycle's durations: likewise

    @property
    def size(self) -> int:
        return len(self.verdicts)


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


# The family's signature: a cycle and the scorer's random generator -> an order. Called in this order for every
# cycle, so the generator's draws (and the published tables) do not depend on how many baselines read it.
Ordering = Callable[[Cycle, np.random.Generator], np.ndarray]
BASELINES: tuple[Baseline[Ordering], ...] = baseline_table(
    Baseline("recent_failures", lambda cycle, rng: recent_failures_order(cycle.history, cycle.failure_rate,
                                                                         cycle.duration_estimates),
             "the heuristic CI teams use: recent failures first (the one to beat)"),
    Baseline("random", lambda cycle, rng: random_order(cycle.size, rng), "the floor any ordering should beat"),
    Baseline("optimal", lambda cycle, rng: optimal_order(cycle.verdicts, cycle.durations),
             "reads the outcomes: the upper bound"),
)
