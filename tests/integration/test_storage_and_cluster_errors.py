"""Bad storage and dead clusters are one line and exit 2, before anything is written. How long a check may wait is
its configuration (one attempt, short timeouts: tests/unit/test_fault_handling.py), not a time measured here.

The S3 cases talk to a real S3 API server (moto, loopback, signature checking on); the cluster cases to
ports where nothing listens, and to a "current cluster" file left behind by a cluster that is gone.
"""
from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

from tests.conftest import REPO
from tests.servers import free_port, s3_server

BUCKET = "team"


@pytest.fixture(scope="module")
def s3():
    with s3_server() as server:
        server.create_bucket(BUCKET)
        server.client().upload_file(str(REPO / "data" / "raw" / "BTC-USD_1h.parquet"), BUCKET, "raw/BTC-USD_1h.parquet")
        server.require_auth()
        try:
            yield server
        finally:
            server.allow_all()


def run(tmp_path: Path, *args: str, env: dict[str, str] | None = None,
        process: bool = False) -> subprocess.CompletedProcess:
    """The CLI (a real run, not --dry-run, unless asked), with its output folder in tmp_path: `experiments.run.main`
    in this process, as `python -m experiments.run` calls it, with `env` set meanwhile; with `process`, the command
    itself in a new interpreter."""
    argv = [str(REPO / "conf" / "dqn_btc.yaml"), "--no-dashboard", "--output", str(tmp_path / "out"),
            "--set", f"tracking.tracking_uri=sqlite:///{tmp_path / 'out' / 'm.db'}", *args]
    if process:
        return subprocess.run([sys.executable, "-m", "experiments.run", *argv], cwd=REPO, capture_output=True,
                              text=True, timeout=120, env={**os.environ, **(env or {})})
    from experiments.run import main

    out, err = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, env or {}), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def assert_refused(result: subprocess.CompletedProcess, tmp_path: Path, *words: str) -> str:
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())  # nothing written
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def credentials(server) -> dict[str, str]:
    return {"AWS_ACCESS_KEY_ID": server.key, "AWS_SECRET_ACCESS_KEY": server.secret, "AWS_DEFAULT_REGION": "us-east-1"}


def test_unreachable_endpoint(s3, tmp_path):
    result = run(tmp_path, "--storage", f"s3://{BUCKET}/runs?endpoint_override=http://127.0.0.1:{free_port()}",
                 env=credentials(s3), process=True)  # one refusal through the real process and its exit code
    assert_refused(result, tmp_path, "--storage", "cannot reach")


def test_missing_bucket(s3, tmp_path):
    result = run(tmp_path, "--storage", f"s3://no-such-bucket/runs?endpoint_override={s3.endpoint}",
                 env=credentials(s3))
    assert_refused(result, tmp_path, "no-such-bucket", "does not exist")


def test_wrong_credentials(s3, tmp_path):
    result = run(tmp_path, "--storage", f"s3://{BUCKET}/runs", env={
        **credentials(s3), "AWS_SECRET_ACCESS_KEY": "wrong-secret", "AWS_ENDPOINT_URL_S3": s3.endpoint})
    line = assert_refused(result, tmp_path, "access denied", "credentials")
    assert "wrong-secret" not in line
    assert not [k for k in s3.keys(BUCKET) if ".rlplatform-write-check" in k]


def test_storage_from_the_environment_variable_and_credentials_in_a_uri(s3, tmp_path):
    result = run(tmp_path, "--dry-run", env={**credentials(s3),
                                              "RLPLATFORM_STORAGE": f"s3://{BUCKET}/runs?endpoint_override={s3.endpoint}"})
    assert result.returncode == 0, result.stderr
    assert f"storage: s3://{BUCKET}/runs?endpoint_override={s3.endpoint} (RLPLATFORM_STORAGE)" in result.stdout
    result = run(tmp_path, "--storage", "s3://AKIAEXAMPLE:plain-secret@team/runs", env=credentials(s3))
    line = assert_refused(result, tmp_path, "credentials do not belong")
    assert "plain-secret" not in line


def test_bars_from_s3_and_a_missing_object(s3, tmp_path):
    env = {**credentials(s3), "AWS_ENDPOINT_URL_S3": s3.endpoint}
    result = run(tmp_path, "--dry-run", "--set",
                 f"environment.env_config.data_path=s3://{BUCKET}/raw/BTC-USD_1h.parquet", env=env)
    assert result.returncode == 0, result.stderr
    assert "fold 3: train 2017-07-06" in result.stdout  # the folds were cut from the bars read from S3
    assert f"data_path: s3://{BUCKET}/raw/BTC-USD_1h.parquet?endpoint_override={s3.endpoint}" in result.stdout
    assert len(list((tmp_path / "out" / "features").glob("*.arrow"))) == 1  # the dry run stored the features
    refused = tmp_path / "refused"
    result = run(refused, "--set", f"environment.env_config.data_path=s3://{BUCKET}/raw/ETH-USD_1h.parquet", env=env)
    assert_refused(result, refused, "ETH-USD_1h.parquet", "data file not found")


@pytest.mark.parametrize("how", ["--address", "RAY_ADDRESS"])
def test_a_dead_cluster_address_is_one_line(tmp_path, how):
    dead = f"127.0.0.1:{free_port()}"
    args, env = (("--address", dead), {}) if how == "--address" else ((), {"RAY_ADDRESS": dead})
    result = run(tmp_path, *args, env=env)
    assert_refused(result, tmp_path, how, dead, "no Ray cluster answers", "ray start --head")


def test_a_leftover_address_of_a_stopped_cluster(tmp_path, monkeypatch):
    """`ray start --head` then a stop without `ray stop` leaves Ray's current-cluster file behind."""
    ray_tmp = tmp_path / "raytmp"
    (ray_tmp / "ray").mkdir(parents=True)
    dead = f"127.0.0.1:{free_port()}"
    (ray_tmp / "ray" / "ray_current_cluster").write_text(dead)
    env = {"RAY_TMPDIR": str(ray_tmp)}
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    result = run(tmp_path / "dry", "--dry-run", env=env)
    assert result.returncode == 0, result.stderr
    assert f"it names {dead}, a Ray cluster that no longer runs" in result.stdout
    result = run(tmp_path, "--address", "auto", env=env)
    assert_refused(result, tmp_path, "--address auto", dead, "does not answer", "ray stop")
