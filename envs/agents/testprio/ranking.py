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

Tiers: the policy is a residual over the recent-failures heuristic (baselines.recent_failures_order: the verdict
window newest run first, then the failure rate, then shorter). Tests that tie on some of the heuristic's keys form a
tier, tiers run in the heuristic's order, and the policy orders the tests within each tier only
(`rank_within_tiers`). `env_config.tiers` says which keys a tier ties (`cycle_tiers`): `heuristic`, all of them (the
policy only breaks the heuristic's own ties, which it leaves to row order); `failure_record`, every run of the
verdict window and the failure rate (the policy may override the duration key); `recent_failures`, the failures of
the newest `tier_window` runs (the policy may also move an older failure or a higher failure rate behind a test
without one, which is how an agent falls below the heuristic on failures that recur every 5-20 runs: issue 51).
With `residual_rounds: k` the residual is bounded too: the prior is the heuristic's own order (its ties in row
order, as the heuristic breaks them), and the comparator only swaps neighbours of one tier, k rounds of odd-even
transposition (`residual_transpositions`). A comparator that never swaps (a zero residual) therefore ranks exactly
as the heuristic does.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from envs.agents.testprio.baselines import recent_failures_order
from envs.report import Policy

TOURNAMENT_MAX_TESTS = 200
# Outputs per merge segment in the merge sort of larger cycles (see the module docstring).
SEGMENT = 16


def tiebreak_order(n_tests: int, rng: np.random.Generator) -> np.ndarray:
    """The order that settles ties: a permutation drawn from the evaluation's seeded generator."""
    return rng.permutation(n_tests)


def order_cycle(policy: Policy, features: np.ndarray, tiebreak: np.ndarray, *, mode: str, priority_buckets: int,
                tiers: str, window: int, tier_window: int | None = None, durations: np.ndarray | None = None,
                failure_rates: np.ndarray | None = None, residual_rounds: int | None = None) -> np.ndarray:
    """A policy's order of one cycle: a comparator (mode "pairwise") or priority buckets ("pointwise"), over the
    whole cycle (tiers "none") or within the heuristic's tiers (`cycle_tiers`; `window`: the verdict window the
    heuristic reads, the first feature columns). With `residual_rounds` (pairwise, tiers) the prior is the heuristic's
    order of the cycle (which reads the estimated `durations` and the `failure_rates`), and the comparator moves a
    test only by `residual_transpositions` within its tier. The evaluator, the transfer scorer and the served model
    all rank through this."""
    tiers_of = None if tiers == "none" else cycle_tiers(features, tiers, window, tier_window, failure_rates, durations)
    if residual_rounds is not None:
        if mode != "pairwise" or tiers_of is None or durations is None or failure_rates is None:
            raise ValueError("residual_rounds needs a pairwise policy, tiers, duration estimates and failure rates")
        prior = recent_failures_order(features[:, :window], failure_rates, np.asarray(durations))
        return residual_transpositions(policy, features, prior, residual_rounds, groups=tiers_of)
    if mode == "pairwise":
        def rank(members: np.ndarray) -> np.ndarray:
            return rank_pairwise(policy, features, members)
    else:
        def rank(members: np.ndarray) -> np.ndarray:
            return rank_pointwise(policy, features, members, priority_buckets)
    if tiers_of is not None:
        return rank_within_tiers(rank, tiers_of, tiebreak)
    return rank(tiebreak)


