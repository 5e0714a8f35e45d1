"""Faults outside the run end it in one line with the way back, and the way back works; a lost trial makes the
result partial, never success. Real servers on loopback: `mlflow server` killed and started again on its port,
moto's S3 server stopped and started again (its objects kept), a 2 MB tmpfs as the output folder. Measured
results of each fault, resumes after an S3 outage included: docs/faults.md.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import REPO
from tests.servers import LOOPBACK, TEST_CREDENTIALS, MlflowServer, free_port

# How long a fault takes to end the run is the waits it is configured with (MLflow's retries and timeouts, one S3
# attempt below: tests/unit/test_fault_handling.py holds them), not a time these tests measure: they assert that the
# run ends on its own, in one line. This bound only keeps a hung run from hanging CI: a whole smoke run (Ray's start,
# training, scoring) on a machine several times busier than a quiet one.
RUN_BOUND_S = 900

# Long enough (12 iterations of 500 env steps) to pull a server away while the trial trains.
LONG = ("evaluation.protocol=holdout", "tune.search_space={}", "tune.num_samples=1",
        "tune.stop={training_iteration: 12}",
        "reporting.min_sample_timesteps_per_iteration=500")


def command(out: Path, tracking_uri: str, *overrides: str, storage: str | None = None) -> list[str]:
    args = [sys.executable, "-m", "experiments.run", str(REPO / "conf" / "dqn_btc.yaml"), "--smoke-test",
            "--no-dashboard", "--output", str(out), "--set", f"tracking.tracking_uri={tracking_uri}"]
    for item in overrides:
        args += ["--set", item]
    return args + (["--storage", storage] if storage else [])


def start(args: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    with open(log, "w") as out:
        return subprocess.Popen(args, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env=env)


def wait_for(predicate, timeout: float, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc.poll() is not None:
            raise AssertionError(f"the run ended early ({proc.returncode}):\n{log.read_text()[-3000:]}")
        time.sleep(0.5)
    raise AssertionError(f"timed out:\n{log.read_text()[-3000:]}")


def one_line_fault(text: str, names: str) -> None:
    """The run's last words: one `error:` line naming what failed, and the resume command; no traceback."""
    assert "Traceback" not in text, text[-3000:]
    errors = [line for line in text.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and names in errors[0], text[-2000:]
    assert "--resume" in text.split(errors[0], 1)[1]


def resume(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*args, "--resume"], cwd=REPO, capture_output=True, text=True, timeout=RUN_BOUND_S,
                          env=env)


def steps_of_every_run(client: MlflowClient) -> dict[str, list[int]]:
    """Each trial run's logged training iterations ({} before the experiment exists)."""
    experiment = client.get_experiment_by_name("dqn_btc")
    if experiment is None:
        return {}
    return {run.info.run_id: [m.step for m in client.get_metric_history(run.info.run_id, "training_iteration")]
            for run in client.search_runs([experiment.experiment_id])
            if run.data.tags.get("mlflow.parentRunId")}


def test_a_tracking_server_that_dies_ends_the_run_in_one_line_and_resume_closes_and_continues(tmp_path):
    server = MlflowServer(f"sqlite:///{tmp_path / 'server.db'}", tmp_path / "server.log",
                          ("--artifacts-destination", str(tmp_path / "artifacts")))
    try:
        args = command(tmp_path / "out", server.start(), *LONG)
        log = tmp_path / "run.log"
        run = start(args, log)
        try:
            client = MlflowClient(server.url)
            wait_for(lambda: any(steps_of_every_run(client).values()), RUN_BOUND_S, run, log)
            server.kill()
            assert run.wait(timeout=RUN_BOUND_S) == 4, log.read_text()[-3000:]
        finally:
            if run.poll() is None:
                run.kill()
        text = log.read_text()
        one_line_fault(text, f"the MLflow tracking server {server.url} stopped answering")
        assert "pending_closures.json" in text  # the parent could not be closed: recorded for the next run

        server.start()  # same port, same store
        resumed = resume(args)
        assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
        assert "an earlier run could not: its tracking server was down" in resumed.stdout
        assert not (tmp_path / "out" / "dqn_btc" / "pending_closures.json").exists()
        runs = client.search_runs([client.get_experiment_by_name("dqn_btc").experiment_id])
        assert {r.info.status for r in runs} == {"FINISHED"}, [(r.info.run_name, r.info.status) for r in runs]
        (steps,) = steps_of_every_run(client).values()
        assert steps == list(range(1, 13)), steps  # the history continues: no step twice, none restarted
    finally:
        server.stop()


