"""Hardware presets: the strict model of `conf/hardware/<name>.yaml` and how to load one.

A preset describes a machine (GPUs, CPUs, price) and how trials should use it (strategy,
fractional GPUs, env runners, batch size per timeframe). Presets are data so a user adds
one by dropping a YAML file into `conf/hardware/` or by passing a path; every mistake in
such a file is an `InputError` that names the file and the key.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from envs.errors import InputError
from envs.validation import did_you_mean, validate
from experiments.config.files import safe_load

Strategy = Literal["cpu", "trial_per_gpu", "shared_gpu", "multi_gpu_learners"]

_TIMEFRAME = re.compile(r"^[1-9][0-9]*(s|m|h|d|w|M)$")
_AUTO = "auto"


class LargeBatch(BaseModel):
    """A bigger batch per update for this machine and the learning-rate rule that must go with it; used only
    when an experiment opts in (`training.batch_scaling: preset`, see experiments/hardware/batch.py)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    lr_rule: Literal["linear", "sqrt"]
    batch_size_per_timeframe: dict[str, int] = Field(default_factory=dict)
    default_batch_size: int = Field(ge=1)


class HardwarePreset(BaseModel):
    """One machine and the way trials share it; see conf/hardware/*.yaml for examples."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str = Field(min_length=1)
    description: str = ""
    source: str = ""
    gpu_model: str | None = None
    gpu_count: int = Field(ge=0)
    vram_gb: float | None = Field(default=None, gt=0)
    gpus: list[str] | None = None
    cpus: int = Field(ge=1)
    memory_gb: float = Field(gt=0)
    price_per_hour_usd: float | None = Field(default=None, ge=0)
    large_batch: LargeBatch | None = None
    # GPU knobs of the FastDQN learner (algos/dqn/fast_learner.py): autocast dtype, and torch.compile of its
    # forward pass (RLlib's torch_compile_learner_* settings choose backend and mode).
    mixed_precision: Literal["none", "bf16", "fp16"] = "none"
    torch_compile_learner: bool = False
    trials_per_gpu: int = Field(default=1, ge=1)
    strategy: Strategy
    env_runners_per_trial: int = Field(ge=0)
    envs_per_env_runner: int = Field(ge=1)
    cpus_per_env_runner: float = Field(default=1.0, gt=0)
    env_steps_per_second: float = Field(gt=0)
    cuda_names: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> HardwarePreset:
        """Reject combinations that would make the resource plan meaningless."""
        _check_gpu_fields(self)
        _check_strategy(self)
        _check_learning_knobs(self)
        _check_cpus(self)
        return self


def learner_count(preset: HardwarePreset) -> int:
    """Remote RLlib learners per trial: one per GPU for data parallel, else the local learner."""
    return preset.gpu_count if preset.strategy == "multi_gpu_learners" else 0


def cpus_per_trial(preset: HardwarePreset) -> float:
    """CPUs one trial reserves: main process + env runners + one per remote learner.

    Mirrors RLlib's `default_resource_request` with `num_cpus_per_learner=1`, so the
    concurrency computed here is what Tune can actually schedule.
    """
    runners = preset.env_runners_per_trial * preset.cpus_per_env_runner
    return 1 + runners + learner_count(preset)


def _check_gpu_fields(preset: HardwarePreset) -> None:
    if preset.gpu_count == 0:
        if preset.gpu_model is not None or preset.vram_gb is not None or preset.gpus:
            raise ValueError("gpu_count is 0: set gpu_model, vram_gb and gpus to null (or raise gpu_count)")
        return
    if preset.gpu_model is None or preset.vram_gb is None:
        raise ValueError(f"gpu_count is {preset.gpu_count}: set gpu_model and vram_gb (per GPU)")
    if preset.gpus is not None:
        if len(preset.gpus) != preset.gpu_count:
            raise ValueError(f"gpus lists {len(preset.gpus)} models but gpu_count is {preset.gpu_count}")
        unmatched = [g for g in preset.gpus if preset.cuda_names and cuda_key(g, preset.cuda_names) is None]
        if unmatched:
            raise ValueError(f"gpus entry {unmatched[0]!r} contains none of cuda_names {preset.cuda_names}")


def _check_strategy(preset: HardwarePreset) -> None:
    if (preset.strategy == "cpu") != (preset.gpu_count == 0):
        raise ValueError("strategy 'cpu' goes with gpu_count 0, every other strategy needs gpu_count >= 1")
    if preset.strategy == "multi_gpu_learners" and preset.gpu_count < 2:
        raise ValueError("strategy 'multi_gpu_learners' needs gpu_count >= 2 (use trial_per_gpu for one GPU)")
    if preset.strategy == "shared_gpu" and preset.trials_per_gpu < 2:
        raise ValueError("strategy 'shared_gpu' needs trials_per_gpu >= 2 (use trial_per_gpu for 1)")
    if preset.strategy != "shared_gpu" and preset.trials_per_gpu != 1:
        raise ValueError(
            f"trials_per_gpu only applies to strategy 'shared_gpu'; set it to 1 for {preset.strategy!r}"
        )


def _check_learning_knobs(preset: HardwarePreset) -> None:
    if preset.strategy == "cpu" and (preset.mixed_precision != "none" or preset.torch_compile_learner):
        raise ValueError("mixed_precision and torch_compile_learner are GPU settings: set them to none/false "
                         "for strategy 'cpu'")
    for timeframe, size in (preset.large_batch.batch_size_per_timeframe.items() if preset.large_batch else ()):
        if not _TIMEFRAME.match(timeframe):
            raise ValueError(f"large_batch.batch_size_per_timeframe key {timeframe!r} is not a timeframe "
                             "like 1m, 1h, 1d")
        if size < 1:
            raise ValueError(f"large_batch.batch_size_per_timeframe[{timeframe!r}] must be >= 1, got {size}")


def _check_cpus(preset: HardwarePreset) -> None:
    needed = cpus_per_trial(preset)
    if needed > preset.cpus:
        raise ValueError(
            f"one trial needs {needed:g} CPUs (main process + env runners + learners) but cpus is "
            f"{preset.cpus}: lower env_runners_per_trial or raise cpus"
        )


def cuda_key(device_name: str, cuda_names: list[str]) -> str | None:
    """The longest of `cuda_names` inside `device_name`, ignoring case: 'RTX 3060 Ti' beats 'RTX 3060'."""
    lowered = device_name.lower()
    hits = [n for n in cuda_names if n.lower() in lowered]
    return max(hits, key=len) if hits else None


def preset_dir() -> Path:
    """`conf/hardware` of the repository this package lives in (experiments/hardware/ -> repo root)."""
    return Path(__file__).resolve().parents[2] / "conf" / "hardware"


def available_presets() -> list[str]:
    """Names of the shipped presets, sorted."""
    return sorted(p.stem for p in preset_dir().glob("*.yaml"))


def load_all_presets() -> list[HardwarePreset]:
    """Every shipped preset; a malformed file anywhere is an InputError naming it."""
    return [load_preset(name) for name in available_presets()]


def load_preset(name_or_path: str) -> HardwarePreset:
    """A preset by name (conf/hardware/<name>.yaml) or by path to a YAML file.

    Names are forgiving about case and separators ("RTX-4090", "p3.8xlarge") because users
    copy them from GPU and instance names; paths are taken literally.
    """
    if _looks_like_path(name_or_path):
        path = Path(name_or_path).expanduser()
        if not path.is_file():
            raise InputError(
                f"hardware preset file {path} not found: pass an existing YAML file or a preset name"
            )
        return _parse_file(path, expected_name=None)
    name = normalize_name(name_or_path)
    path = preset_dir() / f"{name}.yaml"
    if not path.is_file():
        raise InputError(_unknown_name_message(name_or_path))
    return _parse_file(path, expected_name=name)


def normalize_name(name: str) -> str:
    """Lower-case and turn '-', '.' and spaces into '_' (p3.8xlarge -> p3_8xlarge)."""
    return re.sub(r"[-. ]+", "_", name.strip().lower())


def is_auto(value: str | None) -> bool:
    """'auto' (any case) means: detect the hardware instead of naming a preset."""
    return value is not None and value.strip().lower() == _AUTO


def _looks_like_path(value: str) -> bool:
    return "/" in value or "\\" in value or value.endswith((".yaml", ".yml"))


def _unknown_name_message(name: str) -> str:
    names = available_presets()
    return (
        f"unknown hardware preset '{name}'{did_you_mean(normalize_name(name), names)}; available: {', '.join(names)}; "
        f"or pass a path to a YAML file like {preset_dir() / 'cpu.yaml'}"
    )


def _parse_file(path: Path, expected_name: str | None) -> HardwarePreset:
    data = _read_mapping(path)
    preset = validate(HardwarePreset, data, str(path))
    if expected_name is not None and preset.name != expected_name:
        raise InputError(
            f"{path}: key 'name' is '{preset.name}' but the file is {expected_name}.yaml; make them equal"
        )
    return preset


def _read_mapping(path: Path) -> dict[str, Any]:
    try:
        data = safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or type(err).__name__
        raise InputError(f"{path}: not valid YAML{where} ({problem}); fix the syntax") from None
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: cannot read the file ({err})") from None
    if not isinstance(data, dict):
        raise InputError(
            f"{path}: expected a mapping of keys like 'name:', 'gpu_count:', got {type(data).__name__}"
        )
    return data
