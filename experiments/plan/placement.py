"""How several experiments share one machine when they train side by side (experiments/api/side_by_side.py).

The hardware preset describes the whole machine; each experiment gets a share of it, written as a preset of
its own, so everything downstream (resource plan, RLlib resources, Tune concurrency, estimate) is the one
code path a single experiment uses:

* GPUs >= experiments: each gets whole GPUs of its own (3 GPUs, 3 agents: one GPU each; the first ones get
  the remainder). Ray hands whole GPUs to one trial at a time, so agents never hold the same GPU id.
* GPUs < experiments: agents share GPUs, `ceil(agents / GPUs)` per GPU; each agent's trials ask for that
  fraction of one GPU and run one at a time (a `shared_gpu` preset capped by `max_trials`).
* CPU only: the CPUs are divided; an agent gets at least what one of its trials needs, so on a small
  machine the agents take turns at the CPUs (Ray queues the trials that do not fit).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from experiments.hardware import HardwarePreset
from experiments.hardware.presets import cpus_per_trial


@dataclass(frozen=True)
class Share:
    """One experiment's part of the machine."""

    preset: HardwarePreset  # the machine as this experiment sees it
    max_trials: int | None  # a cap on its trials at once (GPU fractions), else its preset decides
    gpus: float             # GPUs it holds while one of its trials runs (whole GPUs, or a fraction of one)
    sharing: int            # agents per GPU when agents share GPUs, else 1

    def describe(self) -> str:
        if self.preset.gpu_count == 0:
            return f"{self.preset.cpus} CPU(s), no GPU"
        if self.sharing > 1:
            return f"{self.gpus:.4g} GPU ({self.sharing} agents per GPU), {self.preset.cpus} CPUs"
        return f"{self.gpus:g} GPU{'s' if self.gpus > 1 else ''} of its own, {self.preset.cpus} CPUs"


def share_machine(preset: HardwarePreset, agents: int) -> list[Share]:
    """The shares of `agents` experiments on `preset`'s machine, in listed order."""
    if preset.gpu_count == 0:
        return [_cpu_share(preset, agents, index) for index in range(agents)]
    if agents <= preset.gpu_count:
        return _whole_gpus(preset, agents)
    return [_gpu_fraction(preset, agents, index) for index in range(agents)]


def _derived(preset: HardwarePreset, index: int, agents: int, cpus: int, **changes: object) -> HardwarePreset:
    """`preset` with `changes`, named for the agent, and at least the CPUs one of its trials needs; validated
    like a preset file."""
    # Ray, not we, picks which of the machine's GPUs a trial gets: the share names no GPU model of its own.
    draft = preset.model_copy(update={"name": f"{preset.name}-agent{index + 1}of{agents}", "gpus": None, **changes})
    return HardwarePreset.model_validate({**draft.model_dump(), "cpus": max(math.ceil(cpus_per_trial(draft)), cpus)})


def _cpu_share(preset: HardwarePreset, agents: int, index: int) -> Share:
    return Share(_derived(preset, index, agents, preset.cpus // agents), None, 0.0, 1)


def _whole_gpus(preset: HardwarePreset, agents: int) -> list[Share]:
    shares = []
    per_agent, remainder = divmod(preset.gpu_count, agents)
    for index in range(agents):
        count = per_agent + (1 if index < remainder else 0)
        strategy = preset.strategy
        if strategy == "multi_gpu_learners" and count < 2:
            strategy = "trial_per_gpu"  # data parallel needs two GPUs; one GPU trains one trial
        share = _derived(preset, index, agents, preset.cpus * count // preset.gpu_count, gpu_count=count,
                         strategy=strategy)
        shares.append(Share(share, None, float(count), 1))
    return shares


def _gpu_fraction(preset: HardwarePreset, agents: int, index: int) -> Share:
    sharing = math.ceil(agents / preset.gpu_count)
    own = preset.trials_per_gpu if preset.strategy == "shared_gpu" else 1  # trials the agent runs at once
    share = _derived(preset, index, agents, preset.cpus // agents, gpu_count=1, strategy="shared_gpu",
                     trials_per_gpu=sharing * own)
    return Share(share, own, 1 / sharing, sharing)
