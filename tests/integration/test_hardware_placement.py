"""Ray schedules Tune trials the way a hardware plan says, on GPUs this CPU machine only declares.

Ray hands out GPU ids for declared GPUs without touching CUDA, so a CPU-only function
trainable shows the placement: each trial records its GPU ids and when it ran, and
waits (up to a timeout) until as many trials run as the plan promises, so the observed
overlap is the scheduler's limit rather than start-up jitter on two cores.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from envs.errors import InputError
from experiments.hardware import ResourcePlan, check_live_cluster, load_preset, resolve_plan

ray = pytest.importorskip("ray")
tune = pytest.importorskip("ray.tune")


DECLARED_CPUS = 8
WAIT_FOR_PEERS_S = 20.0


def _running(shared: Path) -> int:
    return len(list(shared.glob("start_*"))) - len(list(shared.glob("end_*")))


def _record_placement(config: dict[str, Any]) -> None:
    """Trainable: note GPU ids and start/end times, overlapping with as many peers as expected."""
    shared = Path(config["shared"])
    trial_id = tune.get_context().get_trial_id()
    start = time.time()
    (shared / f"start_{trial_id}").touch()
    while _running(shared) < config["expect"] and time.time() - start < WAIT_FOR_PEERS_S:
        time.sleep(0.1)
    time.sleep(0.5)
    record = {"gpu_ids": [str(i) for i in ray.get_gpu_ids()], "start": start, "end": time.time()}
    (shared / f"record_{trial_id}.json").write_text(json.dumps(record))
    (shared / f"end_{trial_id}").touch()
    tune.report({"done": 1})


@pytest.fixture(scope="module")
def fake_gpu_ray() -> Iterator[Callable[[int], None]]:
    """Start Ray declaring `num_gpus` GPUs (restarting only when the count changes); shut down at the end."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    declared: dict[str, int] = {}

    def start(num_gpus: int) -> None:
        if declared.get("gpus") == num_gpus and ray.is_initialized():
            return
        if ray.is_initialized():
            ray.shutdown()
        ray.init(
            num_cpus=DECLARED_CPUS,
            num_gpus=num_gpus,
            include_dashboard=False,
            logging_level="ERROR",
            log_to_driver=False,
        )
        declared["gpus"] = num_gpus

    # Ray workers cannot import this test module (pytest put its folder on sys.path), so ship it by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    if ray.is_initialized():
        ray.shutdown()
    yield start
    ray.shutdown()


def _sweep(plan: ResourcePlan, num_trials: int, storage: Path) -> list[dict[str, Any]]:
    """Run `num_trials` placement trials with the plan's GPU share and concurrency; return their records."""
    shared = storage / "shared"
    shared.mkdir()
    # One CPU per trial: the sleeping trainable has no env runners, and the GPU share is what is under test.
    trainable = tune.with_resources(_record_placement, {"cpu": 1, "gpu": plan.gpus_per_trial})
    tuner = tune.Tuner(
        trainable,
        param_space={"shared": str(shared), "expect": plan.max_concurrent_trials},
        tune_config=tune.TuneConfig(num_samples=num_trials, max_concurrent_trials=plan.max_concurrent_trials),
        run_config=tune.RunConfig(storage_path=str(storage / "tune"), name=plan.preset, verbose=0),
    )
    results = tuner.fit()
    assert not results.errors, results.errors
    return [json.loads(p.read_text()) for p in sorted(shared.glob("record_*.json"))]


def _max_overlap(records: list[dict[str, Any]]) -> int:
    """Most trials running at the same instant (probing at every start time)."""
    return max(sum(r["start"] <= probe["start"] < r["end"] for r in records) for probe in records)


def test_p3_8xlarge_runs_four_trials_on_distinct_gpus(fake_gpu_ray, tmp_path: Path) -> None:
    fake_gpu_ray(4)
    plan = resolve_plan(load_preset("p3_8xlarge"), "1h", num_trials=4)
    check_live_cluster(plan)
    records = _sweep(plan, 4, tmp_path)
    assert len(records) == 4
    assert all(len(r["gpu_ids"]) == 1 for r in records)
    assert len({r["gpu_ids"][0] for r in records}) == 4
    assert _max_overlap(records) == 4


def test_a100_80gb_packs_three_trials_onto_one_gpu(fake_gpu_ray, tmp_path: Path) -> None:
    fake_gpu_ray(1)
    plan = resolve_plan(load_preset("a100_80gb"), "1h", num_trials=6)
    check_live_cluster(plan)
    records = _sweep(plan, 6, tmp_path)
    assert len(records) == 6
    assert all(r["gpu_ids"] == ["0"] for r in records)
    assert _max_overlap(records) == 3


def test_live_check_rejects_a_plan_larger_than_the_cluster(fake_gpu_ray) -> None:
    fake_gpu_ray(1)
    plan = resolve_plan(load_preset("p4d_24xlarge_ddp"), "1h", num_trials=1)
    with pytest.raises(InputError, match="needs 8 GPU per trial, the Ray cluster has 1 GPUs"):
        check_live_cluster(plan)


def test_gpu_preset_on_a_cluster_without_gpus_fails_before_any_trial(tmp_path, capsys, joined):
    """On the session's Ray, which declares no GPU."""
    from experiments.run import main
    from tests.conftest import REPO

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    code = main([str(REPO / "conf/dqn_btc.yaml"), "--hardware", "p3_8xlarge", "--smoke-test", "--no-dashboard",
                 "--output", str(tmp_path), "--set", f"tracking.tracking_uri={uri}", *joined])
    assert code == 2
    assert "needs 1 GPU per trial, the Ray cluster has 0 GPUs" in capsys.readouterr().err
    assert not list(tmp_path.glob("dqn_btc/tune/*"))  # no trial was started
