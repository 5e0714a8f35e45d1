"""Turn a trained greedy policy into a full order of a CI cycle.

Ties are broken by one deterministic rule shared by both modes: a seeded random
permutation of the cycle (the tie-break order). It is never the row order, which in real
data can correlate with verdicts, and it adds no heuristic of its own (such as shorter
tests first), so a policy that says nothing scores like the random baseline.

Pointwise: one batched policy call scores every test with a priority bucket; higher
buckets run first, equal buckets follow the tie-break order.

Pairwise: the policy is a comparator on the concatenated features of two tests (action
0 = the left test runs first). Each pair is shown in both orders, so a policy with a
position bias cannot win by it: i precedes j when both presentations agree, and a split
vote is a tie. Cycles of up to `TOURNAMENT_MAX_TESTS` tests play a full round robin in one
batched call and sort by the number of won comparisons (a split counts half; equal scores
follow the tie-break order); larger cycles are merge-sorted from the tie-break order, a split
vote keeping the earlier run's test first. A level's merges are cut into segments of at most
`SEGMENT` outputs by the merge path (each cut found by a binary search over comparisons, all
searches of the level in lockstep), and all segments are then merged in lockstep: a level
takes about log2(run) + SEGMENT policy calls instead of twice the run's length, which is what
keeps a cycle of a thousand tests within tens of milliseconds. With a consistent comparator
this is exactly the sequential merge; with an inconsistent one the cuts are clipped so that
the result is still a permutation.
"""
from __future__ import annotations

import numpy as np

from envs.report import Policy

TOURNAMENT_MAX_TESTS = 200
# Outputs per merge segment in the merge sort of larger cycles (see the module docstring).
SEGMENT = 16


def tiebreak_order(n_tests: int, rng: np.random.Generator) -> np.ndarray:
    """The order that settles ties: a permutation drawn from the evaluation's seeded generator."""
    return rng.permutation(n_tests)


def rank_pointwise(policy: Policy, features: np.ndarray, tiebreak: np.ndarray, n_actions: int) -> np.ndarray:
    """Order a cycle by the policy's priority bucket (highest first)."""
    buckets = policy_actions(policy, features[tiebreak], n_actions)
    return tiebreak[np.argsort(-buckets, kind="stable")]


def rank_pairwise(policy: Policy, features: np.ndarray, tiebreak: np.ndarray) -> np.ndarray:
    """Order a cycle with the policy as a comparator of two tests."""
    if tiebreak.size <= TOURNAMENT_MAX_TESTS:
        return _round_robin(policy, features, tiebreak)
    return _lockstep_merge_sort(policy, features, tiebreak)