def cycle_tiers(features: np.ndarray, tiers: str, window: int, tier_window: int | None = None,
                failure_rates: np.ndarray | None = None, durations: np.ndarray | None = None,
                offsets: np.ndarray | None = None) -> np.ndarray:
    """Each test's tier (`failure_tiers`) under `env_config.tiers`, from the heuristic's keys (`window`: the verdict
    window it reads): "heuristic" ties all of them, the whole verdict window, the failure rate and the estimated
    duration (the policy breaks only the heuristic's own ties); "failure_record" the window and the failure rate;
    "recent_failures" the newest `tier_window` runs (None: the whole window)."""
    if tiers == "recent_failures":
        return failure_tiers(features, min(tier_window or window, window), offsets)
    if failure_rates is None or (tiers == "heuristic" and durations is None):
        raise ValueError(f"tiers {tiers!r} needs the tests' failure rates (and, for 'heuristic', duration estimates)")
    further = [-np.asarray(failure_rates, dtype=np.float64)]  # a higher failure rate first, then shorter
    if tiers == "heuristic":
        further.append(np.asarray(durations, dtype=np.float64))
    elif tiers != "failure_record":
        raise ValueError(f"unknown tiers {tiers!r}")
    return failure_tiers(features, window, offsets, np.column_stack(further))


def rank_pointwise(policy: Policy, features: np.ndarray, tiebreak: np.ndarray, n_actions: int) -> np.ndarray:
    """Order a cycle by the policy's priority bucket (highest first)."""
    buckets = policy_actions(policy, features[tiebreak], n_actions)
    return tiebreak[np.argsort(-buckets, kind="stable")]


def rank_pairwise(policy: Policy, features: np.ndarray, tiebreak: np.ndarray) -> np.ndarray:
    """Order a cycle with the policy as a comparator of two tests."""
    if tiebreak.size <= TOURNAMENT_MAX_TESTS:
        return _round_robin(policy, features, tiebreak)
    return _lockstep_merge_sort(policy, features, tiebreak)


def failure_tiers(features: np.ndarray, window: int, offsets: np.ndarray | None = None,
                  then_by: np.ndarray | None = None) -> np.ndarray:
    """Each test's tier within its cycle, 0 running first: tests whose verdict windows (the first `window` feature
    columns, newest run first, 1 = failed) failed at the same runs share a tier, and tiers are in the recent-failures
    heuristic's order (baselines.recent_failures_order's primary keys: a failure in the last run first, then the run
    before). `then_by` (n, k): further keys, each ascending after the window's, that a tier also ties (the heuristic's
    next keys; pass the whole verdict window then, or the tiers are not contiguous in the heuristic's order).
    `features` is one cycle's rows, or a whole history's with its cycle `offsets` (one sort for all)."""
    failed = np.asarray(features)[:, :window] == 1
    further = np.zeros((len(failed), 0)) if then_by is None else np.asarray(then_by, dtype=np.float64)
    keys = np.column_stack([failed, further])
    bounds = np.array([0, len(failed)]) if offsets is None else np.asarray(offsets)
    cycle = np.repeat(np.arange(len(bounds) - 1), np.diff(bounds))
    order = np.lexsort([*(further[:, k] for k in range(further.shape[1] - 1, -1, -1)),
                        *(~failed[:, k] for k in range(window - 1, -1, -1)), cycle])
    ordered, cycles = keys[order], cycle[order]
    new_cycle = np.concatenate([[True], cycles[1:] != cycles[:-1]])
    new_tier = new_cycle | np.concatenate([[True], np.any(ordered[1:] != ordered[:-1], axis=1)])
    tier = np.cumsum(new_tier) - 1
    tiers = np.empty(len(failed), dtype=np.int64)
    tiers[order] = tier - tier[new_cycle][np.cumsum(new_cycle) - 1]  # counted from the cycle's first tier
    return tiers


def rank_within_tiers(rank: Callable[[np.ndarray], np.ndarray], tiers: np.ndarray, tiebreak: np.ndarray) -> np.ndarray:
    """Tiers in order (0 first); within each, `rank(members)` orders the tier's tests, given in the tie-break order
    (a rank_pairwise or rank_pointwise of the policy)."""
    tier_of = tiers[tiebreak]
    parts = []
    for tier in np.unique(tier_of):
        members = tiebreak[tier_of == tier]
        parts.append(members if members.size < 2 else rank(members))
    return np.concatenate(parts)


