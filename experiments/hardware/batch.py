"""The rule that keeps a hardware preset from changing what is learned.

The experiment owns the learning: its `training.train_batch_size_per_learner` is the batch of one
gradient update, and with its lr and replay ratio (`training_intensity`, replayed samples per env
step) it fixes how many updates of what size the agent gets per env step. A preset adds only
parallelism: concurrent trials, env runners, envs per runner, GPUs. Two consequences:

- Data-parallel presets (`multi_gpu_learners`, N learners) split that batch: N x batch/N per update,
  so the update is the same one (an experiment batch not divisible by N is an error, never rounded).
- A preset may declare `large_batch` (a bigger batch per timeframe, as docs/hardware.md's GPU profiles
  recommend, and the learning-rate rule that goes with it); it applies only when the experiment opts
  in with `training.batch_scaling: preset`. Then lr is scaled by the rule (linear: x B'/B, sqrt:
  x sqrt(B'/B)) and the replay ratio is kept, so updates per env step drop by B/B': printed by
  `--dry-run`, never silent.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from envs.errors import InputError
from experiments.hardware.presets import HardwarePreset, learner_count

LR_RULES = {"linear": lambda ratio: ratio, "sqrt": math.sqrt}
DEFAULT_BATCH = 32  # training.train_batch_size_per_learner's default


def example_batch(preset: HardwarePreset) -> int:
    """For plans shown without an experiment (`experiments.hardware show`): the default batch, rounded up to
    a multiple of the preset's data-parallel learners so it can be split."""
    learners = max(learner_count(preset), 1)
    return learners * math.ceil(DEFAULT_BATCH / learners)


@dataclass(frozen=True)
class BatchPlan:
    """The batch one update uses under a preset, per learner and in total, and the lr factor that goes with it."""

    experiment_batch: int  # the experiment's batch per update
    batch: int  # the batch per update under the preset (= experiment_batch unless large_batch applies)
    learners: int  # data-parallel learners sharing each update (1: the local learner)
    lr_scale: float
    lr_rule: str | None  # the preset's rule when large_batch applies, else None

    @property
    def per_learner(self) -> int:
        return self.batch // self.learners

    @property
    def changes_learning(self) -> bool:
        return self.batch != self.experiment_batch

    def describe(self, lr: float | None = None, replay_ratio: float | None = None) -> str:
        """'learning unchanged by the preset: ...' or 'learning CHANGED ...: batch 32 -> 2048, lr ... (sqrt rule)'."""
        split = f", split over {self.learners} data-parallel learners ({self.per_learner} each)" if self.learners > 1 else ""
        if not self.changes_learning:
            return (f"learning unchanged by the preset: batch {self.batch}{split}" + (f", lr {lr:g}" if lr else "")
                    + (f", {replay_ratio / self.batch:.4g} updates per env step" if replay_ratio else ""))
        lr_text = f"lr {lr:g} -> {lr * self.lr_scale:.4g}" if lr else f"lr x {self.lr_scale:.4g}"
        updates = (f", updates per env step {replay_ratio / self.experiment_batch:.4g} -> {replay_ratio / self.batch:.4g}"
                   if replay_ratio else f", {self.batch // self.experiment_batch}x fewer updates per env step")
        return (f"learning CHANGED by the preset's large_batch (training.batch_scaling: preset): batch "
                f"{self.experiment_batch} -> {self.batch}{split}, {lr_text} ({self.lr_rule} rule){updates}, "
                f"replay ratio kept")


def plan_batch(preset: HardwarePreset, timeframe: str | None, experiment_batch: int, scaling: str = "none") -> BatchPlan:
    """The batch per update the preset gives an experiment (see the module docstring for the rule)."""
    learners = max(learner_count(preset), 1)
    batch, rule, scale = experiment_batch, None, 1.0
    if scaling == "preset":
        if preset.large_batch is None:
            raise InputError(f"training.batch_scaling is 'preset' but preset {preset.name} declares no large_batch: "
                             f"set training.batch_scaling: none or pick a preset with large_batch")
        large = preset.large_batch
        batch = large.batch_size_per_timeframe.get(timeframe, large.default_batch_size) if timeframe else \
            large.default_batch_size
        rule, scale = large.lr_rule, LR_RULES[large.lr_rule](batch / experiment_batch)
    if batch % learners:
        raise InputError(f"preset {preset.name} splits each update over {learners} data-parallel learners, but the "
                         f"batch {batch} is not divisible by {learners}: set training.train_batch_size_per_learner to "
                         f"a multiple of {learners}")
    return BatchPlan(experiment_batch, batch, learners, scale, rule)
