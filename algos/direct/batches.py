"""What both direct problems share: the decisions of a fold's part, and mini-batches of consecutive ones drawn from
them (Jiang, Xu & Liang's batch starts, geometric towards the recent end, or uniform)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from envs.errors import InputError


@dataclass(frozen=True)
class Batch:
    """Decisions start .. start + size - 1 of the memory."""

    start: int
    size: int


def decision_rows(env: Any) -> np.ndarray:
    """The rows the env decides at when it walks its part: every `decision_interval` bars from the part's first,
    each with its whole holding period inside the part."""
    lo, hi = env.market.bounds[env.cfg.split]
    return np.arange(lo, hi - env.cfg.decision_interval, env.cfg.decision_interval)


def check_fits(env: Any, batch_size: int) -> None:
    """`check_batch_fits` for the env's own part (what `--dry-run` asks of both problems)."""
    check_batch_fits(len(decision_rows(env)), batch_size, env.cfg.split)


def draw_batch(rng: np.random.Generator, decisions: int, size: int, batch_start: str, bias: float) -> Batch:
    """A mini-batch of `size` consecutive decisions out of `decisions`, its start drawn as `batch_start` says."""
    last = decisions - size
    start = int(rng.integers(0, last + 1)) if batch_start == "uniform" else geometric_start(rng, last, bias)
    return Batch(start, size)


def geometric_start(rng: np.random.Generator, last: int, bias: float) -> int:
    """A batch start in 0..last drawn with P(k0) ~ (1 - bias)^(last - k0): the inverse of a truncated geometric draw
    of the distance from the end (Jiang, Xu & Liang's batch starts, favouring the recent end)."""
    if last == 0:
        return 0
    distance = np.floor(np.log1p(-rng.random() * (1.0 - (1.0 - bias) ** (last + 1))) / np.log1p(-bias))
    return last - min(int(distance), last)


def check_batch_fits(decisions: int, batch_size: int, split: str) -> None:
    """A mini-batch longer than the part it is drawn from is refused in one line."""
    if batch_size > decisions:
        raise InputError(f"training.train_batch_size_per_learner: a mini-batch of {batch_size} consecutive decisions "
                         f"is longer than the {split} part's {decisions} decisions: use at most {decisions}, or a "
                         "longer train part")

