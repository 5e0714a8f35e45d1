"""A learned non-RL baseline: gradient-boosted trees with LightGBM's lambdarank objective.

Learning to rank (pointwise features in, a per-cycle ranking loss) is the strongest published non-RL
family for test prioritization, so an RL agent's result means little until it beats this on the same
features and the same held-out cycles. The ranker reads exactly what the agent reads (`FeatureSet.matrix`,
pre-cycle information only); the cycle's verdicts and actual durations enter only as training labels.

LightGBM is pinned exactly (pyproject.toml): its tree growth, and so every published number of this
baseline, depends on the version; with `deterministic=True` and a fixed thread count, a seed gives the
same model on every run.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

import lightgbm
import numpy as np

from envs.agents.testprio.data import CIHistory
from envs.errors import InputError

# Modest and fixed. Tried lightly on iofrol's validation cycles only (never test cycles): fewer or more trees,
# fewer leaves, a deeper lambdarank truncation or a larger gain for failing tests moved APFD and NRPA by less than
# the split's noise or traded NRPA for APFD, so these stay. Scores do not depend on the thread count.
RANKER_PARAMS = MappingProxyType({
    "objective": "lambdarank",
    "n_estimators": 200,
    "num_leaves": 31,
    "learning_rate": 0.05,
    "min_child_samples": 20,
    "deterministic": True,
    "force_row_wise": True,
    "num_threads": 1,
    "verbose": -1,
})


def relevance_labels(verdicts: np.ndarray, durations: np.ndarray, grades: int = 4) -> np.ndarray:
    """Graded relevance of one cycle's tests: `grades` for a failing test, 0..grades-1 for a passing one.

    Passing tests are graded by shortness within the cycle: the shortest gets grades-1, the longest 0,
    equal durations the same grade, in between by the share of passing tests that are strictly shorter.
    NDCG's ideal order is then failing tests first, then shorter ones, which is the optimal order that
    APFD and NRPA score (`baselines.optimal_order`), so lambdarank optimizes toward what is measured.
    """
    if grades < 1:
        raise ValueError(f"grades must be at least 1, got {grades}")
    failed = np.asarray(verdicts, dtype=bool)
    durations = np.asarray(durations, dtype=np.float64)
    labels = np.full(failed.size, grades, dtype=np.int64)
    passing = durations[~failed]
    if passing.size:
        sorted_passing = np.sort(passing)
        shorter = np.searchsorted(sorted_passing, passing, side="left")
        longest_rank = np.searchsorted(sorted_passing, sorted_passing[-1], side="left")
        share = shorter / longest_rank if longest_rank > 0 else np.zeros(passing.size)
        labels[~failed] = (grades - 1) - np.minimum((share * grades).astype(np.int64), grades - 1)
    return labels


@dataclass(frozen=True)
class LearningToRank:
    """A fitted lambdarank model that orders a cycle's tests from their feature rows.

    Holds the trained Booster, not the scikit-learn wrapper: LGBMRanker.predict on a numpy array warns on
    every call under scikit-learn 1.6+ (LightGBM issue #6798), once per scored cycle.
    """

    booster: lightgbm.Booster

    @classmethod
    def fit(cls, features: np.ndarray, history: CIHistory, cycles: np.ndarray, seed: int = 0) -> LearningToRank:
        """Train on the rows of `cycles` (one query per cycle with two or more tests; one test has no order)."""
        spans = [history.rows(int(c)) for c in cycles]
        spans = [s for s in spans if s.stop - s.start >= 2]
        if not spans:
            raise InputError(
                f"{history.source}: none of the {len(cycles)} training cycles has two or more tests, so there "
                f"is no order to learn; use more cycles (max_cycles) or a larger train_fraction"
            )
        rows = np.concatenate([np.arange(s.start, s.stop) for s in spans])
        labels = np.concatenate([relevance_labels(history.verdicts[s], history.durations[s]) for s in spans])
        model = lightgbm.LGBMRanker(**RANKER_PARAMS, seed=seed)
        model.fit(features[rows], labels, group=[s.stop - s.start for s in spans])
        return cls(booster=model.booster_)

    def order(self, features: np.ndarray, tiebreak: np.ndarray) -> np.ndarray:
        """A permutation of the cycle's rows: highest score first, equal scores in tie-break order."""
        scores = self.booster.predict(features, num_threads=RANKER_PARAMS["num_threads"])
        return tiebreak[np.argsort(-scores[tiebreak], kind="stable")]
