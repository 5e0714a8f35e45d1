"""Several experiments side by side from one listing (experiments/api/side_by_side.py), through the real CLI.

`conf/agents.yaml --smoke-test` trains every shipped agent at once in one Ray cluster (its execution agent's sweep is
conf/dqn_testprio_iofrol.yaml's one smoke run, read here), with one of them, the BTC trader, killed mid-run (as the
kernel's OOM killer would): the others must finish, the killed one's MLflow runs be closed as FAILED and the exit
code say the run was partial.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest
import yaml
from mlflow.tracking import MlflowClient

import envs
from envs.agents.testprio.evaluate import LEARNED_BASELINE
from experiments.sweep.run_status import read_status
from tests.conftest import REPO

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


@pytest.fixture(scope="module")
def agents(tmp_path_factory) -> tuple[subprocess.Popen, str, Path, psutil.Process | None]:
    """conf/agents.yaml --smoke-test from the command line, with its BTC trader killed mid-training (as the kernel's OOM
    killer would): the listing, its output, its folder (the MLflow store in it is the shipped execution agent's one
    smoke run, read below) and the killed process."""
    out = tmp_path_factory.mktemp("agents")
    process = _start(REPO / "conf/agents.yaml", out)
    victim = None
    deadline = time.time() + 300
    while victim is None and time.time() < deadline and process.poll() is None:
        time.sleep(0.5)
        for status_file in (out / "agents").glob("*/dqn_btc.status.json"):
            if read_status(status_file).get("phase") == "training":
                victim = next(p for p in psutil.Process(process.pid).children()
                              if "dqn_btc.yaml" in " ".join(p.cmdline()))
                victim.send_signal(signal.SIGKILL)
    output, _ = process.communicate(timeout=900)
    return process, output, out, victim


def test_shipped_agents_train_side_by_side_and_a_killed_one_leaves_the_others_finishing(agents) -> None:
    """One listing, one Ray cluster, one live table and one run_group tag; the killed experiment's MLflow runs are
    closed as FAILED, the others finish with their evaluations, and the exit code says the run was partial."""
    process, output, out, victim = agents
    assert victim is not None, output[-4000:]
    assert process.returncode == PARTIAL, output[-4000:]
    assert "killed (signal 9)" in output
    listed = yaml.safe_load((REPO / "conf/agents.yaml").read_text())["experiments"]
    parents = {r.data.tags["mlflow.runName"].rsplit("-", 2)[0]: r for r in _runs_of_group(out)}
    assert sorted(parents) == sorted(Path(name).stem for name in listed)
    assert len({r.data.tags["run_group"] for r in parents.values()}) == 1  # one common tag
    assert parents["dqn_btc"].info.status == "FAILED"  # closed for the dead child
    for name in ("dqn_testprio_iofrol", "dqn_testgen_tomllib"):
        assert parents[name].info.status == "FINISHED", name
        assert re.search(rf"{name}: \S+ \(out of sample\)", output), name  # its evaluation table
    assert "experiments side by side" in output  # the one table of every experiment's trials
    assert "ui --backend-store-uri" in output and output.count("then http://127.0.0.1:5000/#/experiments/") >= 1


def test_the_execution_agents_sweep_makes_nested_runs_and_a_table_of_the_agent_and_four_baselines(agents) -> None:
    """conf/dqn_testprio_iofrol.yaml's smoke run, as the listing ran it."""
    _, _, out, _ = agents
    client = MlflowClient(f"sqlite:///{out / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("dqn_testprio_iofrol").experiment_id])
    parents = [r for r in runs if r.data.tags.get("role") == "sweep"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(parents) == 1 and len(children) == 2
    assert all(r.info.status == "FINISHED" for r in runs)
    assert "eval/apfd" in parents[0].data.metrics and "eval/nrpa" in parents[0].data.metrics
    for child in children:
        history = client.get_metric_history(child.info.run_id, "env_runners/num_env_steps_sampled_lifetime")
        assert [m.step for m in history] == [1, 2]
    artifacts = {a.path for a in client.list_artifacts(parents[0].info.run_id, "evaluation")}
    assert {"evaluation/evaluation.csv", "evaluation/evaluation.png"} <= artifacts
    table = pd.read_csv(client.download_artifacts(parents[0].info.run_id, "evaluation/evaluation.csv"), index_col=0)
    baselines = [b.name for b in envs.family("agents/TestPrioritization-v0").baseline_table()]  # read, never pinned
    assert list(table.index) == ["agent", LEARNED_BASELINE, *baselines]
    assert {"apfd", "napfd", "nrpa", "cycles"} <= set(table.columns)
    assert table["cycles"].nunique() == 1 and table.loc["agent", "cycles"] > 0  # every strategy on the same cycles
    assert table.loc["optimal", "apfd"] >= table[["apfd"]].max().max() - 1e-12
    assert table.loc["optimal", "nrpa"] == pytest.approx(1.0)
