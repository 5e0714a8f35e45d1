"""Gymnasium environments for learning to prioritize CI test cases.

Both environments sample CI cycles of one split (by default the training split: the
earliest `train_fraction` of the cycles) uniformly at random, seeded through
`reset(seed=...)` (or `env_config.seed` when reset is never given a seed). Cycles with a
single test are skipped: there is nothing to order. Actions never change what comes next,
so each step is a contextual bandit; a discount of 0 (or small) suits DQN here.

Pointwise (`agents/TestPrioritization-v0`): an episode walks every test of
`cycles_per_episode` cycles in a random order; each step shows one test's features and
the action is a priority bucket a in 0..k-1 (k = `priority_buckets`, higher runs first).
Reward: 1 - (a / (k - 1) - y)^2 with y = 1 if the test fails in this cycle, else 0. This
is a Brier score, so the bucket that maximizes the expected reward is the one closest to
the test's failure probability given its features: sorting by bucket sorts by estimated
risk, and a confident, correct bucket earns 1. Other targets y (env_config.reward):
`duration_weight` w blends in shortness, y = (1 - w) failed + w (1 - duration percentile
in the cycle); `optimal_rank` uses the test's rank value in its cycle's optimal order
scaled to [0, 1] (1 = runs first), so the buckets estimate E[rank value] and sorting by
them maximizes the expected NRPA (its weights decrease along the order). With
`terminal_score` ("apfd" / "nrpa", for model selection) the steps earn 0 and the last
step of each cycle earns that cycle's score of the order the buckets give (ties in the
random presentation order), the same score the evaluator reports.

Pairwise (`agents/TestPrioritizationPairwise-v0`): an episode makes `pairs_per_cycle`
comparisons in each of `cycles_per_episode` cycles; a step shows the features of two
tests of the same cycle side by side and action 0 means "the left test runs first", 1
"the right one". Reward +1 when the choice agrees with the optimal order (failing before
passing; within the same verdict, the shorter actual duration first), -1 when it does not,
0 when the two tests tie in that order (same verdict and duration). When a cycle has both
verdicts, a share `mixed_pair_fraction` of its pairs is drawn as (failing, passing) pairs
in random sides, so rare failures are not drowned out by passing-passing pairs.

Observations are float32 feature vectors within [-5, 5] (see
`envs.agents.testprio.features`); all arrays are precomputed at construction and a step
does O(1) work with no pandas.
"""
from __future__ import annotations

from typing import Any, Mapping

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs.agents.testprio import metrics
from envs.agents.testprio.config import PrioritizationConfig, parse_config
from envs.agents.testprio.dataset import PreparedData, prepare
from envs.agents.testprio.features import CLIP
from envs.agents.testprio.ranking import cycle_tiers, pair_observations
from envs.errors import InputError


class _PrioritizationEnv(gym.Env[np.ndarray, np.int64]):
    """Config, data and cycle sampling shared by the pointwise and pairwise environments."""

    metadata: dict[str, Any] = {"render_modes": []}
    MODE: str

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        given = {**dict(config or {}), **kwargs}
        given.setdefault("mode", self.MODE)
        self.config: PrioritizationConfig = parse_config(given)
        if self.config.mode != self.MODE:
            raise InputError(
                f"env_config.mode: {self.config.mode!r} does not match this {self.MODE} environment; "
                f"drop the key or set it to {self.MODE!r}"
            )
        self.data: PreparedData = prepare(self.config)
        history = self.data.history
        cycles = self.data.cycles(self.config.split)
        self._cycles = cycles[history.cycle_sizes[cycles] >= 2]
        if self.config.terminal_score == "apfd" and self.MODE == "pointwise":
            failing = np.add.reduceat(history.verdicts.astype(np.int64), history.offsets[:-1])
            self._cycles = self._cycles[failing[self._cycles] > 0]
        if self._cycles.size == 0:
            raise InputError(
                f"{history.source}: the {self.config.split} split has no cycle with two or more tests to "
                f"order{' and a failure (terminal_score: apfd)' if self.config.terminal_score else ''}; use "
                f"more cycles (max_cycles) or a different train_fraction / validation_fraction"
            )
        self._features = self.data.features.matrix
        self._offsets = history.offsets
        self._verdicts = history.verdicts
        self._seeded = False

    def _sample_cycles(self) -> np.ndarray:
        return self.np_random.choice(self._cycles, size=self.config.cycles_per_episode)

    def _seed_once(self, seed: int | None) -> int | None:
        """The first reset without a seed uses env_config.seed, so defaults are reproducible."""
        if seed is None and not self._seeded:
            seed = self.config.seed
        self._seeded = True
        return seed


