"""`api.hardware_presets()`, `api.hardware_plan(preset)` and `api.hardware_detected()`: the hardware presets
(conf/hardware) and what a run would do with one, before spending money (what `python -m experiments.hardware`
prints). An unknown preset or a malformed file is an InputError in one line."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PresetSummary:
    preset: Any          # experiments.hardware.presets.HardwarePreset
    trials_at_once: int  # how many trials it runs side by side


@dataclass(frozen=True)
class TimeframePlan:
    """A preset's plan for bars of one timeframe, each part as the plan says it."""

    timeframe: str
    plan: str             # resources per trial and how many run at once
    estimate: str         # waves, wall time and cost of the sweep
    batch: str            # the batch size and its rule
    opt_in: str | None    # the preset's opt-in large batch (None: it has none)


@dataclass(frozen=True)
class PresetPlans:
    preset: Any           # experiments.hardware.presets.HardwarePreset
    timeframes: list[TimeframePlan]


@dataclass(frozen=True)
class Detection:
    machine: str          # what this machine is
    preset: str           # the preset it maps to
    reason: str           # why that one
    warning: str | None   # a mismatch worth saying
    variable: str         # the variable that overrides detection
    override: str | None  # its value, when set (and not "auto")
    plan: str             # the detected preset's plan


def hardware_presets() -> list[PresetSummary]:
    """Every preset in conf/hardware."""
    from experiments.hardware.plan import trials_at_once
    from experiments.hardware.presets import load_all_presets

    return [PresetSummary(preset, trials_at_once(preset)) for preset in load_all_presets()]


def hardware_plan(preset: str, trials: int | None = None, env_steps: int = 100_000,
                  timeframes: tuple[str, ...] = ("1h", "1d")) -> PresetPlans:
    """A preset (a name, or a YAML file's path) and its plans for `trials` trials (default: as many as run at once)
    of `env_steps` env steps each, per timeframe."""
    from experiments.hardware.plan import estimate, resolve_plan, trials_at_once
    from experiments.hardware.presets import load_preset

    loaded = load_preset(preset)
    trials = trials if trials is not None else trials_at_once(loaded)
    plans = []
    for timeframe in timeframes:
        plan = resolve_plan(loaded, timeframe, trials)
        opt_in = (resolve_plan(loaded, timeframe, trials, plan.experiment_batch, "preset").batch_plan.describe()
                  if loaded.large_batch is not None else None)
        plans.append(TimeframePlan(timeframe, plan.describe(), estimate(plan, loaded, trials, env_steps).describe(),
                                   plan.batch_plan.describe(), opt_in))
    return PresetPlans(loaded, plans)


def hardware_detected() -> Detection:
    """This machine, the preset it maps to, and that preset's plan."""
    import os

    from experiments.hardware.detect import ENV_VAR, detect_hardware, preset_for
    from experiments.hardware.plan import resolve_plan, trials_at_once
    from experiments.hardware.presets import is_auto

    detected = detect_hardware()
    preset, warning = preset_for(detected)
    override = os.environ.get(ENV_VAR, "").strip()
    return Detection(detected.summary(), preset.name,
                     "no CUDA" if not detected.cuda_available else "matched by GPU name, count and VRAM", warning,
                     ENV_VAR, override if override and not is_auto(override) else None,
                     resolve_plan(preset, None, trials_at_once(preset)).describe())
