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


def reference_apfdc(verdicts, durations):
    """Elbaum, Malishevsky & Rothermel (ICSE 2001), eq. 2, transcribed term by term with every fault's severity 1
    and one fault per failing test: sum_i (sum_{j=TF_i}^{n} t_j - t_{TF_i} / 2) / (sum_j t_j * m)."""
    n = len(verdicts)
    t = [float(d) for d in durations]
    faults = [position for position in range(1, n + 1) if verdicts[position - 1]]
    numerator = sum(sum(t[j - 1] for j in range(tf, n + 1)) - 0.5 * t[tf - 1] for tf in faults)
    return numerator / (sum(t) * len(faults))


@pytest.mark.parametrize(
    ("verdicts", "durations", "expected"),
    [
        # One failure first, taking 1 of 10 s: known for 10 - 0.5 of the cycle's 10 s.
        ([F, P, P], [1.0, 4.0, 5.0], (10 - 0.5) / 10),
        # The same failure last: known only during its own second half.
        ([P, P, F], [4.0, 5.0, 1.0], 0.5 / 10),
        # A long failing test first is worth less than a short one first: (10 - 3) / 10.
        ([F, P], [6.0, 4.0], (10 - 3) / 10),
        # Two failures: (8 - 1) + (3 + 2 - 1.5) over 8 * 2.
        ([F, P, F, P], [2.0, 1.0, 3.0, 2.0], ((8 - 1) + (5 - 1.5)) / 16),
    ],
)
def test_apfdc_hand_cases(verdicts, durations, expected):
    assert metrics.apfdc(np.array(verdicts), np.array(durations)) == pytest.approx(expected)


def test_apfdc_matches_the_papers_formula_and_equals_apfd_with_equal_costs():
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(2, 30))
        verdicts = rng.random(n) < rng.uniform(0.05, 0.6)
        if not verdicts.any():
            verdicts[rng.integers(n)] = True
        durations = rng.lognormal(0.0, 1.5, n) * (rng.random(n) > 0.1)  # some tests take no time
        assert metrics.apfdc(verdicts, durations) == pytest.approx(reference_apfdc(verdicts, durations), rel=1e-12)
        assert metrics.apfdc(verdicts, np.full(n, 2.5)) == pytest.approx(metrics.apfd(verdicts), rel=1e-12)


def test_time_to_first_failure_hand_cases_and_unit_costs():
    assert metrics.time_to_first_failure(np.array([P, F, F]), np.array([3.0, 1.0, 6.0])) == pytest.approx(0.4)
    assert metrics.time_to_first_failure(np.array([F, P]), np.array([1.0, 9.0])) == pytest.approx(0.1)
    # No measured time at all: every test counts 1, as in APFD.
    assert metrics.time_to_first_failure(np.array([P, P, F, P]), np.zeros(4)) == pytest.approx(0.75)
    assert metrics.apfdc(np.array([P, F]), np.zeros(2)) == pytest.approx(metrics.apfd(np.array([P, F])))


def test_apfdc_and_time_to_first_failure_are_undefined_without_failures_and_refuse_bad_durations():
    assert math.isnan(metrics.apfdc(np.array([P, P]), np.array([1.0, 2.0])))
    assert math.isnan(metrics.time_to_first_failure(np.array([P, P]), np.array([1.0, 2.0])))
    with pytest.raises(ValueError, match="durations"):
        metrics.apfdc(np.array([F, P]), np.array([1.0, -2.0]))
    with pytest.raises(ValueError, match="durations"):
        metrics.apfdc(np.array([F, P]), np.array([1.0]))


def test_shortest_first_beats_longest_first_on_apfdc_when_failures_are_equally_likely():
    """Smith's rule: with one failure equally likely anywhere, running short tests first finds it sooner in time."""
    durations = np.array([1.0, 2.0, 4.0, 8.0])
    ascending = np.mean([metrics.apfdc(np.eye(4, dtype=bool)[k], durations) for k in range(4)])
    descending = np.mean([metrics.apfdc(np.eye(4, dtype=bool)[k][::-1], durations[::-1]) for k in range(4)])
    assert ascending > descending
