"""A team's MLflow tracking server as docs/mlflow-server.md sets it up, and a real training run logging to it.

`mlflow server --app-name basic-auth` on loopback, a sqlite backend, artifacts proxied to an S3 API (moto's
server on loopback, standing in for AWS S3). The server alone holds the S3 credentials and endpoint; the
training run and the model loader get nothing but the MLflow tracking variables.

One server for the module, one `--smoke-test` run of conf/ppo_cartpole.yaml (30-60 s), one model load.
"""
from __future__ import annotations

import base64
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests.conftest import REPO
from tests.servers import TEST_CREDENTIALS, S3Server, mlflow_server, s3_server

BUCKET = "team-mlflow"
PREFIX = "mlflow"  # --artifacts-destination s3://BUCKET/PREFIX
EXPERIMENT = "ppo_cartpole"  # the YAML's name
MODEL = "ppo_cartpole-smoke"  # what a --smoke-test run registers
LEGACY_DEFAULT_PASSWORD = "password1234"  # the admin password older MLflow versions shipped in basic_auth.ini
TRAIN_TIMEOUT_S = 900
# Tests speak to loopback only: no proxy from the environment may carry a request elsewhere.
_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass
class TeamServer:
    url: str
    s3: S3Server
    root: Path  # backend and auth sqlite files, the auth config and the server's log
    passwords: dict[str, str]  # admin, alice (trains), bob (reads: the default permission)

    @property
    def backend_db(self) -> Path:
        return self.root / "mlflow.db"


def http(url: str, auth: tuple[str, str] | None = None, body: dict | None = None) -> tuple[int, bytes]:
    """(status, body) of a GET, or of a POST of `body` as JSON, with HTTP basic auth when `auth` is given."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    if auth:
        request.add_header("Authorization", "Basic " + base64.b64encode(":".join(auth).encode()).decode())
    try:
        with _HTTP.open(request, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def write_auth_config(root: Path, admin_password: str) -> Path:
    """The basic-auth ini of docs/mlflow-server.md: an absolute auth database, our own admin password, and
    credential checks cached for 60 s (without the cache every request re-hashes the password: ~0.5 s
    here)."""
    path = root / "basic_auth.ini"
    path.write_text(textwrap.dedent(f"""\
        [mlflow]
        default_permission = READ
        database_uri = sqlite:///{root / 'basic_auth.db'}
        admin_username = admin
        admin_password = {admin_password}
        authorization_function = mlflow.server.auth:authenticate_request_basic_auth
        auth_cache_ttl_seconds = 60
        """))
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def team(tmp_path_factory) -> Iterator[TeamServer]:
    root = tmp_path_factory.mktemp("team_server")
    passwords = {user: f"{user}-{secrets.token_urlsafe(18)}" for user in ("admin", "alice", "bob")}
    config = write_auth_config(root, passwords["admin"])
    with s3_server() as s3:
        s3.create_bucket(BUCKET)
        server_env = {**TEST_CREDENTIALS, "MLFLOW_S3_ENDPOINT_URL": s3.endpoint,
                      "MLFLOW_AUTH_CONFIG_PATH": str(config),
                      "MLFLOW_FLASK_SERVER_SECRET_KEY": secrets.token_hex(32)}
        with mlflow_server(f"sqlite:///{root / 'mlflow.db'}", root / "server.log",
                           "--artifacts-destination", f"s3://{BUCKET}/{PREFIX}", "--app-name", "basic-auth",
                           env=server_env) as url:
            for user in ("alice", "bob"):
                status, body = http(f"{url}/api/2.0/mlflow/users/create", ("admin", passwords["admin"]),
                                    {"username": user, "password": passwords[user]})
                assert status == 200, body
            yield TeamServer(url, s3, root, passwords)


def tracking_env(team: TeamServer, user: str, home: str | Path) -> dict[str, str]:
    """What a team member's process gets: where the server is and who they are; no S3 endpoint or key."""
    return {"PATH": os.environ["PATH"], "HOME": str(home), "MLFLOW_TRACKING_URI": team.url,
            "MLFLOW_TRACKING_USERNAME": user, "MLFLOW_TRACKING_PASSWORD": team.passwords[user]}


def client_as(monkeypatch: pytest.MonkeyPatch, team: TeamServer, user: str, password: str | None = None):
    """An MlflowClient of the test process with `user`'s credentials (or `password`) in the environment, as a
    user sets them; the client reads them at every request."""
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", user)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", team.passwords[user] if password is None else password)
    return MlflowClient(team.url)


