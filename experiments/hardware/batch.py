"""The rule that keeps a hardware preset from changing what is learned.

The experiment owns the learning: its `training.train_batch_size_per_learner` is the batch of one
gradient update, and with its lr and replay ratio (`training_intensity`, replayed samples per env
step) it fixes how many updates of what size the agent gets per env step. A preset adds only
parallelism: concurrent trials, env runners, envs per runner, GPUs. Two consequences:

- Data-parallel presets (`multi_gpu_learners`, N learners) split that batch over the N learners, so the
  update is the same one. A batch not divisible by N is split unevenly (32 over 3: 11, 11, 10) and each
  slice's mean loss is weighted by N x its share, so the all-reduced (averaged) gradient equals the
  single-learner gradient (`algos.inputs.slice_sizes`, `slice_weights`; FastDQN's learner does it). An algorithm whose
  learner is not ours (stock RLlib, PPO) cannot, and is refused with a batch that works (`check_split`).
- A preset may declare `large_batch` (a bigger batch per timeframe, as docs/hardware.md's GPU profiles
  recommend, and the learning-rate rule that goes with it); it applies only when the experiment opts
  in with `training.batch_scaling: preset`. Then lr is scaled by the rule (linear: x B'/B, sqrt:
  x sqrt(B'/B)) and the replay ratio is kept, so updates per env step drop by B/B': printed by
  `--dry-run`, never silent.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from algos.inputs import slice_sizes
from envs.errors import InputError
from experiments.hardware.presets import HardwarePreset, learner_count

LR_RULES = {"linear": lambda ratio: ratio, "sqrt": math.sqrt}
DEFAULT_BATCH = 32  # training.train_batch_size_per_learner's default


def check_split(batch: int, learners: int, uneven_ok: bool, algorithm: str, where: str) -> None:
    """Refuse a batch that `algorithm`'s learner cannot split over `learners`, naming the batches that work."""
    if learners > 1 and batch < learners:
        raise InputError(f"{where}: the update batch {batch} gives some of the {learners} data-parallel learners "
                         f"nothing to learn from: set training.train_batch_size_per_learner to at least {learners}")
    if learners <= 1 or batch % learners == 0 or uneven_ok:
        return
    lower = batch // learners * learners
    works = " or ".join(str(b) for b in (lower, lower + learners) if b > 0)
    raise InputError(f"{where}: the update batch {batch} does not split evenly over {learners} data-parallel learners "
                     f"and {algorithm}'s learner (stock RLlib) cannot weight uneven slices: set "
                     f"training.train_batch_size_per_learner to {works}")


def example_batch(preset: HardwarePreset) -> int:
    """For plans shown without an experiment (`experiments.hardware show`): the default batch, rounded up to
    a multiple of the preset's data-parallel learners so every algorithm can split it."""
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
        """The largest slice: what RLlib's `train_batch_size_per_learner` is set to."""
        return self.slices[0]

    @property
    def slices(self) -> tuple[int, ...]:
        return slice_sizes(self.batch, self.learners)

    @property
    def even(self) -> bool:
        return self.batch % self.learners == 0

    @property
    def changes_learning(self) -> bool:
        return self.batch != self.experiment_batch

    def describe(self, lr: float | None = None, replay_ratio: float | None = None) -> str:
        """'learning unchanged by the preset: ...' or 'learning CHANGED ...: batch 32 -> 2048, lr ... (sqrt rule)'."""
        sizes = self.slices
        each = f"{sizes[0]} each" if self.even else (f"{', '.join(map(str, sizes))}: each slice's loss weighted by its "
                                                     "share, the same update")
        split = f", split over {self.learners} data-parallel learners ({each})" if self.learners > 1 else ""
        if not self.changes_learning:
            return (f"learning unchanged by the preset: batch {self.batch}{split}" + (f", lr {lr:g}" if lr else "")
                    + (f", {replay_ratio / self.batch:.4g} updates per env step" if replay_ratio else ""))
        lr_text = f"lr {lr:g} -> {lr * self.lr_scale:.4g}" if lr else f"lr x {self.lr_scale:.4g}"
        updates = (f", updates per env step {replay_ratio / self.experiment_batch:.4g} -> "
                   f"{replay_ratio / self.batch:.4g}" if replay_ratio
                   else f", {self.batch // self.experiment_batch}x fewer updates per env step")
        return (f"learning CHANGED by the preset's large_batch (training.batch_scaling: preset): batch "
                f"{self.experiment_batch} -> {self.batch}{split}, {lr_text} ({self.lr_rule} rule){updates}, "
                f"replay ratio kept")


def plan_batch(preset: HardwarePreset, timeframe: str | None, experiment_batch: int,
               scaling: str = "none") -> BatchPlan:
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
    return BatchPlan(experiment_batch, batch, learners, scale, rule)


# The share of a trial's memory one update's observations may take: the network's activations and gradients, the
# optimizer's state and the rollout or replay buffers need the rest.
OBSERVATION_SHARE = 0.25


def memory_cap(observation_bytes: int, preset: HardwarePreset, trials_at_once: int) -> tuple[int, str]:
    """The largest batch whose observations (batch x observation bytes) fit OBSERVATION_SHARE of a trial's memory:
    its GPUs' memory when the preset has GPUs, else its share of the machine's; and where that memory is. A universe
    of 500 assets x 24 bars x 5 features is 240 kB an observation: 4,000 of them are 1 GB."""
    if preset.vram_gb is not None and preset.gpu_count:
        memory, where = preset.vram_gb * preset.gpu_count / max(trials_at_once, 1), f"{preset.name}'s GPU memory"
    else:
        memory, where = preset.memory_gb / max(trials_at_once, 1), f"{preset.name}'s {preset.memory_gb:g} GB"
    budget = memory * 1e9 * OBSERVATION_SHARE
    return (max(int(budget // max(observation_bytes, 1)), 1),
            f"{OBSERVATION_SHARE:.0%} of {memory:.3g} GB a trial ({where})")
