"""Hardware presets: loading, plans for every strategy, selection precedence, detection, errors, CLI.

Fast and offline: no Ray, and torch only through `detect_hardware` on this CPU machine.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from envs.errors import InputError
from experiments.hardware import (
    DetectedHardware,
    HardwarePreset,
    available_presets,
    check_cluster,
    detect_hardware,
    estimate,
    load_preset,
    preset_dir,
    preset_for,
    resolve_plan,
    select_preset,
)
from experiments.hardware.detect import NVIDIA_DEVICE_PATHS

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "hardware"
PLANNED = [
    "cpu", "rtx_3060_ti", "rtx_3070", "rtx_3090", "rtx_4070_ti", "rtx_4080", "rtx_4090", "rtx_5090",
    "rtx_6000_ada", "l40s", "t4", "g4dn_xlarge", "a10g", "g5_2xlarge", "v100", "p3_2xlarge", "p3_8xlarge",
    "g5_12xlarge", "p4d_24xlarge", "a100_40gb", "a100_80gb", "h100", "h200", "workstation_3gpu",
]  # fmt: skip


def _gpu_box(names: list[str], vram: float, cpus: int = 16) -> DetectedHardware:
    return DetectedHardware(True, names, [vram] * len(names), cpus)


NO_GPU = DetectedHardware(False, [], [], 2)
ONE_4090 = _gpu_box(["NVIDIA GeForce RTX 4090"], 23.6)


# ---- presets load ---------------------------------------------------------------------------------


def test_preset_dir_is_the_repo_conf_hardware() -> None:
    assert preset_dir() == REPO / "conf" / "hardware"


def test_every_planned_preset_ships() -> None:
    assert set(PLANNED) <= set(available_presets())
    assert any(load_preset(n).strategy == "multi_gpu_learners" for n in available_presets())


@pytest.mark.parametrize("name", available_presets())
def test_every_preset_file_loads(name: str) -> None:
    preset = load_preset(name)
    assert preset.name == name
    assert preset.source, "every preset says where its numbers come from"
    assert preset.description
    if preset.gpu_count:
        assert preset.cuda_names, "GPU presets must be detectable"
        assert "declared, not measured" in preset.description


def test_prices_are_the_documented_list_prices() -> None:
    assert load_preset("p3_8xlarge").price_per_hour_usd == 12.24
    assert load_preset("g4dn_xlarge").price_per_hour_usd == 0.526
    assert load_preset("p4d_24xlarge").price_per_hour_usd == 32.77
    assert load_preset("a100_80gb").price_per_hour_usd is None
    assert "docs/hardware.md (AWS on-demand prices)" in load_preset("g5_12xlarge").source
    table = (REPO / "docs/hardware.md").read_text()
    for name in available_presets():  # one source for each price: the preset and the doc agree
        price = load_preset(name).price_per_hour_usd
        if price is not None and name not in ("rtx_3090", "rtx_4090"):
            assert f"| {price:g} |" in table, name


def test_nothing_points_to_notes_users_do_not_have() -> None:
    """Sources are docs/hardware.md or public facts, never the private notes this project started from."""
    pattern = re.compile(r"user(')?s? notes|the notes'|\b00[0-4]_[0-9a-f]{16}\.txt", re.I)
    files = [REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "conf").rglob("*.yaml"),
             *(REPO / "experiments").rglob("*.py"), *(REPO / "envs").rglob("*.py"), *(REPO / "algos").rglob("*.py")]
    offending = [f"{path.relative_to(REPO)}: {match.group(0)}" for path in files
                 for match in [pattern.search(path.read_text())] if match]
    assert not offending, offending
    for name in available_presets():
        if load_preset(name).gpu_count:
            assert "docs/hardware.md" in load_preset(name).source, name


def test_names_are_forgiving_and_paths_work() -> None:
    assert load_preset("RTX-4090").name == "rtx_4090"
    assert load_preset("p3.8xlarge").name == "p3_8xlarge"
    assert load_preset(str(DATA / "my_box.yaml")).gpu_count == 2


# ---- plans ----------------------------------------------------------------------------------------


def test_a100_80gb_shares_one_gpu_between_three_trials() -> None:
    plan = resolve_plan(load_preset("a100_80gb"), "1h", num_trials=10)
    assert plan.max_concurrent_trials == 3
    assert plan.num_learners == 0
    assert plan.num_gpus_per_learner == pytest.approx(1 / 3, abs=1e-4)
    assert plan.gpus_per_trial * 3 <= 1.0
    assert plan.train_batch_size_per_learner == 32  # the experiment's batch; 4096 only when opted in


def test_p3_8xlarge_runs_four_trials_on_one_gpu_each() -> None:
    plan = resolve_plan(load_preset("p3_8xlarge"), "1d", num_trials=10)
    assert (plan.max_concurrent_trials, plan.gpus_per_trial, plan.num_gpus_per_learner) == (4, 1.0, 1.0)


def test_workstation_runs_one_agent_per_gpu() -> None:
    plan = resolve_plan(load_preset("workstation_3gpu"), None, num_trials=6)
    assert (plan.max_concurrent_trials, plan.gpus_per_trial) == (3, 1.0)


def test_multi_gpu_learners_is_one_trial_across_all_gpus() -> None:
    preset = load_preset("p4d_24xlarge_ddp")
    plan = resolve_plan(preset, "1h", num_trials=5)
    assert plan.max_concurrent_trials == 1
    assert plan.num_learners == preset.gpu_count == 8
    assert plan.num_gpus_per_learner == 1.0
    assert plan.gpus_per_trial == 8.0
    assert plan.cpus_per_trial == 1 + 16 + 8


def test_cpu_has_no_gpu_anywhere_and_fills_the_cores() -> None:
    plan = resolve_plan(load_preset("cpu"), "1h", num_trials=5)
    assert (plan.num_learners, plan.num_gpus_per_learner, plan.gpus_per_trial) == (0, 0.0, 0.0)
    assert plan.max_concurrent_trials == 2
    assert resolve_plan(load_preset("cpu"), None, num_trials=1).max_concurrent_trials == 1


def test_the_preset_keeps_the_experiment_batch_unless_opted_in() -> None:
    preset = load_preset("rtx_4090")
    sizes = [resolve_plan(preset, tf, 1, 64).train_batch_size_per_learner for tf in ("1d", "1h", "4h", None)]
    assert sizes == [64, 64, 64, 64]
    scaled = [resolve_plan(preset, tf, 1, 64, "preset") for tf in ("1d", "1h", "4h", None)]
    assert [plan.train_batch_size_per_learner for plan in scaled] == [512, 768, 512, 512]
    assert scaled[1].lr_scale == pytest.approx(math.sqrt(768 / 64))  # rtx_4090 declares the sqrt rule
    assert "batch 64 -> 768" in scaled[1].batch_plan.describe(5e-4, 4.0)


def test_data_parallel_presets_split_the_update_batch() -> None:
    plan = resolve_plan(load_preset("p4d_24xlarge_ddp"), "1h", 1, 64)
    assert plan.num_learners == 8 and plan.train_batch_size_per_learner == 8
    uneven = resolve_plan(load_preset("workstation_3gpu_ddp"), "1h", 1, 32)  # the main job's batch on 3 GPUs
    assert uneven.update_batch == 32 and uneven.batch_plan.slices == (11, 11, 10)
    assert "11, 11, 10: each slice's loss weighted by its share" in uneven.batch_plan.describe()
    assert resolve_plan(load_preset("workstation_3gpu_ddp"), "1h", 1).train_batch_size_per_learner == 11  # 33 / 3


@pytest.mark.parametrize("name", available_presets())
def test_every_plan_fits_its_preset(name: str) -> None:
    preset = load_preset(name)
    plan = resolve_plan(preset, "1h", num_trials=100)
    assert plan.gpus_per_trial * plan.max_concurrent_trials <= preset.gpu_count + 1e-9
    assert plan.cpus_per_trial * plan.max_concurrent_trials <= preset.cpus
    assert plan.max_concurrent_trials >= 1
    if preset.strategy == "cpu":
        assert plan.gpus_per_trial == plan.num_gpus_per_learner == 0
    assert resolve_plan(preset, "1h", num_trials=1).max_concurrent_trials == 1


def test_zero_trials_is_an_input_error() -> None:
    with pytest.raises(InputError, match="number of trials"):
        resolve_plan(load_preset("cpu"), None, num_trials=0)


def test_plan_params_and_description() -> None:
    plan = resolve_plan(load_preset("rtx_4090"), "1h", num_trials=4)
    params = plan.as_params()
    assert all(k.startswith("hardware/") for k in params)
    assert all(isinstance(v, (str, int, float)) for v in params.values())
    assert params["hardware/preset"] == "rtx_4090"
    assert resolve_plan(load_preset("cpu"), None, 1).as_params()["hardware/gpu_model"] == "none"
    assert plan.describe().startswith("Using profile 'NVIDIA RTX 4090' (24GB VRAM): ")


# ---- estimate and cluster check -------------------------------------------------------------------


def _round_preset(price: float | None) -> HardwarePreset:
    return HardwarePreset(
        name="hand", gpu_model="X", gpu_count=4, vram_gb=16, cpus=8, memory_gb=32, price_per_hour_usd=price,
        strategy="trial_per_gpu", env_runners_per_trial=0, envs_per_env_runner=1,
        env_steps_per_second=100,
    )  # fmt: skip


def test_estimate_arithmetic_by_hand() -> None:
    preset = _round_preset(price=2.0)
    plan = resolve_plan(preset, None, num_trials=10)
    result = estimate(plan, preset, num_trials=10, env_steps_per_trial=36_000)
    # 10 trials, 4 at once -> 3 waves; 36,000 steps at 100/s = 0.1 h per wave, + 3 trial starts and the run's
    # start and scoring -> 0.3 h + (3 x 6 s + 35 s) at $2/h.
    assert (result.trials, result.trials_at_once, result.waves) == (10, 4, 3)
    assert result.training_hours == pytest.approx(0.3)
    assert result.hours == pytest.approx(0.3 + (3 * 6 + 35) / 3600)
    assert result.cost_usd == pytest.approx(2 * result.hours)
    assert "training 18.0 min + 3 trial start(s) x 6 s + 35 s to start and score" in result.describe()


def test_estimate_without_price_has_no_cost() -> None:
    preset = _round_preset(price=None)
    assert estimate(resolve_plan(preset, None, 1), preset, 1, 1000).cost_usd is None


def test_check_cluster_rejects_gpu_presets_on_a_cpu_cluster() -> None:
    plan = resolve_plan(load_preset("p3_8xlarge"), None, num_trials=4)
    with pytest.raises(InputError) as err:
        check_cluster(plan, {"CPU": 2.0})
    message = str(err.value)
    assert (
        "p3_8xlarge needs 1 GPU per trial" in message and "0 GPUs" in message and "--hardware cpu" in message
    )
    check_cluster(plan, {"CPU": 32.0, "GPU": 4.0})


def test_check_cluster_rejects_too_few_cpus() -> None:
    plan = resolve_plan(load_preset("p4d_24xlarge_ddp"), None, num_trials=1)
    with pytest.raises(InputError, match="25 CPUs per trial"):
        check_cluster(plan, {"CPU": 8.0, "GPU": 8.0})


def test_fractional_gpu_fits_a_single_gpu_cluster() -> None:
    plan = resolve_plan(load_preset("a100_80gb"), None, 3)
    assert plan.gpus_per_trial == pytest.approx(1 / 3, abs=1e-3) and plan.max_concurrent_trials == 3  # 3 per GPU
    assert check_cluster(plan, {"CPU": 8.0, "GPU": 1.0}) is None  # accepted: one trial needs a third of one GPU
    with pytest.raises(InputError, match="GPU"):
        check_cluster(plan, {"CPU": 8.0, "GPU": 0.0})  # the same plan on no GPU is refused


# ---- detection and selection ----------------------------------------------------------------------


def test_detect_without_cuda_maps_to_cpu() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    detected = detect_hardware()
    assert (detected.cuda_available, detected.device_names, detected.vram_gb) == (False, [], [])
    assert detected.cpu_count >= 1
    preset, warning = preset_for(detected)
    assert (preset.name, warning) == ("cpu", None)


@pytest.mark.parametrize(
    ("detected", "expected"),
    [
        (ONE_4090, "rtx_4090"),
        (_gpu_box(["NVIDIA A100-SXM4-80GB"], 79.1), "a100_80gb"),
        (_gpu_box(["NVIDIA A100-PCIE-40GB"], 39.4), "a100_40gb"),
        (_gpu_box(["NVIDIA A100-SXM4-40GB"] * 8, 39.4, cpus=96), "p4d_24xlarge"),
        (_gpu_box(["Tesla V100-SXM2-16GB"] * 4, 15.8, cpus=32), "p3_8xlarge"),
        (_gpu_box(["NVIDIA A10G"], 22.1, cpus=8), "a10g"),
        (_gpu_box(["NVIDIA L40S"], 44.5), "l40s"),
        (_gpu_box(["NVIDIA RTX 6000 Ada Generation"], 47.5), "rtx_6000_ada"),
        (_gpu_box(["NVIDIA GeForce RTX 3060 Ti", "NVIDIA GeForce RTX 3070", "NVIDIA GeForce RTX 3070"], 7.8),
         "workstation_3gpu"),
    ],
)  # fmt: skip
def test_detected_gpus_map_to_their_preset(detected: DetectedHardware, expected: str) -> None:
    preset, warning = preset_for(detected)
    assert (preset.name, warning) == (expected, None)


def test_generic_gpu_preset_beats_priced_cloud_instance_on_a_tie() -> None:
    preset, warning = preset_for(_gpu_box(["Tesla T4"], 14.6, cpus=4))
    assert (preset.name, warning) == ("t4", None)
    preset, _ = preset_for(_gpu_box(["Tesla T4"], 14.6, cpus=8))
    assert preset.name == "g4dn_2xlarge", "a closer CPU count still wins"


def test_unknown_gpu_falls_back_to_closest_with_warning() -> None:
    preset, warning = preset_for(_gpu_box(["NVIDIA GeForce RTX 4090"] * 2, 23.6))
    assert preset.name == "rtx_4090"
    assert warning is not None and "no hardware preset matches" in warning and "--hardware" in warning
    preset, warning = preset_for(_gpu_box(["NVIDIA GeForce RTX 2080"], 7.8, cpus=8))
    assert preset.vram_gb == 8 and warning is not None


def test_three_rtx_3070s_are_not_the_mixed_workstation() -> None:
    _, warning = preset_for(_gpu_box(["NVIDIA GeForce RTX 3070"] * 3, 7.8))
    assert warning is not None


def test_selection_precedence_all_four_levels() -> None:
    env = {"GPU_PROFILE": "a100_40gb"}
    assert _chosen("h100", env, "rtx_5090") == ("h100", "--hardware")
    assert _chosen(None, env, "rtx_5090") == ("a100_40gb", "GPU_PROFILE")
    assert _chosen(None, {}, "rtx_5090") == ("rtx_5090", "experiment hardware key")
    assert _chosen(None, {}, None) == ("rtx_4090", "detected: 1x NVIDIA GeForce RTX 4090 (23.6 GB), 16 CPUs")
    preset, reason = select_preset(None, {"GPU_PROFILE": ""}, None, NO_GPU)
    assert (preset.name, reason) == ("cpu", "detected: no CUDA")


def test_auto_at_any_level_means_detection() -> None:
    preset, reason = select_preset("auto", {"GPU_PROFILE": "h100"}, "h100", ONE_4090)
    assert preset.name == "rtx_4090" and reason.endswith("(--hardware auto)")


def test_selection_by_path() -> None:
    preset, reason = select_preset(str(DATA / "my_box.yaml"), {}, None, NO_GPU)
    assert (preset.name, reason) == ("my_box", "--hardware")


def _chosen(cli: str | None, env: dict[str, str], yaml_value: str | None) -> tuple[str, str]:
    preset, reason = select_preset(cli, env, yaml_value, ONE_4090)
    return preset.name, reason


# ---- errors ---------------------------------------------------------------------------------------


def test_unknown_name_lists_presets_and_closest_match() -> None:
    with pytest.raises(InputError) as err:
        load_preset("rtx4090")
    message = str(err.value)
    assert "did you mean 'rtx_4090'?" in message and "a100_80gb" in message and "\n" not in message


def test_unknown_name_from_env_var_says_where_it_came_from() -> None:
    with pytest.raises(InputError, match=r"^GPU_PROFILE=a100: unknown hardware preset 'a100'"):
        select_preset(None, {"GPU_PROFILE": "a100"}, None, NO_GPU)


@pytest.mark.parametrize(
    ("file", "fragment"),
    [
        ("bad_yaml.yaml", "not valid YAML at line"),
        ("unknown_key.yaml", "unknown key 'gpu_cout': did you mean 'gpu_count'?"),
        ("wrong_type.yaml", "gpu_count: Input should be a valid integer (got 'four')"),
        ("inconsistent.yaml", "strategy 'shared_gpu' needs trials_per_gpu >= 2"),
        ("not_a_mapping.yaml", "expected a mapping"),
        ("missing.yaml", "not found"),
    ],
)
def test_malformed_preset_file_names_file_and_problem(file: str, fragment: str) -> None:
    with pytest.raises(InputError) as err:
        load_preset(str(DATA / file))
    message = str(err.value)
    assert file in message and fragment in message and "\n" not in message


@pytest.mark.parametrize(("base", "edit", "fragment"), [
    ("a100_40gb", ("lr_rule: sqrt", "lr_rule: cubic"), "large_batch.lr_rule"),
    ("a100_40gb", ("default_batch_size: 1024", "default_batch_size: -5"), "large_batch.default_batch_size"),
    ("a100_40gb", ("mixed_precision: bf16", "mixed_precision: fp8"), "mixed_precision"),
    ("cpu", ("strategy: cpu", "strategy: cpu\nmixed_precision: bf16"), "GPU settings"),
    ("cpu", ("strategy: cpu", "strategy: cpu\ndefault_batch_size: 768"), "unknown key 'default_batch_size'"),
])
def test_bad_learning_keys_in_a_preset_name_file_and_key(base: str, edit: tuple[str, str], fragment: str,
                                                           tmp_path: Path) -> None:
    text = (REPO / "conf" / "hardware" / f"{base}.yaml").read_text()
    assert edit[0] in text
    path = tmp_path / f"{base}.yaml"
    path.write_text(text.replace(edit[0], edit[1], 1))
    with pytest.raises(InputError) as err:
        load_preset(str(path))
    message = str(err.value)
    assert str(path) in message and fragment in message and "\n" not in message


def test_name_must_match_file_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "renamed.yaml").write_text((DATA / "my_box.yaml").read_text())
    monkeypatch.setattr("experiments.hardware.presets.preset_dir", lambda: tmp_path)
    with pytest.raises(InputError, match=r"renamed.yaml: key 'name' is 'my_box'"):
        load_preset("renamed")


def test_one_trial_needing_more_cpus_than_the_box_is_rejected(tmp_path: Path) -> None:
    text = (DATA / "my_box.yaml").read_text().replace("env_runners_per_trial: 1", "env_runners_per_trial: 40")
    (tmp_path / "greedy.yaml").write_text(text)
    with pytest.raises(InputError, match=r"greedy.yaml: one trial needs 41 CPUs .* but cpus is 12"):
        load_preset(str(tmp_path / "greedy.yaml"))


# ---- CLI and import cost --------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "experiments.hardware", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "args",
    [("list",), ("show", "a100_80gb"), ("show", str(DATA / "my_box.yaml"), "--trials", "9"), ("detect",)],
)
def test_cli_commands_succeed(args: tuple[str, ...]) -> None:
    result = _cli(*args)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()


def test_cli_list_shows_every_preset() -> None:
    stdout = _cli("list").stdout
    assert all(name in stdout for name in available_presets())


def test_cli_show_prints_plans_for_1h_and_1d() -> None:
    stdout = _cli("show", "p3_8xlarge", "--trials", "10", "--env-steps", "200000").stdout
    assert (
        "batch 32 (1h)" in stdout
        and "batch 32 -> 512, lr x 4 (sqrt rule)" in stdout
        and "batch 32 -> 384" in stdout
        and "3 wave(s)" in stdout
        and "$5.28" in stdout  # 25.0 min of training + 3 trial starts + the run's start and scoring
    )


@pytest.mark.parametrize("args", [("show", "nosuch"), ("show", str(DATA / "unknown_key.yaml"))])
def test_cli_input_errors_exit_2_without_traceback(args: tuple[str, ...]) -> None:
    result = _cli(*args)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1


def test_detection_without_nvidia_driver_skips_torch() -> None:
    if not sys.platform.startswith("linux") or any(Path(p).exists() for p in NVIDIA_DEVICE_PATHS):
        pytest.skip("only meaningful on a Linux machine without an NVIDIA driver")
    code = "import sys, experiments.hardware as h; h.detect_hardware(); print('torch' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.stdout.split() == ["False"]


def test_import_pulls_in_neither_ray_nor_torch() -> None:
    code = "import sys, experiments.hardware; print('ray' in sys.modules, 'torch' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.stdout.split() == ["False", "False"]


def test_every_preset_waves_are_consistent() -> None:
    for name in available_presets():
        preset = load_preset(name)
        plan = resolve_plan(preset, None, num_trials=7)
        assert estimate(plan, preset, 7, 1000).waves == math.ceil(7 / plan.max_concurrent_trials)


def test_every_shipped_preset_plans_every_shipped_conf_or_names_a_batch_that_works() -> None:
    """The issue: workstation_3gpu_ddp refused the main job. FastDQN splits any batch; a stock RLlib learner
    (PPO, implementation: rllib) that cannot is refused in one line naming batches that do split."""
    from experiments.api.preflight import plan_resources
    from experiments.config.load import load_experiment
    from tests.conftest import shipped_experiments

    refused = []
    for conf in shipped_experiments():
        exp = load_experiment(conf, [])
        for name in available_presets():
            try:
                plan_resources(exp, load_preset(name), "test")
            except InputError as error:
                assert not exp.spec.splits_batch_unevenly(exp.training), (conf.name, name, error)
                assert "set training.train_batch_size_per_learner to" in str(error) and "\n" not in str(error)
                refused.append((conf.name, name))
    assert all(algorithm_of(conf) != "dqn" for conf, _ in refused), refused


def algorithm_of(conf_name: str) -> str:
    from experiments.config.load import load_experiment
    from tests.conftest import REPO

    return load_experiment(REPO / "conf" / conf_name, []).algorithm


def test_a_plan_that_leaves_cpus_idle_says_why() -> None:
    from experiments.hardware.plan import idle_cpus

    a100 = load_preset("a100_40gb")
    line = idle_cpus(resolve_plan(a100, "1h", 16), a100, 16)
    assert line.startswith("uses 6 of the preset's 16 CPUs: 2 trial(s) at once x 3 CPU, because the GPUs take 2")
    assert "the experiment has 1 trial(s)" in idle_cpus(resolve_plan(a100, "1h", 1), a100, 1)
    cpu = load_preset("cpu")
    assert idle_cpus(resolve_plan(cpu, "1h", 16), cpu, 16) is None  # both cores busy