class PointwiseTestPrioritizationEnv(_PrioritizationEnv):
    """## Description

    Learn to order a CI cycle's tests so that failing ones run first. An episode walks every test of
    `cycles_per_episode` cycles (of the `split`'s cycles, in time order: train, validation, test) in a
    random order; each step shows one test and the agent assigns it a priority bucket. Sorting a cycle by
    bucket is the prioritization the evaluator scores (APFD, NAPFD, NRPA). Actions do not change what comes
    next: each step is a contextual bandit.

    ## Action Space

    `Discrete(priority_buckets)`: bucket a in 0..k-1, higher runs first.

    ## Observation Space

    `Box(-5, 5, (d,), float32)`: one test's features from pre-cycle information only
    (`envs.agents.testprio.features`; d = history_window + 5 + static metrics, + 7 with `features: extended`).

    | Index               | Feature            | Meaning                                               |
    |---------------------|--------------------|-------------------------------------------------------|
    | 0 .. w-1            | history_1..w       | previous verdicts, newest first: 1 failed, 0 passed, -1 no run |
    | w                   | failure_rate       | failed runs / runs so far                              |
    | w+1                 | duration_share     | estimated duration / longest in the cycle              |
    | w+2                 | log_duration       | standardized log1p(estimated duration)                 |
    | w+3                 | log_days_since_run | standardized log1p(time since the last run)            |
    | w+4                 | log_runs           | standardized log1p(earlier runs)                       |
    | w+5 ..              | static metrics     | standardized signed log1p of each code metric (enriched data) |

    ## Rewards

    1 - (a / (k - 1) - y)^2 (a Brier score): y = 1 if the test fails in this cycle, else 0 (`reward:
    verdict`, blended with shortness by `duration_weight`), or its rank value in the cycle's optimal order
    (`reward: optimal_rank`). With `terminal_score` (apfd or nrpa) steps earn 0 and a cycle's last step earns
    that cycle's score of the order the buckets give.

    ## Starting State

    A cycle drawn uniformly from the split (seeded by `reset(seed=...)`, else `seed`), its tests in random
    order; cycles with one test are skipped.

    ## Episode End

    Terminated after the last test of the episode's last cycle. No truncation.

    ## Arguments

    A `config` dict or keyword arguments (`PrioritizationConfig`): `data_path` (RETECS or enriched CSV; none:
    a seeded synthetic history), `history_window`, `split`, `train_fraction`, `validation_fraction`,
    `features`, `max_cycles`, `seed`, `time_budget`, `cycles_per_episode`, `priority_buckets`, `reward`,
    `duration_weight`, `terminal_score`.

    ```python
    gymnasium.make("agents/TestPrioritization-v0", data_path="data/testprio/iofrol.csv", priority_buckets=10)
    ```
    """

    MODE = "pointwise"

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        if self.config.residual_rounds is not None:
            raise InputError("env_config.residual_rounds: the pointwise env has no comparator to swap neighbours "
                             "with; use agents/TestPrioritizationPairwise-v0 or drop the key")
        self._buckets = self.config.priority_buckets
        self.observation_space = spaces.Box(-CLIP, CLIP, shape=(self.data.features.dim,), dtype=np.float32)
        self.action_space = spaces.Discrete(self._buckets)
        self._targets = reward_targets(self.data, self.config.reward, self.config.duration_weight)
        self._rows = np.zeros(0, dtype=np.int64)
        self._chosen = np.zeros(0, dtype=np.int64)
        self._cycle_ends = np.zeros(0, dtype=np.int64)
        self._step = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=self._seed_once(seed))
        rows = [
            self._offsets[c] + self.np_random.permutation(self._offsets[c + 1] - self._offsets[c])
            for c in self._sample_cycles()
        ]
        self._rows = np.concatenate(rows)
        self._cycle_ends = np.cumsum([r.size for r in rows])
        self._chosen = np.zeros(self._rows.size, dtype=np.int64)
        self._step = 0
        return self._features[self._rows[0]].copy(), {}

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        bucket = int(action)
        if not 0 <= bucket < self._buckets:
            raise ValueError(f"action {action!r} is outside Discrete({self._buckets})")
        if self.config.terminal_score is None:
            target = float(self._targets[self._rows[self._step]])
            reward = 1.0 - (bucket / (self._buckets - 1) - target) ** 2
        else:
            self._chosen[self._step] = bucket
            reward = self._terminal_reward(self._step + 1)
        self._step += 1
        terminated = self._step == self._rows.size
        observed = self._rows[self._step - 1] if terminated else self._rows[self._step]
        return self._features[observed].copy(), reward, terminated, False, {}


    def _terminal_reward(self, done: int) -> float:
        """The cycle's score once its last test got a bucket, else 0."""
        end = np.searchsorted(self._cycle_ends, done)
        if self._cycle_ends[end] != done:
            return 0.0
        start = self._cycle_ends[end - 1] if end else 0
        rows = self._rows[start:done]
        order = rows[np.argsort(-self._chosen[start:done], kind="stable")]  # ties: presentation order
        if self.config.terminal_score == "apfd":
            return metrics.apfd(self._verdicts[order])
        return metrics.nrpa(self._verdicts[order], self.data.history.durations[order])


