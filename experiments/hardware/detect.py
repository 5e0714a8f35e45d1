"""Which preset applies: the user's choice if any, else what this machine's GPUs look like.

Precedence, highest first: `--hardware`, the `GPU_PROFILE` environment variable (the name
GPU-profile setups commonly use), the experiment's `hardware:` key, then detection. Any level
may say `auto` to ask for detection explicitly.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from envs.errors import InputError
from experiments.hardware.presets import HardwarePreset, cuda_key, is_auto, load_all_presets, load_preset

ENV_VAR = "GPU_PROFILE"
CPU_PRESET = "cpu"
# torch reports GiB of usable memory: a "16 GB" T4 shows 14.6, a "40 GB" A100 39.4.
VRAM_TOLERANCE = 0.15
# One of these exists wherever the NVIDIA driver works: bare metal, containers with --gpus, WSL2 (/dev/dxg).
NVIDIA_DEVICE_PATHS = ("/dev/nvidiactl", "/dev/nvidia0", "/proc/driver/nvidia", "/dev/dxg")


@dataclass(frozen=True)
class DetectedHardware:
    """What torch and the OS report about this machine."""

    cuda_available: bool
    device_names: list[str]
    vram_gb: list[float]
    cpu_count: int

    def summary(self) -> str:
        """'2x NVIDIA A100-SXM4-80GB (79.1 GB), 16 CPUs' or 'no CUDA, 2 CPUs'."""
        if not self.cuda_available:
            return f"no CUDA, {self.cpu_count} CPUs"
        groups: dict[tuple[str, float], int] = {}
        for name, vram in zip(self.device_names, self.vram_gb, strict=True):
            groups[(name, vram)] = groups.get((name, vram), 0) + 1
        gpus = " + ".join(f"{n}x {name} ({vram:.1f} GB)" for (name, vram), n in groups.items())
        return f"{gpus}, {self.cpu_count} CPUs"


def detect_hardware() -> DetectedHardware:
    """Ask torch (imported here, not at module load, to keep `--dry-run` fast) about CUDA devices."""
    cpu_count = _cpu_count()
    if _no_nvidia_driver():
        return DetectedHardware(False, [], [], cpu_count)
    try:
        import torch
    except ImportError:
        return DetectedHardware(False, [], [], cpu_count)
    if not torch.cuda.is_available():
        return DetectedHardware(False, [], [], cpu_count)
    indices = range(torch.cuda.device_count())
    names = [torch.cuda.get_device_name(i) for i in indices]
    vram = [round(torch.cuda.get_device_properties(i).total_memory / 1024**3, 1) for i in indices]
    return DetectedHardware(True, names, vram, cpu_count)


def _no_nvidia_driver() -> bool:
    """True on Linux without NVIDIA (or WSL GPU) device nodes: no CUDA, so skip the ~1.5 s torch import."""
    if not sys.platform.startswith("linux"):
        return False
    return not any(Path(p).exists() for p in NVIDIA_DEVICE_PATHS)


def _cpu_count() -> int:
    """CPUs this process may use (respects container/affinity limits where the OS tells)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def preset_for(
    detected: DetectedHardware, presets: Iterable[HardwarePreset] | None = None
) -> tuple[HardwarePreset, str | None]:
    """The preset matching the detected GPUs, plus a warning when only an approximate one exists.

    A preset matches when every device name contains one of its `cuda_names` (for
    heterogeneous boxes: the same mix as its `gpus`), the GPU count is equal and the VRAM
    is within 15%. Among several matches the one whose CPU count is closest wins, then a
    preset without a price (an hourly price claims where the machine is rented: ask for
    `g5_2xlarge` by name to get AWS costs), then a sweep strategy over data-parallel
    learners, which a user should ask for explicitly.
    """
    pool = list(presets) if presets is not None else load_all_presets()
    if not detected.cuda_available or not detected.device_names:
        return _cpu_preset(pool), None
    gpu_presets = [p for p in pool if p.gpu_count > 0]
    if not gpu_presets:
        raise InputError(
            "CUDA GPUs detected but no GPU preset exists in conf/hardware: add one or pass --hardware"
        )
    best = max(gpu_presets, key=lambda p: _rank(p, detected))
    if _matches(best, detected):
        return best, None
    return best, (
        f"no hardware preset matches {detected.summary()}: using the closest, '{best.name}' "
        f"({best.gpu_count}x {best.gpu_model}, {best.vram_gb:g} GB); add conf/hardware/<name>.yaml "
        f"with cuda_names for your GPU or pass --hardware"
    )


