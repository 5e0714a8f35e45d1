"""A few real observations of an env and its action space: the registered model's input example and signature, and
what its outputs mean. The dry run takes them from the env it builds for each fold, so registration need not build
that env again."""
from __future__ import annotations

from typing import Any

import numpy as np

Examples = tuple[np.ndarray, str]


def example_observations(env: Any) -> Examples:
    """Four observations from a reset (seed 0) and three random steps, as float32, and the action space."""
    obs, _ = env.reset(seed=0)
    batch = [obs]
    for _ in range(3):
        obs, *_ = env.step(env.action_space.sample())
        batch.append(obs)
    return np.asarray(batch, dtype=np.float32), str(env.action_space)
