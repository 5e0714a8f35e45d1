"""The env_config of the test-prioritization environments, validated in one place.

The same dictionary reaches the environments (from `gymnasium.make(id, **config)` or
from RLlib's `env_config`) and `evaluate_policy`, so both parse it here: a typo in a
key or a value out of range raises `InputError` naming the key and the fix, instead of
silently training on defaults.
"""
from __future__ import annotations

from typing import Any, Literal, Mapping

from pydantic import ConfigDict, Field, model_validator

from envs.validation import StrictModel, validate

# The widest verdict history a feature can look back on (the loaders store this many runs).
HISTORY_CAPACITY = 64


class PrioritizationConfig(StrictModel):
    """Every env_config key with its default; `gymnasium.make` with no config uses these."""

    model_config = ConfigDict(frozen=True)

    # CSV in the RETECS or enriched format; None -> a seeded synthetic CI history.
    data_path: str | None = None
    # Several histories (either format, mixed) learned as one: each is split in time by the fractions below and
    # its parts are pooled (train with train, validation with validation, test with test). Needs
    # `features: portable`, the features every history gives on one scale; excludes data_path.
    data_paths: tuple[str, ...] | None = Field(default=None, min_length=1)
    # With data_paths: this many seeded synthetic histories (envs.agents.testprio.synthetic, seeds 1000, 1001, ...)
    # join the pool. Their failures recur by module, so a pool of real histories that rarely fail still teaches
    # that recent failures predict failures (a simulated prior, like any other history split in time).
    synthetic_histories: int = Field(default=0, ge=0, le=16)
    # Past verdicts per test in the observation; None -> the format's usual window
    # (10 for RETECS / synthetic, 4 for the enriched Apache data sets).
    history_window: int | None = Field(default=None, ge=1, le=HISTORY_CAPACITY)
    # Which cycles the environment samples episodes from; evaluation always uses "test".
    # "validation" (for model selection) needs validation_fraction > 0.
    split: Literal["train", "validation", "test"] = "train"
    # The earliest cycles (in time order) precede the test split, the rest form the test split.
    train_fraction: float = Field(default=0.7, gt=0, lt=1)
    # The last part of those pre-test cycles (a fraction of all cycles) is held out of
    # training as the validation split: train = [0, train_fraction - validation_fraction),
    # validation = [train_fraction - validation_fraction, train_fraction), test = the rest.
    validation_fraction: float = Field(default=0.0, ge=0, lt=1)
    # "basic" (verdict window, failure rate, duration, recency, runs, static metrics) or
    # "extended" (adds recency-weighted failure rates, failure streaks, flip rate, and
    # cycle context) or "portable" (what every history gives, on a scale that needs no statistics of the
    # history: a model trained on some projects scores another's cycles as they come; see
    # `envs.agents.testprio.features`).
    features: Literal["basic", "extended", "portable"] = "basic"
    # Keep only the first N cycles (in time order), e.g. to make a big data set small.
    max_cycles: int | None = Field(default=None, ge=2)
    seed: int = Field(default=0, ge=0)
    # Fraction of a cycle's total duration that may run, for NAPFD (1.0 = run everything).
    time_budget: float = Field(default=0.5, gt=0, le=1)
    # "pointwise" (one test per step) or "pairwise" (two tests per step); the evaluator reads it.
    mode: Literal["pointwise", "pairwise"] = "pointwise"
    cycles_per_episode: int = Field(default=1, ge=1)
    # Pointwise: number of priority buckets (the size of the discrete action space).
    priority_buckets: int = Field(default=10, ge=2)
    # Pointwise reward target: "verdict" (1 = fails, optionally blended with shortness by
    # duration_weight) or "optimal_rank" (the test's normalized rank value in the optimal
    # order of its cycle, the quantity NRPA scores).
    reward: Literal["verdict", "optimal_rank"] = "verdict"
    # Pointwise, reward "verdict": target = (1 - w) * failed + w * shortness (1 = the
    # shortest test of its cycle, 0 = the longest, by actual duration).
    duration_weight: float = Field(default=0.0, ge=0, le=1)
    # Pointwise: None = a reward per step; "apfd" / "nrpa" = 0 per step and, at the last
    # step of each cycle, that cycle's score of the order the chosen buckets give (for
    # model selection on the validation split; "apfd" samples only cycles with failures).
    terminal_score: Literal["apfd", "nrpa"] | None = None
    # "none": the policy orders the whole cycle. "recent_failures": a residual over the heuristic's ranks: tests
    # with the same recent failures (the verdict window) form a tier, tiers run in the heuristic's order, and the
    # policy orders the tests within each tier; the pairwise env then draws its pairs within tiers
    # (envs.agents.testprio.ranking).
    tiers: Literal["none", "recent_failures"] = "none"
    # With tiers: recent_failures: how many of the newest runs define a tier (None: all of history_window's). A
    # shorter window than the observation's keeps old failures as features the policy may weigh, not as a rank.
    tier_window: int | None = Field(default=None, ge=1, le=HISTORY_CAPACITY)
    # With tiers: recent_failures and the pairwise env: None = the comparator orders each tier in full; k = each tier
    # starts from the prior order (shorter estimated duration first) and the comparator swaps neighbours for k rounds
    # of odd-even transposition, so a test moves at most 2k places from the prior (ranking.residual_transpositions).
    residual_rounds: int | None = Field(default=None, ge=1, le=64)
    # Pairwise reward: "optimal_order" (+1/-1 for agreeing with failing-first-then-shorter) or "apfdc" (what the
    # choice is worth in cost-cognizant APFD: a failing test before a passing one earns the passing test's share of
    # the pair's duration; within a verdict, the shorter first earns half their duration gap's share).
    pair_reward: Literal["optimal_order", "apfdc"] = "optimal_order"
    # Pairwise: comparisons per cycle in an episode.
    pairs_per_cycle: int = Field(default=32, ge=1)
    # Pairwise: share of comparisons drawn as (failing, passing) pairs when a cycle has both.
    mixed_pair_fraction: float = Field(default=0.5, ge=0, le=1)

    def tier_runs(self, window: int) -> int:
        """How many of the newest runs define a tier, given the history's verdict `window` (tier_window or all)."""
        return min(self.tier_window or window, window)

    @model_validator(mode="after")
    def _splits_fit(self) -> "PrioritizationConfig":
        if self.validation_fraction >= self.train_fraction:
            raise ValueError(f"env_config.validation_fraction {self.validation_fraction} must be below "
                             f"train_fraction {self.train_fraction}: validation is carved from the pre-test cycles")
        if self.data_paths is not None and self.data_path is not None:
            raise ValueError("env_config sets both data_path and data_paths; keep data_path for one history or "
                             "data_paths for several")
        if self.data_paths is not None and self.features != "portable":
            raise ValueError(f"env_config.data_paths needs features: portable (got {self.features!r}): the other "
                             "sets scale by one history's statistics and read code metrics only some formats have")
        if self.synthetic_histories and self.data_paths is None:
            raise ValueError("env_config.synthetic_histories joins a pool of histories: set data_paths too (or drop "
                             "it; with no data at all the env already uses one synthetic history)")
        if self.history_window is not None and self.tier_window is not None and self.tier_window > self.history_window:
            raise ValueError(f"env_config.tier_window {self.tier_window} is longer than history_window "
                             f"{self.history_window}: a tier reads the observation's verdict window; shorten it")
        if self.residual_rounds is not None and self.tiers != "recent_failures":
            raise ValueError("env_config.residual_rounds bounds a residual over the heuristic's tiers: set tiers: "
                             "recent_failures too, or drop it")
        if self.split == "validation" and self.validation_fraction <= 0:
            raise ValueError("env_config.split: 'validation' needs a validation split; set validation_fraction "
                             "(e.g. 0.15: the last 15% of the cycles before the test split)")
        return self


def parse_config(raw: Mapping[str, Any] | None) -> PrioritizationConfig:
    """Validate a user's env_config; unknown keys and bad values raise `InputError`."""
    return validate(PrioritizationConfig, dict(raw or {}), "test prioritization env", prefix="env_config.")
