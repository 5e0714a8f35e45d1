"""Hardware presets: from `conf/hardware/<name>.yaml` to RLlib resources and a Tune concurrency plan.

The run pipeline calls `select_preset` (--hardware, GPU_PROFILE, the experiment's
`hardware:` key, else detection), then `resolve_plan`, logs `plan.as_params()`, and checks
the live cluster with `check_live_cluster` before starting Tune. Nothing here imports Ray
or torch at module load, so dry runs stay fast.
"""

from experiments.hardware.detect import DetectedHardware, detect_hardware, preset_for, select_preset
from experiments.hardware.plan import (
    PlanEstimate,
    ResourcePlan,
    check_cluster,
    check_live_cluster,
    estimate,
    resolve_plan,
    trials_at_once,
)
from experiments.hardware.presets import HardwarePreset, available_presets, load_preset, preset_dir

__all__ = [
    "DetectedHardware",
    "HardwarePreset",
    "PlanEstimate",
    "ResourcePlan",
    "available_presets",
    "check_cluster",
    "check_live_cluster",
    "detect_hardware",
    "estimate",
    "load_preset",
    "preset_dir",
    "preset_for",
    "resolve_plan",
    "select_preset",
    "trials_at_once",
]