def reward_targets(data: PreparedData, reward: str, duration_weight: float) -> np.ndarray:
    """The pointwise reward's target in [0, 1] per row (outcomes of the row's own cycle only)."""
    history = data.history
    verdicts = history.verdicts.astype(np.float64)
    if reward == "verdict" and duration_weight == 0.0:
        return verdicts
    targets = np.zeros(verdicts.size)
    for cycle in range(history.n_cycles):
        span = history.rows(cycle)
        n = span.stop - span.start
        if n < 2:
            targets[span] = verdicts[span] if reward == "verdict" else 1.0
            continue
        durations = history.durations[span]
        if reward == "optimal_rank":
            targets[span] = (metrics.optimal_rank_values(history.verdicts[span], durations) - 1) / (n - 1)
        else:
            longer = np.argsort(np.argsort(durations, kind="stable"), kind="stable") / (n - 1)
            targets[span] = (1 - duration_weight) * verdicts[span] + duration_weight * (1 - longer)
    return targets


class PairwiseTestPrioritizationEnv(_PrioritizationEnv):
    """## Description

    Learn which of two tests of one CI cycle should run first; the learned comparison orders a whole cycle
    (`envs.agents.testprio.ranking`). An episode makes `pairs_per_cycle` comparisons in each of
    `cycles_per_episode` cycles of the `split`.

    ## Action Space

    `Discrete(2)`: 0 the left test runs first, 1 the right one.

    ## Observation Space

    `Box(-5, 5, (2d,), float32)`: the left test's d features then the right test's (the pointwise env's
    observation table, twice).

    ## Rewards

    `pair_reward: optimal_order`: +1 when the choice agrees with the optimal order (failing before passing; within
    a verdict, the shorter actual duration first), -1 when it does not, 0 when the two tests tie in that order.
    `pair_reward: apfdc`: that sign times what the choice is worth in cost-cognizant APFD, as a share of the
    pair's duration: a failing test before a passing one finds the failure the passing test's duration sooner
    (t_pass / (t_left + t_right)); within a verdict, the shorter first is worth half the gap
    (|t_left - t_right| / (2 (t_left + t_right))). Its expectation orders by failure probability per second
    (Smith's rule), which is what APFDc scores.

    ## Starting State

    A cycle drawn uniformly from the split; pairs drawn from its tests, a share `mixed_pair_fraction` as
    (failing, passing) pairs when the cycle has both verdicts, sides random. With `tiers` both tests of a pair
    share one tier of the heuristic (ranking.cycle_tiers): the only comparisons the tiered ranking asks; cycles
    without two such tests are not drawn.

    ## Episode End

    Terminated after the last comparison of the episode's last cycle. No truncation.

    ## Arguments

    As the pointwise env, plus `pairs_per_cycle`, `mixed_pair_fraction`, `pair_reward` and `tiers`
    (`PrioritizationConfig`).

    ```python
    gymnasium.make("agents/TestPrioritizationPairwise-v0", data_path="data/testprio/iofrol.csv")
    ```
    """

    MODE = "pairwise"

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        width = 2 * self.data.features.dim
        self.observation_space = spaces.Box(-CLIP, CLIP, shape=(width,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self._durations = self.data.history.durations
        self._tiers = None if self.config.tiers == "none" else cycle_tiers(
            self._features, self.config.tiers, self.data.window, self.config.tier_runs(self.data.window),
            self.data.history.failure_rates, self.data.features.duration_estimates, self._offsets)
        if self._tiers is not None:
            self._cycles = self._cycles[[self._has_tier_pair(c) for c in self._cycles]]
            if self._cycles.size == 0:
                raise InputError(f"{self.data.history.source}: no cycle of the {self.config.split} split has two "
                                 f"tests of one tier to compare (tiers: {self.config.tiers}); use tiers: none or "
                                 "more cycles")
        self._left = np.zeros(0, dtype=np.int64)
        self._right = np.zeros(0, dtype=np.int64)
        self._target = np.zeros(0, dtype=np.float64)
        self._step = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=self._seed_once(seed))
        pairs = [self._sample_pairs(c) for c in self._sample_cycles()]
        self._left = np.concatenate([left for left, _ in pairs])
        self._right = np.concatenate([right for _, right in pairs])
        self._target = self._left_first_target(self._left, self._right)
        self._step = 0
        return self._observation(0), {}

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        choice = int(action)
        if choice not in (0, 1):
            raise ValueError(f"action {action!r} is outside Discrete(2)")
        target = self._target[self._step]
        reward = float(target if choice == 0 else -target)
        self._step += 1
        terminated = self._step == self._left.size
        return self._observation(self._step - 1 if terminated else self._step), reward, terminated, False, {}

    def _observation(self, step: int) -> np.ndarray:
        return pair_observations(self._features, self._left[step : step + 1], self._right[step : step + 1])[0]

    def _has_tier_pair(self, cycle: int) -> bool:
        span = self.data.history.rows(cycle)
        return bool(np.bincount(self._tiers[span]).max() >= 2)

    def _sample_pairs(self, cycle: int) -> tuple[np.ndarray, np.ndarray]:
        """Row indices of `pairs_per_cycle` (left, right) pairs of distinct tests of a cycle (of one tier each with
        `tiers`)."""
        if self._tiers is not None:
            return self._sample_tier_pairs(cycle)
        rng, count = self.np_random, self.config.pairs_per_cycle
        start, n = int(self._offsets[cycle]), int(self._offsets[cycle + 1] - self._offsets[cycle])
        left = rng.integers(n, size=count)
        right = (left + rng.integers(1, n, size=count)) % n
        failing = np.flatnonzero(self._verdicts[start : start + n])
        passing = np.flatnonzero(~self._verdicts[start : start + n])
        if failing.size and passing.size:
            mixed = rng.random(count) < self.config.mixed_pair_fraction
            fail_pick, pass_pick = rng.choice(failing, size=count), rng.choice(passing, size=count)
            fail_left = rng.random(count) < 0.5
            left = np.where(mixed, np.where(fail_left, fail_pick, pass_pick), left)
            right = np.where(mixed, np.where(fail_left, pass_pick, fail_pick), right)
        return start + left, start + right

    def _sample_tier_pairs(self, cycle: int) -> tuple[np.ndarray, np.ndarray]:
        """As `_sample_pairs`, each pair of one tier: the comparisons the tiered ranking asks. A share
        `mixed_pair_fraction` are (failing, passing) pairs of one tier when the cycle has such a tier."""
        rng, count = self.np_random, self.config.pairs_per_cycle
        start = int(self._offsets[cycle])
        tiers = self._tiers[start : int(self._offsets[cycle + 1])]
        failed = self._verdicts[start : start + tiers.size]
        members = [np.flatnonzero(tiers == tier) for tier in range(int(tiers.max()) + 1)]
        pairable = [group for group in members if group.size >= 2]
        mixed_groups = [group for group in pairable if failed[group].any() and not failed[group].all()]
        left, right = np.empty(count, dtype=np.int64), np.empty(count, dtype=np.int64)
        sizes = np.array([group.size for group in pairable], dtype=np.float64)
        mixed = (rng.random(count) < self.config.mixed_pair_fraction) if mixed_groups else np.zeros(count, bool)
        for k in range(count):
            if mixed[k]:
                group = mixed_groups[rng.integers(len(mixed_groups))]
                pair = [rng.choice(group[failed[group]]), rng.choice(group[~failed[group]])]
                if rng.random() < 0.5:
                    pair.reverse()
            else:  # a pair of one tier, the tier drawn as often as it has tests
                group = pairable[rng.choice(len(pairable), p=sizes / sizes.sum())]
                pair = list(rng.choice(group, size=2, replace=False))
            left[k], right[k] = pair
        return start + left, start + right

    def _left_first_target(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """The reward of "left first" (env_config.pair_reward): optimal_order gives +1 if the left test comes first
        in the optimal order, -1 if the right one does, 0 on a tie; apfdc weighs that sign by what the choice is
        worth in cost-cognizant APFD (module docstring of PairwiseTestPrioritizationEnv)."""
        verdict_gap = self._verdicts[left].astype(np.int64) - self._verdicts[right].astype(np.int64)
        duration_gap = np.sign(self._durations[right] - self._durations[left]).astype(np.int64)
        sign = np.where(verdict_gap != 0, verdict_gap, duration_gap).astype(np.float64)
        if self.config.pair_reward == "optimal_order":
            return sign
        t_left, t_right = self._durations[left], self._durations[right]
        both = t_left + t_right
        passing = np.where(verdict_gap > 0, t_right, t_left)  # the passing test of a mixed pair
        worth = np.where(verdict_gap != 0, passing, np.abs(t_left - t_right) / 2)
        worth = np.divide(worth, both, out=np.where(verdict_gap != 0, 0.5, 0.0), where=both > 0)
        return sign * worth
