"""Interrupted sweeps resume without redoing finished trials (a killed trial worker: test_faults.py)."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import REPO


def command(out: Path, *overrides: str, resume: bool = False, conf: str = "dqn_btc.yaml") -> list[str]:
    args = [sys.executable, "-m", "experiments.run", str(REPO / "conf" / conf), "--smoke-test",
            "--no-dashboard", "--output", str(out), "--set", f"tracking.tracking_uri=sqlite:///{out / 'mlflow.db'}",
            "--set", "evaluation.protocol=holdout"]  # one split: trial counts as in the tests below
    for item in overrides:
        args += ["--set", item]
    return args + (["--resume"] if resume else [])


def runs(out: Path, name: str = "dqn_btc"):
    client = MlflowClient(f"sqlite:///{out / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        return client, []
    return client, client.search_runs([experiment.experiment_id])


def wait_for(predicate, timeout: float, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc.poll() is not None:
            raise AssertionError(f"the sweep ended early with code {proc.returncode}")
        time.sleep(1)
    raise AssertionError("timed out")


@pytest.mark.parametrize("conf", ["ppo_btc.yaml"])
def test_interrupt_then_resume(tmp_path, conf):
    """Through the algorithm table (PPO): resumed, scored and registered like DQN, whose resumes after a dead
    tracking server and a storage outage are in test_faults.py."""
    name = conf.removesuffix(".yaml")
    overrides = ("tune.num_samples=3", "tune.max_concurrent_trials=1")
    proc = subprocess.Popen(command(tmp_path, *overrides, conf=conf), cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: any(r.info.status == "FINISHED" and r.data.tags.get("mlflow.parentRunId")
                             for r in runs(tmp_path, name)[1]), 240, proc)
        proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
        assert proc.wait(timeout=120) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
    client, before = runs(tmp_path, name)
    parent = next(r for r in before if r.data.tags.get("role") == "sweep")
    assert parent.info.status == "KILLED"
    assert not [r for r in before if r.info.status == "RUNNING"]
    finished = {r.data.tags["ray.trial_id"]: r.info.run_id for r in before
                if r.data.tags.get("mlflow.parentRunId") and r.info.status == "FINISHED"}

    resumed = subprocess.run(command(tmp_path, *overrides, resume=True, conf=conf), cwd=REPO, capture_output=True,
                             text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    client, after = runs(tmp_path, name)
    parents = [r for r in after if r.data.tags.get("role") == "sweep"]
    children = [r for r in after if r.data.tags.get("mlflow.parentRunId")]
    assert [p.info.run_id for p in parents] == [parent.info.run_id]  # reattached, no second parent
    assert parents[0].info.status == "FINISHED" and "eval/sharpe" in parents[0].data.metrics
    assert len(children) == 3 and all(r.info.status == "FINISHED" for r in children)
    for run_id in finished.values():  # finished trials were not trained again
        steps = [m.step for m in client.get_metric_history(run_id, "training_iteration")]
        assert steps == [1, 2]
    (version,) = client.search_model_versions(f"name='{name}-smoke'")
    assert version.tags["algorithm"] == name.split("_")[0] and version.tags["data"].endswith("BTC-USD_1h.parquet")
