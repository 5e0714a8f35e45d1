"""A sweep on a real multi-node Ray cluster with its storage, data and checkpoints on a real S3 API server.

Parts, all on loopback: moto's S3 server with signature checking on (an IAM user's key; a wrong secret is
refused), and a three-node Ray cluster from Ray's own `ray.cluster_utils.Cluster`: a head without the
`trainer` resource and two worker nodes with one each. The driver is the real CLI, joining through
--address. Trials ask for `trainer` (tune.trial_resources), so none can run on the head: their checkpoints
exist only in S3, and the driver scores and registers the best from there. One worker node is killed
mid-sweep: its trial restarts on the other node from its last checkpoint in S3 (tune.max_failures).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import REPO
from tests.servers import LOOPBACK, free_port, s3_server

BUCKET = "team"
LOOPBACK_ONLY = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}  # see the cluster fixture
ITERATIONS = 12


@pytest.fixture(scope="module")
def s3():
    """The S3 server, its bucket with the BTC bars under raw/, and the only credentials it accepts."""
    with s3_server() as server:
        server.create_bucket(BUCKET)
        server.client().upload_file(str(REPO / "data" / "raw" / "BTC-USD_1h.parquet"), BUCKET,
                                    "raw/BTC-USD_1h.parquet")
        key, secret = server.require_auth()
        try:
            yield server, key, secret
        finally:
            server.allow_all()


@pytest.fixture(scope="module")
def cluster(s3):
    """Head (1 CPU, no `trainer`) + two worker nodes (1 CPU, trainer: 1); nodes inherit the S3 credentials."""
    import ray._private.ray_constants as ray_constants
    from ray.cluster_utils import Cluster

    server, key, secret = s3
    saved = dict(os.environ)
    os.environ.update(AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret, AWS_DEFAULT_REGION="us-east-1",
                      RAY_USAGE_STATS_ENABLED="0", **LOOPBACK_ONLY)
    # Ray turns 127.0.0.1 into the machine's interface address when it connects ("remotely reachable"); off
    # clusters mode it keeps loopback. Nodes and the driver read the variable, this process the constant.
    cluster_mode_before = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    dashboard = f"{LOOPBACK}:{free_port()}"  # the state API (which actor runs on which node) asks the dashboard
    nodes = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": True, "dashboard_host": LOOPBACK, "node_ip_address": LOOPBACK,
        "dashboard_port": int(dashboard.rsplit(":", 1)[1])})
    try:
        workers = [nodes.add_node(num_cpus=1, resources={"trainer": 1}, node_ip_address=LOOPBACK) for _ in range(2)]
        nodes.wait_for_nodes()
        yield nodes, workers, f"http://{dashboard}"
    finally:
        nodes.shutdown()
        ray_constants.ENABLE_RAY_CLUSTER = cluster_mode_before
        os.environ.clear()
        os.environ.update(saved)


def _trainer_nodes_of_running_trials(dashboard: str) -> set[str]:
    """Node ids of the live RLlib algorithm actors (the trials' main processes), asked of the cluster."""
    from ray.util.state import list_actors

    actors = list_actors(address=dashboard, filters=[("state", "=", "ALIVE")], limit=1000,
                         raise_on_missing_output=False)
    # Tune reuses one trial process per slot (experiments/sweep/reuse.py): its class is e.g. ReusableFastDQN.
    trainers = ("FastDQN", "DQN", "PPO")
    return {actor.node_id for actor in actors if actor.class_name.removeprefix("Reusable") in trainers}


def _iterations_logged(store: Path) -> int:
    """The fewest training iterations the driver has logged for any trial (0 before both trials report)."""
    if not store.exists():
        return 0
    client = MlflowClient(f"sqlite:///{store}")
    experiment = client.get_experiment_by_name("dqn_btc")
    children = [] if experiment is None else [
        r for r in client.search_runs([experiment.experiment_id]) if r.data.tags.get("mlflow.parentRunId")]
    if len(children) < 2:
        return 0
    return int(min(r.data.metrics.get("training_iteration", 0) for r in children))


def _checkpoints(server, prefix: str) -> dict[str, set[str]]:
    """Trial folder -> its checkpoint folders, as listed in the bucket."""
    found: dict[str, set[str]] = {}
    for key in server.keys(BUCKET, prefix):
        parts = key.split("/")
        for i, part in enumerate(parts):
            if part.startswith("checkpoint_"):
                found.setdefault(parts[i - 1], set()).add(part)
    return found


def test_sweep_on_a_cluster_with_s3_storage_survives_a_dead_node(s3, cluster, tmp_path):
    import ray

    server, key, secret = s3
    nodes, workers, dashboard = cluster
    storage = f"s3://{BUCKET}/runs?endpoint_override={server.endpoint}"
    env = {**os.environ, "AWS_ENDPOINT_URL_S3": server.endpoint}  # the data URI gets its endpoint from here
    command = [sys.executable, "-m", "experiments.run", str(REPO / "conf" / "dqn_btc.yaml"), "--smoke-test",
               "--address", nodes.address, "--storage", storage, "--output", str(tmp_path),
               "--set", f"tracking.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}",
               "--set", f"environment.env_config.data_path=s3://{BUCKET}/raw/BTC-USD_1h.parquet",
               "--set", "tune.trial_resources={trainer: 1}", "--set", "tune.max_failures=2",
               "--set", f"tune.stop={{training_iteration: {ITERATIONS}}}",
               "--set", "reporting.min_sample_timesteps_per_iteration=1000"]
    log = tmp_path / "driver.log"
    started = time.monotonic()
    with open(log, "w") as out:
        driver = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        # Both trials run, each on a worker node, and the driver has taken in two results of each (so it
        # knows of a checkpoint of each in S3): kill one worker node.
        ray.init(address=nodes.address, logging_level="ERROR", log_to_driver=False)
        head_id = ray.get_runtime_context().get_node_id()
        placed: set[str] = set()
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and driver.poll() is None:
            placed |= _trainer_nodes_of_running_trials(dashboard)
            found = _checkpoints(server, "runs/dqn_btc/tune/")
            if len(found) == 2 and len(placed) == 2 and _iterations_logged(tmp_path / "mlflow.db") >= 2:
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"two trials with a checkpoint each never showed up:\n{log.read_text()[-3000:]}")
        assert head_id not in placed, "a trial ran on the head node, which declares no `trainer`"
        worker_ids = {w.node_id for w in workers}
        assert placed == worker_ids
        nodes.remove_node(workers[0])  # its raylet and every worker process on it die
        killed_at = time.monotonic() - started
        assert driver.wait(timeout=600) == 0, log.read_text()[-5000:]
    finally:
        if driver.poll() is None:
            driver.kill()
        ray.shutdown()
    output = log.read_text()

    # Scored and registered from S3: the best checkpoint's tag is an s3:// URI, the policy was downloaded.
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("dqn_btc")
    runs = client.search_runs([experiment.experiment_id])
    parent = next(r for r in runs if r.data.tags.get("role") == "sweep")
    assert parent.data.tags["best_checkpoint"].startswith(f"s3://{BUCKET}/runs/dqn_btc/tune/")
    assert "registered models:/dqn_btc-BTC-USD_1h-smoke/" in output
    assert any(tmp_path.glob("dqn_btc/*/downloaded/policies/**/default_policy"))
    # No MLflow run is left RUNNING, and the killed node's trial resumed from a checkpoint: fewer
    # iterations since its restore than in all.
    assert {r.info.status for r in runs} == {"FINISHED"}, [(r.info.run_name, r.info.status) for r in runs]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(children) == 2
    finals = [(c.data.metrics["training_iteration"], c.data.metrics["iterations_since_restore"]) for c in children]
    assert all(total == ITERATIONS for total, _ in finals), finals
    assert sorted(since < total for total, since in finals) == [False, True], (finals, killed_at)

    # The resume file and Tune's state are in S3; nothing of the sweep went to a local Tune folder.
    keys = server.keys(BUCKET, "runs/dqn_btc/")
    assert "runs/dqn_btc/latest_sweep.json" in keys
    assert not (tmp_path / "dqn_btc" / "tune").exists()
    assert not [k for k in keys if ".rlplatform-write-check" in k]

    # The secret key reached none of: our output, MLflow, the files we wrote, the objects we stored, Ray's logs
    # (Tune would have copied it into every trial's runtime environment, which Ray's runtime-env agent logs).
    assert "AWS_SECRET_ACCESS_KEY from this shell are not sent to the cluster's nodes" in output
    planted = secret.encode()
    assert planted not in output.encode()
    leaks = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "driver.log" and planted in p.read_bytes()]
    assert not leaks
    assert not [k for k in keys if planted in server.read(BUCKET, k)]
    ray_logs = [p for p in Path(nodes.head_node.get_session_dir_path(), "logs").rglob("*") if p.is_file()]
    assert any(p.name.startswith("runtime_env_agent") for p in ray_logs)
    assert not [p.name for p in ray_logs if planted in p.read_bytes()]


