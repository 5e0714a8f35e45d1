"""APFD, NAPFD, NRPA and the baseline orders against small hand-computed cases."""

import math

import numpy as np
import pytest

from envs.agents.testprio import baselines, metrics

F, P = True, False


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        ([F, P, P], 1 - 1 / 3 + 1 / 6),  # 0.8333
        ([P, P, F], 1 - 3 / 3 + 1 / 6),  # 0.1667
        ([P, F, P, F], 1 - (2 + 4) / 8 + 1 / 8),  # 0.375
        ([F, F, P, P], 1 - (1 + 2) / 8 + 1 / 8),  # 0.75, the best order for m = 2
        ([F], 0.5),  # single test: the formula's only value
    ],
)
def test_apfd_hand_cases(verdicts, expected):
    assert metrics.apfd(np.array(verdicts)) == pytest.approx(expected)


def test_apfd_and_napfd_are_undefined_without_failures():
    assert math.isnan(metrics.apfd(np.array([P, P, P])))
    assert math.isnan(metrics.napfd(np.array([P, P]), np.array([1.0, 2.0]), 0.5))


def test_napfd_without_a_cut_equals_apfd():
    verdicts, durations = np.array([P, F, P, F]), np.array([3.0, 1.0, 2.0, 5.0])
    assert metrics.napfd(verdicts, durations, 1.0) == pytest.approx(metrics.apfd(verdicts))


def test_napfd_half_budget_hand_case():
    # Budget 2 of 4: tests 1-2 run, one of two failures found at position 2.
    # p = 0.5; NAPFD = 0.5 - 2 / (4 * 2) + 0.5 / (2 * 4) = 0.3125
    value = metrics.napfd(np.array([P, F, P, F]), np.ones(4), 0.5)
    assert value == pytest.approx(0.3125)


def test_napfd_skips_a_test_that_does_not_fit_and_keeps_going():
    # Budget 0.5 * 8 = 4: the first test (3) runs, the long failing one (4) is skipped,
    # the last failing one (1) still fits and runs as the 2nd test that ran.
    verdicts, durations = np.array([P, F, F]), np.array([3.0, 4.0, 1.0])
    assert metrics.scheduled(durations, 0.5).tolist() == [True, False, True]
    p = 0.5
    assert metrics.napfd(verdicts, durations, 0.5) == pytest.approx(p - 2 / (3 * 2) + p / (2 * 3))


def test_napfd_is_zero_when_no_failure_runs():
    assert metrics.napfd(np.array([P, F]), np.array([1.0, 5.0]), 0.2) == 0.0


def test_nrpa_hand_cases():
    # All passing, durations 1, 2, 3: R = 3, 2, 1; the reversed order scores
    # (3*1 + 2*2 + 1*3) / (3*3 + 2*2 + 1*1) = 10 / 14.
    assert metrics.nrpa(np.array([P, P, P]), np.array([3.0, 2.0, 1.0])) == pytest.approx(10 / 14)
    # One failure, two tied passing tests: R = 3 (failure), 1.5, 1.5.
    # Order P, F, P: (3*1.5 + 2*3 + 1*1.5) / (3*3 + 2*1.5 + 1*1.5) = 12 / 13.5.
    assert metrics.nrpa(np.array([P, F, P]), np.ones(3)) == pytest.approx(12 / 13.5)


def test_nrpa_of_any_optimal_order_is_exactly_one():
    verdicts = np.array([P, F, P, P, F, P])
    durations = np.array([2.0, 1.0, 2.0, 3.0, 1.0, 1.0])
    order = baselines.optimal_order(verdicts, durations)
    assert metrics.nrpa(verdicts[order], durations[order]) == 1.0
    swapped_ties = order.copy()
    swapped_ties[[0, 1]] = swapped_ties[[1, 0]]  # the two failures of duration 1 tie
    assert metrics.nrpa(verdicts[swapped_ties], durations[swapped_ties]) == 1.0
    assert metrics.nrpa(np.array([F]), np.array([4.0])) == 1.0


def test_optimal_order_puts_failures_first_then_shorter_tests():
    verdicts = np.array([P, F, P, F])
    durations = np.array([1.0, 9.0, 0.5, 2.0])
    assert baselines.optimal_order(verdicts, durations).tolist() == [3, 1, 2, 0]


def test_recent_failures_order_hand_case():
    history = np.array(
        [
            [0, 1, 0],  # failed two runs ago
            [1, 0, 0],  # failed last run
            [0, 0, 0],  # never failed
            [1, 1, 0],  # failed in the last two runs
            [0, 1, 0],  # like row 0, higher failure rate
            [0, 1, -1],  # like row 0, same rate, shorter
        ]
    )
    failure_rate = np.array([0.2, 0.1, 0.0, 0.5, 0.4, 0.2])
    durations = np.array([5.0, 1.0, 1.0, 1.0, 5.0, 4.0])
    order = baselines.recent_failures_order(history, failure_rate, durations)
    assert order.tolist() == [3, 1, 4, 5, 0, 2]


def test_random_order_is_a_seeded_permutation():
    first = baselines.random_order(10, np.random.default_rng(3))
    again = baselines.random_order(10, np.random.default_rng(3))
    assert sorted(first.tolist()) == list(range(10))
    assert first.tolist() == again.tolist()