def test_basic_auth_refuses_missing_and_wrong_credentials(team, monkeypatch):
    from mlflow.exceptions import MlflowException

    search = f"{team.url}/api/2.0/mlflow/experiments/search?max_results=5"
    assert http(search)[0] == 401
    assert http(search, ("alice", team.passwords["bob"]))[0] == 401
    assert http(search, ("alice", team.passwords["alice"] + "x"))[0] == 401
    assert http(search, ("admin", LEGACY_DEFAULT_PASSWORD))[0] == 401
    assert http(search, ("nobody", team.passwords["alice"]))[0] == 401
    status, body = http(search, ("alice", team.passwords["alice"]))
    assert status == 200 and "Default" in [e["name"] for e in json.loads(body)["experiments"]]

    with pytest.raises(MlflowException, match="401"):
        client_as(monkeypatch, team, "alice", "not-" + team.passwords["alice"]).search_experiments()
    client = client_as(monkeypatch, team, "alice")
    experiment_id = client.create_experiment("alice-notes")
    client.set_experiment_tag(experiment_id, "owner", "alice")

    # bob has the server's default permission (READ) on alice's experiment: he reads, he cannot write
    client = client_as(monkeypatch, team, "bob")
    assert client.get_experiment(experiment_id).tags["owner"] == "alice"
    with pytest.raises(MlflowException, match="403"):
        client.set_experiment_tag(experiment_id, "owner", "bob")


@dataclass
class Training:
    result: subprocess.CompletedProcess
    output: Path  # --output
    ray_dir: Path  # RAY_TMPDIR: Ray's session files and logs of the run
    parent_run_id: str
    model_uri: str  # models:/NAME/VERSION, as the run printed it


@pytest.fixture(scope="module")
def training(team, tmp_path_factory) -> Iterator[Training]:
    """One smoke run of conf/ppo_cartpole.yaml as alice, with only the tracking variables (plus what Ray
    needs). Ray's session files go to a folder of their own (short: socket paths must stay < 108 chars)."""
    output = tmp_path_factory.mktemp("run_output")
    ray_dir = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
    env = {**tracking_env(team, "alice", os.environ["HOME"]), "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_TMPDIR": str(ray_dir)}
    if "RAY_AUTH_MODE" in os.environ:
        env["RAY_AUTH_MODE"] = os.environ["RAY_AUTH_MODE"]
    command = [sys.executable, "-m", "experiments.run", "conf/ppo_cartpole.yaml", "--smoke-test",
               "--no-dashboard", "--output", str(output)]
    try:
        result = run_in_own_group(command, env, REPO, TRAIN_TIMEOUT_S)
        (output.parent / "run.stdout").write_text(result.stdout)  # beside --output, to read after a failure
        (output.parent / "run.stderr").write_text(result.stderr)
        assert result.returncode == 0, (f"exit {result.returncode}\n{result.stdout[-3000:]}\n"
                                        f"{result.stderr[-5000:]}")
        parent = re.search(rf"^MLflow run ([0-9a-f]{{32}}) in experiment '{EXPERIMENT}': "
                           rf"{re.escape(team.url)}/#/experiments/\d+/runs", result.stdout, re.MULTILINE)
        model = re.search(r"^registered (models:/[\w.-]+/\d+):", result.stdout, re.MULTILINE)
        assert parent and model, result.stdout[-3000:]
        yield Training(result, output, ray_dir, parent.group(1), model.group(1))
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)


def run_in_own_group(command: list[str], env: dict[str, str], cwd: Path, timeout: float
                     ) -> subprocess.CompletedProcess:
    """subprocess.run in a new session; on timeout the whole group goes (Ray's processes with the driver)."""
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(f"no result after {timeout} s:\n{stdout[-3000:]}\n{stderr[-5000:]}")
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)


def registered_version(team, training, monkeypatch):
    """(model version, its logged model) of the run's registered model, read as alice."""
    name, version = training.model_uri.removeprefix("models:/").split("/")
    client = client_as(monkeypatch, team, "alice")
    model_version = client.get_model_version(name, version)
    assert model_version.source.startswith("models:/m-"), model_version.source
    return model_version, client.get_logged_model(model_version.source.removeprefix("models:/"))


def test_the_run_logs_parent_and_children_and_finishes_them(team, training, monkeypatch):
    assert training.model_uri == f"models:/{MODEL}/1"
    client = client_as(monkeypatch, team, "alice")
    experiment = client.get_experiment_by_name(EXPERIMENT)
    runs = client.search_runs([experiment.experiment_id], max_results=100)
    parents = [r for r in runs if r.data.tags.get("role") == "sweep"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == training.parent_run_id]
    assert [r.info.run_id for r in parents] == [training.parent_run_id]
    assert len(children) == 2 and len(runs) == 3  # --smoke-test: 2 trials
    assert {r.info.status for r in runs} == {"FINISHED"}
    parent = parents[0]
    assert parent.data.tags["smoke_test"] == "True" and "eval/return_mean" in parent.data.metrics
    # proxied artifacts: the clients were only ever told the server's mlflow-artifacts:/ scheme, never s3://
    assert experiment.artifact_location == f"mlflow-artifacts:/{experiment.experiment_id}"
    assert {r.info.artifact_uri for r in runs} == {
        f"mlflow-artifacts:/{experiment.experiment_id}/{r.info.run_id}/artifacts" for r in runs}