def test_a_retrain_submitted_as_a_ray_job_runs_on_the_cluster(cluster, tmp_path):
    """The scheduled retrain (docs/operations.md: cron, or the Kubernetes CronJob) is `ray job submit` of
    `python -m experiments.retrain`: submitted to the running cluster's job server, it runs there, reads the
    registry and the data, and its one-line plan comes back in the job's logs (a dry run: no champion yet, the
    first challenger would come from the full sweep)."""
    _, _, dashboard = cluster
    entrypoint = [sys.executable, "-m", "experiments.retrain", str(REPO / "conf" / "dqn_btc.yaml"), "--dry-run",
                  "--address", "auto", "--set", f"tracking.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}"]
    ray_cli = Path(sys.executable).with_name("ray")
    result = subprocess.run([str(ray_cli), "job", "submit", "--address", dashboard, "--", *entrypoint],
                            capture_output=True, text=True, timeout=300, env={**os.environ, **LOOPBACK_ONLY})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "succeeded" in result.stdout.lower()
    assert ("models:/dqn_btc@champion does not exist yet: the first challenger comes from the full sweep"
            in result.stdout)
    assert "forward window: 2019-09-17 10:00:00+00:00 .. 2019-10-17 09:00:00+00:00 (720 bars" in result.stdout
