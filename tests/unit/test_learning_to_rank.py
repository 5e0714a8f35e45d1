"""The learning-to-rank baseline: its labels encode the optimal order, it learns, and it is reproducible."""
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from envs.agents.testprio import metrics
from envs.agents.testprio.baselines import optimal_order
from envs.agents.testprio.config import parse_config
from envs.agents.testprio.dataset import PreparedData, prepare
from envs.agents.testprio.learning_to_rank import LearningToRank, relevance_labels
from envs.errors import InputError

IOFROL = Path(__file__).resolve().parents[2] / "data" / "testprio" / "iofrol.csv"


@pytest.fixture(scope="module")
def iofrol() -> PreparedData:
    """The first 120 iofrol cycles: 84 to train on, 24 of the 36 test cycles have failures."""
    return prepare(parse_config({"data_path": str(IOFROL), "features": "extended", "max_cycles": 120}))


@pytest.fixture(scope="module")
def iofrol_ranker(iofrol) -> LearningToRank:
    return LearningToRank.fit(iofrol.features.matrix, iofrol.history, iofrol.train_cycles)


@pytest.fixture(scope="module")
def synthetic() -> PreparedData:
    return prepare(parse_config({}))


def test_failing_tests_get_the_top_grade_and_passing_tests_are_graded_by_shortness():
    verdicts = np.array([False, True, False, False, True, False])
    durations = np.array([5.0, 100.0, 1.0, 3.0, 0.5, 5.0])
    assert relevance_labels(verdicts, durations, grades=4).tolist() == [0, 4, 3, 1, 4, 0]


def test_shorter_passing_tests_never_get_a_lower_grade():
    rng = np.random.default_rng(0)
    for grades in (1, 2, 4, 7):
        for _ in range(50):
            n = int(rng.integers(1, 40))
            verdicts = rng.random(n) < 0.3
            durations = rng.integers(0, 6, n).astype(float)  # many ties
            labels = relevance_labels(verdicts, durations, grades)
            assert labels.dtype.kind == "i"
            assert (labels[verdicts] == grades).all()
            passing_labels, passing_durations = labels[~verdicts], durations[~verdicts]
            assert ((passing_labels >= 0) & (passing_labels < grades)).all()
            shorter = passing_durations[:, None] < passing_durations[None, :]
            assert (passing_labels[:, None] >= passing_labels[None, :])[shorter].all()
            equal = passing_durations[:, None] == passing_durations[None, :]
            assert (passing_labels[:, None] == passing_labels[None, :])[equal].all()
            if passing_durations.size:
                assert passing_labels[passing_durations == passing_durations.min()].max() == grades - 1
                if passing_durations.min() < passing_durations.max():
                    assert passing_labels[passing_durations == passing_durations.max()].max() == 0
            # Label descending, then shorter first, is an optimal order: same verdicts and durations in sequence.
            by_label = np.lexsort((durations, -labels))
            best = optimal_order(verdicts, durations)
            assert np.array_equal(verdicts[by_label], verdicts[best])
            assert np.array_equal(durations[by_label], durations[best])


def test_equal_durations_give_equal_passing_grades():
    labels = relevance_labels(np.array([False, False, True, False]), np.full(4, 7.0))
    assert labels.tolist() == [3, 3, 4, 3]


def test_ranker_beats_random_on_held_out_cycles(iofrol, iofrol_ranker):
    """Measured: the ranker's mean APFD is 0.628, random orders' 0.49-0.51 (24 test cycles with failures)."""
    history, matrix = iofrol.history, iofrol.features.matrix
    rng = np.random.default_rng(0)
    ranked, shuffled = [], []
    for cycle in iofrol.test_cycles:
        span = history.rows(cycle)
        verdicts = history.verdicts[span]
        if verdicts.size < 2 or not verdicts.any():
            continue
        ranked.append(metrics.apfd(verdicts[iofrol_ranker.order(matrix[span], rng.permutation(verdicts.size))]))
        shuffled.append(np.mean([metrics.apfd(verdicts[rng.permutation(verdicts.size)]) for _ in range(20)]))
    assert len(ranked) >= 20
    assert np.mean(ranked) > np.mean(shuffled) + 0.06


def test_same_seed_gives_identical_orders(synthetic):
    history, matrix = synthetic.history, synthetic.features.matrix
    first, second = (LearningToRank.fit(matrix, history, synthetic.train_cycles, seed=3) for _ in range(2))
    rng = np.random.default_rng(0)
    for cycle in synthetic.test_cycles:
        span = history.rows(cycle)
        tiebreak = rng.permutation(span.stop - span.start)
        assert np.array_equal(first.order(matrix[span], tiebreak), second.order(matrix[span], tiebreak))


def test_no_cycle_with_two_tests_is_refused(iofrol):
    history = iofrol.history
    single = np.flatnonzero(history.cycle_sizes[iofrol.train_cycles] == 1)
    assert single.size
    for cycles in (single, np.zeros(0, dtype=np.int64)):
        with pytest.raises(InputError, match="two or more tests") as caught:
            LearningToRank.fit(iofrol.features.matrix, history, cycles)
        assert "\n" not in str(caught.value)


def test_order_is_a_permutation(iofrol, iofrol_ranker):
    history, matrix = iofrol.history, iofrol.features.matrix
    rng = np.random.default_rng(1)
    for cycle in iofrol.test_cycles:
        span = history.rows(cycle)
        n = span.stop - span.start
        order = iofrol_ranker.order(matrix[span], rng.permutation(n))
        assert np.array_equal(np.sort(order), np.arange(n))


def test_constant_labels_train_a_ranker_that_follows_the_tiebreak(synthetic):
    """Every label equal (no failure, one duration): LightGBM copes, scores tie and the tie-break decides."""
    history = replace(synthetic.history, verdicts=np.zeros_like(synthetic.history.verdicts),
                      durations=np.ones_like(synthetic.history.durations))
    matrix = synthetic.features.matrix
    ranker = LearningToRank.fit(matrix, history, synthetic.train_cycles[:30])
    rng = np.random.default_rng(2)
    for cycle in synthetic.test_cycles[:5]:
        span = history.rows(cycle)
        tiebreak = rng.permutation(span.stop - span.start)
        assert np.array_equal(ranker.order(matrix[span], tiebreak), tiebreak)