def test_artifacts_and_the_registered_model_are_objects_in_the_bucket(team, training, monkeypatch):
    model_version, logged_model = registered_version(team, training, monkeypatch)
    experiment_id = logged_model.experiment_id
    keys = set(team.s3.keys(BUCKET, f"{PREFIX}/"))
    parent = f"{PREFIX}/{experiment_id}/{training.parent_run_id}/artifacts"
    chosen = f"{PREFIX}/{experiment_id}/{model_version.run_id}/artifacts"
    for run_dir in (parent, chosen):
        for name in ("evaluation/evaluation.csv", "evaluation/evaluation.png"):
            assert f"{run_dir}/{name}" in keys, sorted(keys)
    assert f"{parent}/experiment.yaml" in keys
    assert f"{parent}/best_checkpoint/rllib_checkpoint.json" in keys
    table = team.s3.read(BUCKET, f"{parent}/evaluation/evaluation.csv").decode().splitlines()
    assert "episode_return_mean" in table[0] and [row for row in table if row.startswith("agent,")]
    assert team.s3.read(BUCKET, f"{parent}/evaluation/evaluation.png").startswith(b"\x89PNG")

    model_path = f"{experiment_id}/models/{logged_model.model_id}/artifacts"
    assert logged_model.artifact_location == f"mlflow-artifacts:/{model_path}"
    model_dir = f"{PREFIX}/{model_path}"
    for name in ("MLmodel", "policy_model.py", "requirements.txt", "input_example.json"):
        assert f"{model_dir}/{name}" in keys, sorted(k for k in keys if "/models/" in k)
    # The policy's numpy forward pass (no torch checkpoint) and the platform code it runs with
    assert f"{model_dir}/artifacts/policy.npz" in keys and f"{model_dir}/code/algos/export/numpy_policy.py" in keys
    mlmodel = team.s3.read(BUCKET, f"{model_dir}/MLmodel").decode()
    assert "python_function" in mlmodel and f"model_id: {logged_model.model_id}" in mlmodel
    # and nothing landed in a local artifact folder of the server
    assert not (REPO / "mlartifacts").exists() and not (team.root / "mlartifacts").exists()


LOAD_AND_PREDICT = """
import json
import gymnasium as gym
import mlflow
import numpy as np

model = mlflow.pyfunc.load_model("{uri}")
env = gym.make("CartPole-v1")
batch = np.stack([env.reset(seed=seed)[0] for seed in range(5)])
print(json.dumps({{"batch": model.predict(batch).tolist(), "one": model.predict(batch[0]).tolist()}}))
"""


def test_the_registered_model_loads_in_a_fresh_process_with_tracking_variables_only(team, training, tmp_path,
                                                                                   monkeypatch):
    _, logged_model = registered_version(team, training, monkeypatch)
    assert logged_model.artifact_location.startswith("mlflow-artifacts:/")  # so the loader never talks to S3
    home = tmp_path / "home"  # no ~/.aws, no ~/.mlflow: only what the environment says
    home.mkdir()
    env = {**tracking_env(team, "bob", home), "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}
    assert not [name for name in env if name.startswith("AWS_") or name == "MLFLOW_S3_ENDPOINT_URL"]
    result = subprocess.run([sys.executable, "-c", LOAD_AND_PREDICT.format(uri=training.model_uri)],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-5000:]
    actions = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(actions["batch"]) == 5 and set(actions["batch"]) <= {0, 1}
    assert len(actions["one"]) == 1 and actions["one"][0] in (0, 1)


def _files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()]


def test_no_password_is_written_anywhere(team, training):
    secrets_ = {f"{user}'s password": team.passwords[user].encode() for user in team.passwords}
    secrets_.update({f"{user}'s basic auth header": base64.b64encode(f"{user}:{password}".encode())
                     for user, password in team.passwords.items()})

    def leaks(blobs: dict[str, bytes]) -> list[str]:
        return [f"{what} in {where}" for where, blob in blobs.items() for what, secret in secrets_.items()
                if secret in blob]

    # the scan finds what is there (else an empty scan would pass)
    assert leaks({"a planted canary": b"x" + secrets_["alice's basic auth header"] + b"x"}) == [
        "alice's basic auth header in a planted canary"]

    blobs = {"the run's stdout": training.result.stdout.encode(),
             "the run's stderr": training.result.stderr.encode()}
    databases = sorted(team.root.glob("*.db*"))
    assert {p.name for p in databases} >= {"mlflow.db", "basic_auth.db"}
    blobs.update({f"the server's {p.name}": p.read_bytes() for p in databases})
    blobs["the server's log"] = (team.root / "server.log").read_bytes()
    objects = team.s3.keys(BUCKET)
    assert len(objects) >= 20  # evaluation files, checkpoint, model
    blobs.update({f"s3://{BUCKET}/{key}": team.s3.read(BUCKET, key) for key in objects})
    outputs = _files(training.output)
    assert any(p.name == "experiment.yaml" for p in outputs) and len(outputs) >= 10
    blobs.update({str(p): p.read_bytes() for p in outputs})
    ray_logs = _files(training.ray_dir)
    assert any(p.suffix in (".log", ".out", ".err") for p in ray_logs)
    blobs.update({str(p): p.read_bytes() for p in ray_logs})
    assert leaks(blobs) == []