def pair_observations(features: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """The pairwise observation: left test's features, then right test's."""
    return np.concatenate([features[left], features[right]], axis=1)


def policy_actions(policy: Policy, observations: np.ndarray, n_actions: int) -> np.ndarray:
    """Call the policy on a batch and check it returned one valid action per row."""
    actions = np.asarray(policy(np.ascontiguousarray(observations, dtype=np.float32)))
    if actions.shape != (len(observations),):
        raise ValueError(
            f"policy returned actions of shape {actions.shape} for {len(observations)} observations; "
            f"expected ({len(observations)},)"
        )
    actions = actions.astype(np.int64)
    if actions.size and (actions.min() < 0 or actions.max() >= n_actions):
        raise ValueError(f"policy returned actions outside 0..{n_actions - 1}")
    return actions


def _prefers_left(policy: Policy, features: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """+1 if both presentations put `left` first, -1 if both put `right` first, 0 if split."""
    observations = np.concatenate(
        [pair_observations(features, left, right), pair_observations(features, right, left)]
    )
    left_first = policy_actions(policy, observations, 2) == 0
    k = left.size
    return left_first[:k].astype(np.int64) - left_first[k:].astype(np.int64)


def _round_robin(policy: Policy, features: np.ndarray, tiebreak: np.ndarray) -> np.ndarray:
    n = tiebreak.size
    left, right = np.triu_indices(n, k=1)
    vote = _prefers_left(policy, features, tiebreak[left], tiebreak[right])
    wins = np.zeros(n)
    np.add.at(wins, left, (vote + 1) / 2)
    np.add.at(wins, right, (1 - vote) / 2)
    return tiebreak[np.argsort(-wins, kind="stable")]


def _lockstep_merge_sort(policy: Policy, features: np.ndarray, tiebreak: np.ndarray) -> np.ndarray:
    runs = [tiebreak[k : k + 1] for k in range(tiebreak.size)]
    while len(runs) > 1:
        merged = _merge_by_segments(policy, features, runs[0::2], runs[1::2])
        runs = merged + ([runs[-1]] if len(runs) % 2 else [])
    return runs[0]


def _merge_by_segments(
    policy: Policy, features: np.ndarray, firsts: list[np.ndarray], seconds: list[np.ndarray]
) -> list[np.ndarray]:
    """Merge firsts[k] with seconds[k] for every k, each merge cut into segments of <= SEGMENT outputs."""
    cuts = _merge_path_cuts(policy, features, firsts, seconds)
    segment_a, segment_b, owner = [], [], []
    for k, (a, b) in enumerate(zip(firsts, seconds)):
        taken = cuts[k]
        positions = np.minimum(np.arange(len(taken)) * SEGMENT, len(a) + len(b))
        for start, stop in zip(range(len(taken) - 1), range(1, len(taken))):
            segment_a.append(a[taken[start] : taken[stop]])
            segment_b.append(b[positions[start] - taken[start] : positions[stop] - taken[stop]])
            owner.append(k)
    merged = _merge_level(policy, features, segment_a, segment_b)
    outputs: list[list[np.ndarray]] = [[] for _ in seconds]  # an odd run out has no partner: the caller keeps it
    for k, segment in zip(owner, merged):
        outputs[k].append(segment)
    return [np.concatenate(parts) for parts in outputs]


def _merge_path_cuts(
    policy: Policy, features: np.ndarray, firsts: list[np.ndarray], seconds: list[np.ndarray]
) -> list[np.ndarray]:
    """Per merge: how many of firsts[k]'s tests are among its first 0, SEGMENT, 2 SEGMENT, ..., all outputs.

    The count at output p is the smallest i such that firsts[k][i] does not run before seconds[k][p - i - 1]
    (a split vote runs the first's test first, as the sequential merge does); every search of the level advances
    one step per policy call. The counts are then clipped to be a valid cut: non-decreasing, and never taking more
    of either run than p allows (only an inconsistent comparator needs that)."""
    searches = []  # (merge, cut index, output position, lo, hi)
    cuts = []
    for k, (a, b) in enumerate(zip(firsts, seconds)):
        total = len(a) + len(b)
        positions = np.append(np.arange(0, total, SEGMENT), total)
        taken = np.zeros(len(positions), dtype=np.int64)
        taken[-1] = len(a)
        cuts.append(taken)
        for index, p in enumerate(positions[1:-1], start=1):
            searches.append([k, index, int(p), max(0, int(p) - len(b)), min(int(p), len(a))])
    while True:
        active = [search for search in searches if search[3] < search[4]]
        if not active:
            break
        middles = [(lo + hi) // 2 for _, _, _, lo, hi in active]
        left = np.array([firsts[k][mid] for (k, _, _, _, _), mid in zip(active, middles)])
        right = np.array([seconds[k][p - mid - 1] for (k, _, p, _, _), mid in zip(active, middles)])
        first_runs_first = _prefers_left(policy, features, left, right) >= 0
        for search, mid, before in zip(active, middles, first_runs_first):
            if before:
                search[3] = mid + 1
            else:
                search[4] = mid
    for k, index, _, lo, _ in searches:
        cuts[k][index] = lo
    for k, (a, b) in enumerate(zip(firsts, seconds)):
        positions = np.minimum(np.arange(len(cuts[k])) * SEGMENT, len(a) + len(b))
        for index in range(1, len(cuts[k]) - 1):
            low = max(cuts[k][index - 1], positions[index] - len(b))
            high = min(cuts[k][index - 1] + positions[index] - positions[index - 1], len(a))
            cuts[k][index] = min(max(cuts[k][index], low), high)
    return cuts


def _merge_level(
    policy: Policy, features: np.ndarray, firsts: list[np.ndarray], seconds: list[np.ndarray]
) -> list[np.ndarray]:
    """Merge firsts[k] with seconds[k] for every k; a split vote keeps firsts[k]'s test first."""
    heads_a = np.zeros(len(seconds), dtype=np.int64)
    heads_b = np.zeros(len(seconds), dtype=np.int64)
    outputs: list[list[int]] = [[] for _ in seconds]
    sizes_a = np.array([len(firsts[k]) for k in range(len(seconds))])
    sizes_b = np.array([len(run) for run in seconds])
    while True:
        active = np.flatnonzero((heads_a < sizes_a) & (heads_b < sizes_b))
        if active.size == 0:
            break
        a = np.array([firsts[k][heads_a[k]] for k in active])
        b = np.array([seconds[k][heads_b[k]] for k in active])
        take_a = _prefers_left(policy, features, a, b) >= 0
        for k, from_a, test_a, test_b in zip(active, take_a, a, b):
            outputs[k].append(test_a if from_a else test_b)
        heads_a[active] += take_a
        heads_b[active] += ~take_a
    return [
        np.concatenate(
            [np.asarray(outputs[k], dtype=np.int64), firsts[k][heads_a[k] :], seconds[k][heads_b[k] :]]
        )
        for k in range(len(seconds))
    ]
