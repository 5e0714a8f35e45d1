"""What the platform hands an algorithm, as plain values: the base model of its `training` section, the resources of
one trial, the checkpoint selection rule, and `BuildInputs`, everything a learner's builder needs. No Ray, no torch:
reading an experiment file validates its `training` section against these models.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from envs.validation import StrictModel

DEFAULT_BATCH = 32  # training.train_batch_size_per_learner's default: the batch of one update per learner


class TrainingBase(StrictModel):
    """Keys every algorithm's `training` section has: the hardware plan reads the batch and lr."""

    lr: float = Field(default=5e-4, gt=0, description="The optimizer's learning rate (a hardware preset's lr rule "
                                                      "scales it with batch_scaling: preset).")
    gamma: float = Field(default=0.99, gt=0, le=1,
                         description="The discount factor: how much a reward later counts now; closer to 1 looks "
                                     "further ahead.")
    train_batch_size_per_learner: int = Field(
        default=DEFAULT_BATCH, ge=1,
        description="The batch of one update per learner. A hardware preset never changes it (data-parallel presets "
                    "split it over their learners) unless batch_scaling: preset.")
    batch_scaling: Literal["none", "preset"] = Field(
        default="none",
        description="preset opts in to the hardware preset's large_batch and its lr rule (a bigger batch per update "
                    "on big GPUs); none keeps the batch and lr as written.")
    grad_clip: float | None = Field(default=40.0, gt=0,
                                    description="Clip the gradients' global norm to this; None: no clipping.")


def slice_sizes(batch: int, learners: int) -> tuple[int, ...]:
    """How one update's `batch` items are split over `learners`: as even as it gets, larger slices first."""
    base, extra = divmod(batch, learners)
    return tuple(base + (1 if j < extra else 0) for j in range(learners))


def slice_weights(batch: int, learners: int) -> tuple[float, ...]:
    """Each slice's loss factor: DDP averages the learners' gradients (1/N each), the single-learner update
    weighs each item 1/batch, so slice j's mean loss is scaled by N x size_j / batch (1.0 when even)."""
    return tuple(learners * size / batch for size in slice_sizes(batch, learners))


@dataclass(frozen=True)
class Resources:
    """Resources of one trial, settled by the platform from the experiment and the hardware plan."""

    num_env_runners: int
    num_envs_per_env_runner: int
    num_cpus_per_env_runner: float
    num_learners: int
    num_gpus_per_learner: float
    mixed_precision: str = "none"
    torch_compile_learner: bool = False
    custom_resources: dict[str, float] = field(default_factory=dict)  # of the trial's main process
    # The whole batch of one update when it does not split evenly over the learners (FastDQN weights the
    # slices, experiments/hardware/batch.py); None: train_batch_size_per_learner x learners.
    update_batch_size: int | None = None


@dataclass(frozen=True)
class SelectionRule:
    """How a checkpoint's selection score comes from the validation scores (tune.checkpoint.select): the mean of the
    last `smooth` iterations' scores, and none before `explore_until` env steps (while exploration decays)."""

    smooth: int = 1
    explore_until: int = 0

    def score(self, history: list[float], env_steps: float, mode: str) -> float:
        """The selection score of the newest iteration, given every iteration's validation score so far."""
        worst = float("-inf") if mode == "max" else float("inf")
        recent = history[-self.smooth:]
        if env_steps < self.explore_until or not recent or not all(math.isfinite(v) for v in recent):
            return worst
        return float(sum(recent) / len(recent))


@dataclass(frozen=True)
class BuildInputs:
    """Everything a learner's builder needs, as plain values: the experiment's sections as dicts (search domains
    already in place, the batch and lr already planned for the hardware), resources, the selection metric and the
    seed."""

    env_id: str
    sections: dict[str, Any]   # environment, env_runners, learners, training, rl_module, evaluation, reporting
    resources: Resources
    metric: str
    mode: str
    seed: Any = None
    has_vector_env: bool = False
    selection: SelectionRule = field(default_factory=SelectionRule)
    warm_start: str | None = None  # an algorithm checkpoint whose learner state every trial starts from
    system_metrics_interval_s: float | None = None  # sample the trial's system use this often (None: never)
    # The algorithm's name in the table, whose numpy export scores an env family's validation (None: not scored).
    algorithm: str | None = None
