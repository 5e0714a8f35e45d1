"""Several experiments side by side from one listing (experiments/api/side_by_side.py), through the real CLI.

`conf/agents.yaml --smoke-test` trains every shipped agent at once in one Ray cluster; a second listing has
one of its experiments killed mid-run (as the kernel's OOM killer would), which must leave the other
finishing, the killed one's MLflow runs closed as FAILED and the exit code saying the run was partial.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml
from mlflow.tracking import MlflowClient

from experiments.sweep.run_status import read_status
from tests.conftest import REPO

pytestmark = pytest.mark.slow

PARTIAL = 3


def _start(listing: Path, out: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{out / 'mlflow.db'}", "RAY_USAGE_STATS_ENABLED": "0"}
    return subprocess.Popen([sys.executable, "-m", "experiments.run", str(listing), "--smoke-test", "--no-dashboard",
                             "--address", "local", "--output", str(out), *extra], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _runs_of_group(out: Path) -> list:
    client = MlflowClient(f"sqlite:///{out / 'mlflow.db'}")
    experiments = [e.experiment_id for e in client.search_experiments()]
    return [r for r in client.search_runs(experiments) if r.data.tags.get("role") == "sweep"]


def test_shipped_agents_train_side_by_side(tmp_path: Path) -> None:
    process = _start(REPO / "conf/agents.yaml", tmp_path)
    output, _ = process.communicate(timeout=900)
    assert process.returncode == 0, output[-4000:]
    listed = yaml.safe_load((REPO / "conf/agents.yaml").read_text())["experiments"]
    parents = _runs_of_group(tmp_path)
    assert len(parents) == len(listed)
    assert len({r.data.tags["run_group"] for r in parents}) == 1  # one common tag
    assert all(r.info.status == "FINISHED" for r in parents)
    assert output.count("(out of sample)") >= len(listed)  # one evaluation per experiment
    assert "experiments side by side" in output  # the one table of every experiment's trials
    assert "ui --backend-store-uri" in output and output.count("then http://127.0.0.1:5000/#/experiments/") >= 1


def test_a_killed_experiment_leaves_the_others_running(tmp_path: Path) -> None:
    listing = tmp_path / "two.yaml"
    listing.write_text(yaml.safe_dump({"name": "two", "experiments": [
        str(REPO / "conf/dqn_cartpole.yaml"),
        {"file": str(REPO / "conf/dqn_testprio_iofrol.yaml"),
         "set": ["environment.env_config.max_cycles=80", "evaluation.evaluation_duration=4"]}]}))
    process = _start(listing, tmp_path / "out")
    victim = None
    deadline = time.time() + 300
    while victim is None and time.time() < deadline and process.poll() is None:
        time.sleep(0.5)
        for status_file in (tmp_path / "out" / "two").glob("*/dqn_cartpole.status.json"):
            if read_status(status_file).get("phase") == "training":
                victim = next(p for p in psutil.Process(process.pid).children()
                              if "dqn_cartpole.yaml" in " ".join(p.cmdline()))
                victim.send_signal(signal.SIGKILL)
    output, _ = process.communicate(timeout=600)
    assert victim is not None, output[-4000:]
    assert process.returncode == PARTIAL, output[-4000:]
    assert "killed (signal 9)" in output
    parents = {r.data.tags["mlflow.runName"].rsplit("-", 2)[0]: r for r in _runs_of_group(tmp_path / "out")}
    assert parents["dqn_cartpole"].info.status == "FAILED"  # closed for the dead child
    assert parents["dqn_testprio_iofrol"].info.status == "FINISHED"
    assert "dqn_testprio_iofrol: evaluation (out of sample)" in output
