"""How a policy's output becomes greedy actions (`Algorithm.greedy`): data, not code, so the numpy policy, the torch
scorer and the registered MLflow model apply the same rule without importing the platform. numpy only."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from envs.errors import InputError


@dataclass(frozen=True)
class GreedyRule:
    """How a forward_inference output becomes greedy actions: the output key, and either that it holds
    per-action scores (logits) whose argmax is the action (`argmax`), or a squashed Gaussian's inputs whose mean
    is the action (`squash`: the first half of the last axis is the mean; the action is tanh(mean), rescaled
    from [-1, 1] to the Box's [low, high] as RLlib's env runners unsquash a sampled action), or neither: the
    output is the action. `box_mean` adds, for a Box action space, a diagonal Gaussian's inputs whose mean (the first
    half of the last axis, not squashed) is the action, rescaled and clipped to the Box as RLlib's env runners
    unsquash a sampled action: PPO's rule is argmax for discrete actions and box_mean for a Box. Works on numpy
    arrays and torch tensors alike."""

    output: str
    argmax: bool = False
    squash: bool = False
    box_mean: bool = False

    def __post_init__(self) -> None:
        if self.argmax and self.squash:
            raise InputError(f"greedy rule for {self.output!r}: argmax (discrete) and squash (Box) exclude each other")
        if self.box_mean and self.squash:
            raise InputError(f"greedy rule for {self.output!r}: box_mean (a Gaussian's mean) and squash (tanh of it) "
                             "exclude each other")

    def actions(self, out: dict[str, Any], space: Any = None) -> Any:
        """The greedy actions of a forward_inference output. `space`: the action space (a gymnasium Box, or
        anything with its `low` and `high` arrays), used by `squash` and `box_mean` only; without it (or with
        infinite bounds, which RLlib leaves unscaled too) a squashed action stays in [-1, 1] and `box_mean` does not
        apply (a discrete space has no bounds either)."""
        values = out[self.output]
        if self.box_mean and hasattr(space, "low"):
            return _in_box(values[..., :values.shape[-1] // 2], space)
        if self.argmax:
            return values.argmax(-1)
        if self.squash:
            return _squashed_mean(values, space)
        return values


def _squashed_mean(values: Any, space: Any) -> Any:
    """tanh of the mean half of a squashed Gaussian's inputs, rescaled to `space`'s bounds when they are finite."""
    mean = values[..., :values.shape[-1] // 2]
    unit = mean.tanh() if hasattr(mean, "tanh") else np.tanh(mean)  # a torch tensor keeps its type and device
    return _in_box(unit, space)


def _in_box(unit: Any, space: Any) -> Any:
    """Actions meant for [-1, 1] rescaled to `space`'s bounds when they are finite (else as they are)."""
    if space is None or not (np.isfinite(space.low).all() and np.isfinite(space.high).all()):
        return unit
    low, high = _like(space.low, unit), _like(space.high, unit)
    # As RLlib's unsquash_action (ray/rllib/utils/spaces/space_utils.py) computes it, clip included: the
    # rescaled tanh can land one rounding step outside the bounds.
    return ((unit + 1.0) * (high - low) / 2.0 + low).clip(low, high)


def _like(bound: Any, values: Any) -> Any:
    """An action-space bound as the type, dtype (and device) of `values`, so the arithmetic stays in one library."""
    if hasattr(values, "new_tensor"):
        return values.new_tensor(np.asarray(bound))
    return np.asarray(bound, dtype=values.dtype)
