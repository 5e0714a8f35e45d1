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

    data_path: str | None = Field(
        default=None, description="One CI history, a CSV in the RETECS or enriched format; None: a seeded synthetic "
                                  "CI history.")
    data_paths: tuple[str, ...] | None = Field(
        default=None, min_length=1,
        description="Several histories (either format, mixed) learned as one: each is split in time by the fractions "
                    "and its parts pooled. Needs features: portable; excludes data_path.")
    synthetic_histories: int = Field(
        default=0, ge=0, le=16,
        description="With data_paths: this many seeded synthetic histories (seeds 1000, 1001, ...) join the pool; "
                    "their failures recur by module, a simulated prior that recent failures predict failures.")
    history_window: int | None = Field(
        default=None, ge=1, le=HISTORY_CAPACITY,
        description="Past verdicts per test in the observation. None: the format's usual window (10 for RETECS and "
                    "synthetic, 4 for the enriched Apache data sets).")
    split: Literal["train", "validation", "test"] = Field(
        default="train",
        description="Which cycles the env samples episodes from (the scorer always uses test); validation, for model "
                    "selection, needs validation_fraction > 0.")
    train_fraction: float = Field(
        default=0.7, gt=0, lt=1,
        description="The share of the earliest cycles (in time order) that precede the test split; the rest form it.")
    validation_fraction: float = Field(
        default=0.0, ge=0, lt=1,
        description="The last part of the pre-test cycles (a share of all cycles) held out of training as the "
                    "validation split: validation = [train_fraction - validation_fraction, train_fraction).")
    features: Literal["basic", "extended", "portable"] = Field(
        default="basic",
        description="basic (verdict window, failure rate, duration, recency, runs, static metrics), extended (adds "
                    "recency-weighted failure rates, streaks, flip rate, cycle context) or portable (on one scale for "
                    "every history: a model scores other projects), envs.agents.testprio.features.")
    max_cycles: int | None = Field(
        default=None, ge=2,
        description="Keep only the first this many cycles (in time order), e.g. to make a big data set small. None: "
                    "all.")
    seed: int = Field(default=0, ge=0, description="The env's seed when reset is given none (so defaults reproduce), "
                                                "and the seed of the scorer's tie-breaks.")
    time_budget: float = Field(
        default=0.5, gt=0, le=1,
        description="The share of a cycle's total duration that may run, for NAPFD (1.0: run everything).")
    mode: Literal["pointwise", "pairwise"] = Field(
        default="pointwise",
        description="pointwise (one test per step) or pairwise (two tests per step); the evaluator reads it.")
    cycles_per_episode: int = Field(default=1, ge=1, description="CI cycles in one episode.")
    priority_buckets: int = Field(
        default=10, ge=2, description="Pointwise: priority buckets, the size of the discrete action space.")
    reward: Literal["verdict", "optimal_rank"] = Field(
        default="verdict",
        description="Pointwise reward target: verdict (1 = fails, optionally blended with shortness by "
                    "duration_weight) or optimal_rank (the test's normalized rank in its cycle's optimal order, what "
                    "NRPA scores).")
    duration_weight: float = Field(
        default=0.0, ge=0, le=1,
        description="Pointwise, reward verdict: target = (1 - w) * failed + w * shortness (1 = the shortest test of "
                    "its cycle, 0 = the longest).")
    terminal_score: Literal["apfd", "nrpa"] | None = Field(
        default=None,
        description="Pointwise: None rewards every step; apfd or nrpa gives 0 per step and, at each cycle's last "
                    "step, the cycle's score of the chosen order (for selection on validation; apfd samples only "
                    "cycles with failures).")
    tiers: Literal["none", "heuristic", "failure_record", "recent_failures"] = Field(
        default="none",
        description="none: the policy orders the whole cycle; else tests that tie on the recent-failures heuristic's "
                    "keys form tiers run in the heuristic's order, and the policy orders within each tier: heuristic "
                    "ties all its keys (verdict window, failure rate, estimated duration: the policy breaks only the "
                    "heuristic's own ties), failure_record the window and the failure rate, recent_failures the "
                    "newest tier_window runs (envs.agents.testprio.ranking).")
    tier_window: int | None = Field(
        default=None, ge=1, le=HISTORY_CAPACITY,
        description="With tiers recent_failures: how many of the newest runs define a tier (None: history_window's); "
                    "shorter lets the policy move an older failure within its tier.")
    residual_rounds: int | None = Field(
        default=None, ge=1, le=64,
        description="With tiers, pairwise: None orders each tier in full; k starts from the heuristic's own order and "
                    "swaps neighbours of one tier for k rounds, so a test moves at most 2k places (with a comparator "
                    "that never swaps, the agent is the heuristic).")
    pair_reward: Literal["optimal_order", "apfdc"] = Field(
        default="optimal_order",
        description="Pairwise reward: optimal_order (+1/-1 for agreeing with failing-first-then-shorter) or apfdc "
                    "(what the choice is worth in cost-cognizant APFD).")
    pairs_per_cycle: int = Field(default=32, ge=1, description="Pairwise: comparisons per cycle in an episode.")
    mixed_pair_fraction: float = Field(
        default=0.5, ge=0, le=1,
        description="Pairwise: share of comparisons drawn as (failing, passing) pairs when a cycle has both.")

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
        if self.tier_window is not None and self.tiers != "recent_failures":
            raise ValueError(f"env_config.tier_window shortens the tiers of tiers: recent_failures (tiers is "
                             f"{self.tiers!r}, which reads the whole window); drop it or set tiers: recent_failures")
        if self.residual_rounds is not None and self.tiers == "none":
            raise ValueError("env_config.residual_rounds bounds a residual over the heuristic's tiers: set tiers: "
                             "heuristic (or recent_failures) too, or drop it")
        if self.split == "validation" and self.validation_fraction <= 0:
            raise ValueError("env_config.split: 'validation' needs a validation split; set validation_fraction "
                             "(e.g. 0.15: the last 15% of the cycles before the test split)")
        return self


def parse_config(raw: Mapping[str, Any] | None) -> PrioritizationConfig:
    """Validate a user's env_config; unknown keys and bad values raise `InputError`."""
    return validate(PrioritizationConfig, dict(raw or {}), "test prioritization env", prefix="env_config.")
