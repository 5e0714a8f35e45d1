"""A trial's best kept checkpoint, as the sweep keeps it and scoring reads it."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ScoredCheckpoint:
    """A trial's best kept checkpoint (a folder in the sweep's storage) and the `tune.metric` value it was
    kept for."""

    path: str
    score: float
    iteration: int


def best_checkpoint(result: Any, mode: str) -> ScoredCheckpoint | None:
    """The kept checkpoint of one trial with the best selection score (None if it kept none)."""
    from algos.rllib.config import SELECTION_SCORE  # RLlib's side of the name: imported when results are read

    pick = max if mode == "max" else min
    scored = [(ckpt, metrics) for ckpt, metrics in (result.best_checkpoints or [])
              if math.isfinite(float(metrics.get(SELECTION_SCORE, float("nan"))))]
    if not scored:
        return None
    checkpoint, metrics = pick(scored, key=lambda item: float(item[1][SELECTION_SCORE]))
    return ScoredCheckpoint(checkpoint.path, float(metrics[SELECTION_SCORE]),
                            int(metrics.get("training_iteration", 0)))