def _cpu_preset(pool: list[HardwarePreset]) -> HardwarePreset:
    for preset in pool:
        if preset.name == CPU_PRESET:
            return preset
    return load_preset(CPU_PRESET)


def _rank(
    preset: HardwarePreset, detected: DetectedHardware
) -> tuple[bool, float, bool, float, float, bool, bool]:
    names_hit = sum(cuda_key(n, preset.cuda_names) is not None for n in detected.device_names)
    return (
        _matches(preset, detected),
        names_hit / len(detected.device_names),
        preset.gpu_count == len(detected.device_names),
        -_vram_error(preset, detected),
        -abs(preset.cpus - detected.cpu_count),
        preset.price_per_hour_usd is None,
        preset.strategy != "multi_gpu_learners",
    )


def _matches(preset: HardwarePreset, detected: DetectedHardware) -> bool:
    return (
        preset.gpu_count == len(detected.device_names)
        and _names_match(preset, detected.device_names)
        and _vram_error(preset, detected) <= VRAM_TOLERANCE
    )


def _names_match(preset: HardwarePreset, device_names: list[str]) -> bool:
    keys = [cuda_key(n, preset.cuda_names) for n in device_names]
    if any(k is None for k in keys):
        return False
    if preset.gpus is None:
        return True
    wanted = [cuda_key(g, preset.cuda_names) for g in preset.gpus]
    return sorted(map(str, keys)) == sorted(map(str, wanted))


def _vram_error(preset: HardwarePreset, detected: DetectedHardware) -> float:
    """Largest relative VRAM difference between the preset and any detected device."""
    declared = preset.vram_gb or 0.0
    if declared <= 0 or not detected.vram_gb:
        return float("inf")
    return max(abs(v - declared) / declared for v in detected.vram_gb)


def select_preset(
    cli_value: str | None,
    environ: Mapping[str, str],
    yaml_value: str | None,
    detected: DetectedHardware | None = None,
) -> tuple[HardwarePreset, str]:
    """The preset to use and why: --hardware, then GPU_PROFILE, then the experiment's key, then detection."""
    levels = (
        ("--hardware", cli_value),
        (ENV_VAR, environ.get(ENV_VAR)),
        ("experiment hardware key", yaml_value),
    )
    for reason, value in levels:
        if value is None or not value.strip():
            continue
        if is_auto(value):
            return _detected_choice(detected, f" ({reason} auto)")
        try:
            return load_preset(value), reason
        except InputError as err:
            raise InputError(f"{_label(reason, value)}: {err}") from None
    return _detected_choice(detected, "")


def _label(reason: str, value: str) -> str:
    if reason == ENV_VAR:
        return f"{ENV_VAR}={value}"
    if reason == "--hardware":
        return f"--hardware {value}"
    return f"experiment key hardware: {value}"


def _detected_choice(detected: DetectedHardware | None, suffix: str) -> tuple[HardwarePreset, str]:
    machine = detected if detected is not None else detect_hardware()
    preset, warning = preset_for(machine)
    what = machine.summary() if machine.cuda_available else "no CUDA"
    reason = f"detected: {what}{suffix}"
    return preset, f"{reason}; {warning}" if warning else reason