def residual_transpositions(policy: Policy, features: np.ndarray, prior: np.ndarray, rounds: int,
                            groups: np.ndarray | None = None) -> np.ndarray:
    """The prior order after `rounds` rounds of odd-even transposition: in each round every adjacent pair (first at
    even positions, then at odd ones) swaps when the comparator, asked in both presentations, runs the later test
    first; a split vote keeps the prior. A test moves at most 2 x `rounds` positions, so the policy learns where to
    deviate from the prior, not a whole order (with a consistent comparator, n rounds would sort a tier of n).

    `groups` (per test, e.g. its tier; each group contiguous in `prior`): only neighbours of one group are compared,
    and a position's parity counts from its group's first position, so this is each group's own transposition
    sort, all groups asked in the same two policy calls per round (a cycle's tiers cost 2 x `rounds` calls at most).

    A pair is asked once: the policy is deterministic, so its vote is kept (both orientations) and later rounds ask
    only the neighbours that moved; a round without a swap ends the sort, as every later round would repeat it."""
    order = np.array(prior, dtype=np.int64)
    if order.size < 2:
        return order
    group = np.zeros(order.size, dtype=np.int64) if groups is None else np.asarray(groups)[order]
    starts = np.flatnonzero(np.concatenate([[True], group[1:] != group[:-1]]))
    offset = np.arange(order.size) - np.repeat(starts, np.diff(np.append(starts, order.size)))
    same_group = np.append(group[1:] == group[:-1], False)
    known = np.zeros((len(features), len(features)), dtype=np.int8)  # vote + 2 (1, 2, 3), 0 = not asked yet
    for _ in range(rounds):
        swapped = False
        for parity in (0, 1):
            firsts = np.flatnonzero(same_group & (offset % 2 == parity))
            left, right = order[firsts], order[firsts + 1]
            new = known[left, right] == 0
            if new.any():
                vote = _prefers_left(policy, features, left[new], right[new])
                known[left[new], right[new]] = vote + 2
                known[right[new], left[new]] = 2 - vote
            swap = firsts[known[left, right] < 2]
            order[swap], order[swap + 1] = order[swap + 1], order[swap].copy()
            swapped = swapped or swap.size > 0
        if not swapped:
            break
    return order


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
    for k, (a, b) in enumerate(zip(firsts, seconds, strict=False)):
        taken = cuts[k]
        positions = np.minimum(np.arange(len(taken)) * SEGMENT, len(a) + len(b))
        for start, stop in zip(range(len(taken) - 1), range(1, len(taken)), strict=True):
            segment_a.append(a[taken[start] : taken[stop]])
            segment_b.append(b[positions[start] - taken[start] : positions[stop] - taken[stop]])
            owner.append(k)
    merged = _merge_level(policy, features, segment_a, segment_b)
    outputs: list[list[np.ndarray]] = [[] for _ in seconds]  # an odd run out has no partner: the caller keeps it
    for k, segment in zip(owner, merged, strict=True):
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
    for k, (a, b) in enumerate(zip(firsts, seconds, strict=False)):
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
        left = np.array([firsts[k][mid] for (k, _, _, _, _), mid in zip(active, middles, strict=True)])
        right = np.array([seconds[k][p - mid - 1] for (k, _, p, _, _), mid in zip(active, middles, strict=True)])
        first_runs_first = _prefers_left(policy, features, left, right) >= 0
        for search, mid, before in zip(active, middles, first_runs_first, strict=True):
            if before:
                search[3] = mid + 1
            else:
                search[4] = mid
    for k, index, _, lo, _ in searches:
        cuts[k][index] = lo
    for k, (a, b) in enumerate(zip(firsts, seconds, strict=False)):
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
        for k, from_a, test_a, test_b in zip(active, take_a, a, b, strict=True):
            outputs[k].append(test_a if from_a else test_b)
        heads_a[active] += take_a
        heads_b[active] += ~take_a
    return [
        np.concatenate(
            [np.asarray(outputs[k], dtype=np.int64), firsts[k][heads_a[k] :], seconds[k][heads_b[k] :]]
        )
        for k in range(len(seconds))
    ]
