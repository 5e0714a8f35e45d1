"""The env_config of the test-prioritization environments, validated in one place.

The same dictionary reaches the environments (from `gymnasium.make(id, **config)` or
from RLlib's `env_config`) and `evaluate_policy`, so both parse it here: a typo in a
key or a value out of range raises `InputError` naming the key and the fix, instead of
silently training on defaults.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, fields
from typing import Any, Mapping

from envs.errors import InputError

# The widest verdict history a feature can look back on (the loaders store this many runs).
HISTORY_CAPACITY = 64
MODES = ("pointwise", "pairwise")
SPLITS = ("train", "validation", "test")
FEATURE_SETS = ("basic", "extended")
REWARDS = ("verdict", "optimal_rank")
TERMINAL_SCORES = ("apfd", "nrpa")


@dataclass(frozen=True)
class PrioritizationConfig:
    """Every env_config key with its default; `gymnasium.make` with no config uses these."""

    # CSV in the RETECS or enriched format; None -> a seeded synthetic CI history.
    data_path: str | None = None
    # Past verdicts per test in the observation; None -> the format's usual window
    # (10 for RETECS / synthetic, 4 for the enriched Apache data sets).
    history_window: int | None = None
    # Which cycles the environment samples episodes from; evaluation always uses "test".
    # "validation" (for model selection) needs validation_fraction > 0.
    split: str = "train"
    # The earliest cycles (in time order) precede the test split, the rest form the test split.
    train_fraction: float = 0.7
    # The last part of those pre-test cycles (a fraction of all cycles) is held out of
    # training as the validation split: train = [0, train_fraction - validation_fraction),
    # validation = [train_fraction - validation_fraction, train_fraction), test = the rest.
    validation_fraction: float = 0.0
    # "basic" (verdict window, failure rate, duration, recency, runs, static metrics) or
    # "extended" (adds recency-weighted failure rates, failure streaks, flip rate, and
    # cycle context; see `envs.agents.testprio.features`).
    features: str = "basic"
    # Keep only the first N cycles (in time order), e.g. to make a big data set small.
    max_cycles: int | None = None
    seed: int = 0
    # Fraction of a cycle's total duration that may run, for NAPFD (1.0 = run everything).
    time_budget: float = 0.5
    # "pointwise" (one test per step) or "pairwise" (two tests per step); the evaluator reads it.
    mode: str = "pointwise"
    cycles_per_episode: int = 1
    # Pointwise: number of priority buckets (the size of the discrete action space).
    priority_buckets: int = 10
    # Pointwise reward target: "verdict" (1 = fails, optionally blended with shortness by
    # duration_weight) or "optimal_rank" (the test's normalized rank value in the optimal
    # order of its cycle, the quantity NRPA scores).
    reward: str = "verdict"
    # Pointwise, reward "verdict": target = (1 - w) * failed + w * shortness (1 = the
    # shortest test of its cycle, 0 = the longest, by actual duration).
    duration_weight: float = 0.0
    # Pointwise: None = a reward per step; "apfd" / "nrpa" = 0 per step and, at the last
    # step of each cycle, that cycle's score of the order the chosen buckets give (for
    # model selection on the validation split; "apfd" samples only cycles with failures).
    terminal_score: str | None = None
    # Pairwise: comparisons per cycle in an episode.
    pairs_per_cycle: int = 32
    # Pairwise: share of comparisons drawn as (failing, passing) pairs when a cycle has both.
    mixed_pair_fraction: float = 0.5


_KEYS = tuple(f.name for f in fields(PrioritizationConfig))


def parse_config(raw: Mapping[str, Any] | None) -> PrioritizationConfig:
    """Validate a user's env_config; unknown keys and bad values raise `InputError`."""
    given = dict(raw or {})
    unknown = [key for key in given if key not in _KEYS]
    if unknown:
        key = unknown[0]
        close = difflib.get_close_matches(key, _KEYS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise InputError(
            f"env_config: unknown key {key!r}{hint}; valid keys are {', '.join(_KEYS)}"
        )
    config = PrioritizationConfig(**given)
    _check(config)
    return config


def _check(config: PrioritizationConfig) -> None:
    if config.data_path is not None and not isinstance(config.data_path, str):
        raise InputError(
            f"env_config.data_path: expected a file path string or null, got {config.data_path!r}"
        )
    if config.history_window is not None:
        _int_in("history_window", config.history_window, 1, HISTORY_CAPACITY)
    _choice("split", config.split, SPLITS)
    _choice("mode", config.mode, MODES)
    _float_in("train_fraction", config.train_fraction, 0.0, 1.0, low_open=True, high_open=True)
    _float_in("validation_fraction", config.validation_fraction, 0.0, config.train_fraction,
              low_open=False, high_open=True)
    if config.split == "validation" and config.validation_fraction <= 0:
        raise InputError(
            "env_config.split: 'validation' needs a validation split; set validation_fraction "
            "(e.g. 0.15: the last 15% of the cycles before the test split)"
        )
    _choice("features", config.features, FEATURE_SETS)
    _choice("reward", config.reward, REWARDS)
    _float_in("duration_weight", config.duration_weight, 0.0, 1.0, low_open=False, high_open=False)
    if config.terminal_score is not None:
        _choice("terminal_score", config.terminal_score, TERMINAL_SCORES)
    if config.max_cycles is not None:
        _int_in("max_cycles", config.max_cycles, 2, None)
    _int_in("seed", config.seed, 0, None)
    _float_in("time_budget", config.time_budget, 0.0, 1.0, low_open=True, high_open=False)
    _int_in("cycles_per_episode", config.cycles_per_episode, 1, None)
    _int_in("priority_buckets", config.priority_buckets, 2, None)
    _int_in("pairs_per_cycle", config.pairs_per_cycle, 1, None)
    _float_in("mixed_pair_fraction", config.mixed_pair_fraction, 0.0, 1.0, low_open=False, high_open=False)


def _choice(key: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise InputError(f"env_config.{key}: {value!r} is not one of {', '.join(allowed)}")


def _int_in(key: str, value: Any, low: int, high: int | None) -> None:
    bound = f"between {low} and {high}" if high is not None else f">= {low}"
    in_range = isinstance(value, int) and value >= low and (high is None or value <= high)
    if isinstance(value, bool) or not in_range:
        raise InputError(f"env_config.{key}: expected an integer {bound}, got {value!r}")


def _float_in(key: str, value: Any, low: float, high: float, *, low_open: bool, high_open: bool) -> None:
    left, right = ("(" if low_open else "["), (")" if high_open else "]")
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok:
        ok = (value > low if low_open else value >= low) and (value < high if high_open else value <= high)
    if not ok:
        raise InputError(f"env_config.{key}: expected a number in {left}{low}, {high}{right}, got {value!r}")