def test_a_storage_outage_ends_the_run_in_one_line_and_leaves_a_resumable_sweep(tmp_path):
    """The outage outlasts the retries. After it, the sweep in S3 is whole: its state file reads back and every
    checkpoint it names for an unfinished trial is there (the check `--resume` makes first; a resume itself is
    run in the tracking-server test above)."""
    import boto3
    from moto.server import ThreadedMotoServer

    from experiments.storage.filesystem import resolve_storage
    from experiments.storage.resume_check import check_resumable
    from experiments.storage.sweep_state import sweep_to_resume

    port = free_port()
    endpoint = f"http://{LOOPBACK}:{port}"
    s3 = ThreadedMotoServer(ip_address=LOOPBACK, port=port, verbose=False)
    s3.start()
    try:
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                     aws_secret_access_key="testing").create_bucket(Bucket="team")
        env = {**os.environ, **TEST_CREDENTIALS, "RLPLATFORM_S3_ATTEMPTS": "1"}
        tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
        uri = f"s3://team/runs?endpoint_override={endpoint}"
        args = command(tmp_path / "out", tracking, *LONG, "tune.max_failures=1", storage=uri)
        log = tmp_path / "run.log"
        run = start(args, log, env)
        try:
            client = MlflowClient(tracking)
            wait_for(lambda: any(len(s) >= 2 for s in steps_of_every_run(client).values()), RUN_BOUND_S, run, log)
            s3.stop()  # the store goes away with its objects kept, as an outage would
            s3 = None
            code = run.wait(timeout=RUN_BOUND_S)
        finally:
            if run.poll() is None:
                run.kill()
        s3 = ThreadedMotoServer(ip_address=LOOPBACK, port=port, verbose=False)
        s3.start()
        text = log.read_text()
        assert code == 4, text[-3000:]
        one_line_fault(text, f"cannot reach {endpoint}")
        assert "restored from checkpoint_" in text  # the retry, in one line
        runs = client.search_runs([client.get_experiment_by_name("dqn_btc").experiment_id])
        assert {r.info.status for r in runs} == {"FAILED"}, [(r.info.run_name, r.info.status) for r in runs]

        storage = resolve_storage(uri, None, tmp_path / "out", "test", env)
        sweep, _ = sweep_to_resume(storage, "dqn_btc")
        # Raises when the state is cut short or names a checkpoint that is missing or partly written; the trial
        # continues from the checkpoint the state names (or from the start when it was saved before the first).
        assert sweep.status in ("running", "failed") and check_resumable(storage, sweep.tune_dir, "start over") <= 1
    finally:
        if s3 is not None:
            s3.stop()


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MB tmpfs (mounting needs root, as in CI; elsewhere the test is skipped)."""
    mount = tmp_path / "small"
    mount.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_ends_in_one_line_and_resume_refuses_damaged_state(tmp_path, small_disk):
    args = command(small_disk, f"sqlite:///{tmp_path / 'mlflow.db'}", "evaluation.protocol=holdout",
                   "tune.search_space={}", "tune.num_samples=1", "tune.max_failures=0")
    log = tmp_path / "run.log"
    code = start(args, log).wait(timeout=RUN_BOUND_S)
    text = log.read_text()
    assert code == 4, text[-3000:]
    one_line_fault(text, "the disk is full")
    assert not [p for p in small_disk.rglob("fault-*.log") if not p.stat().st_size]  # no empty log left there

    resumed = resume(args)
    assert resumed.returncode == 4, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    refusal = [line for line in resumed.stdout.splitlines() if line.startswith("error: ")]
    assert len(refusal) == 1 and "start over with" in refusal[0] and "Traceback" not in resumed.stderr
    assert "Restarting experiment" not in resumed.stdout + resumed.stderr
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("dqn_btc").experiment_id])
    assert "RUNNING" not in {r.info.status for r in runs}


def worker_of(out: Path, fold: int) -> int | None:
    """The pid of the process training fold `fold`'s trial, from its latest result (once it has two)."""
    for results in out.glob(f"dqn_btc/tune/*/*fold={fold},*/result.json"):
        lines = results.read_text().splitlines()
        if len(lines) >= 2:
            return int(json.loads(lines[-1])["pid"])
    return None


def test_a_lost_trial_makes_the_result_partial_and_the_lost_fold_is_not_deployed_from_another(tmp_path):
    """No retry (tune.max_failures 0): the last fold's trial is killed. The verdict names the missing fold, no
    model is registered in its place, the run exits 3, and no traceback reaches the terminal."""
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    out = tmp_path / "out"
    args = command(out, tracking, "tune.max_failures=0", "tune.search_space={training.n_step: {grid: [3]}}",
                   "tune.stop={training_iteration: 10}", "reporting.min_sample_timesteps_per_iteration=2000")
    log = tmp_path / "run.log"
    run = start(args, log)
    try:
        wait_for(lambda: worker_of(out, 3) is not None, RUN_BOUND_S, run, log)
        os.kill(worker_of(out, 3), signal.SIGKILL)
        assert run.wait(timeout=RUN_BOUND_S) == 3, log.read_text()[-3000:]
    finally:
        if run.poll() is None:
            run.kill()
    text = log.read_text()
    assert "Traceback" not in text
    assert "after 1 attempt(s): left out of the scores" in text  # the lost trial, in one line
    assert "fold 3 missing" in text  # in the verdict's header
    assert "no model registered: fold 3, the most recent" in text
    assert "registered models:/" not in text
    assert MlflowClient(tracking).search_registered_models() == []
