"""Fixtures shared by the integration tests."""
from __future__ import annotations

import contextlib
import importlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest

from tests.conftest import REPO
from tests.servers import LOOPBACK, free_port, joining


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[str]:
    """One Ray for the slow lane's session, shared by every test that only needs a cluster: a head node of 2 CPUs (as
    a local run here would start) on loopback, without a dashboard; yields its address. Its session folder is out of
    /tmp/ray, so a run started without --address does not find it and join it. Tests that start, kill or break a Ray,
    or that look at a local run's own start, keep their own."""
    import ray
    import ray._private.ray_constants as ray_constants
    from ray.cluster_utils import Cluster

    temp = Path(tempfile.mkdtemp(prefix="rq", dir="/tmp"))  # Ray's socket paths must stay under 108 bytes
    ray.shutdown()
    cluster_mode = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False  # loopback only (experiments/plan/local_ray.py says why)
    with pytest.MonkeyPatch.context() as environment:
        environment.setenv("RAY_TMPDIR", str(temp))  # the nodes' folder and the address file Ray writes for them
        environment.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        # Free ports for what Ray would put on fixed defaults, so that a Ray a test starts beside it gets those
        # (a second head on the dashboard agent's 52365 has no agent: `ray job submit` to it fails).
        cluster = Cluster(initialize_head=True, connect=False, head_node_args={
            "num_cpus": 2, "include_dashboard": False, "node_ip_address": LOOPBACK,
            "dashboard_agent_listen_port": free_port(), "metrics_export_port": free_port(),
            "ray_client_server_port": free_port()})
    try:
        yield cluster.address
    finally:
        ray.shutdown()
        cluster.shutdown()
        ray_constants.ENABLE_RAY_CLUSTER = cluster_mode
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def ray_session(ray_cluster):
    """This module's driver joined to the session's Ray, with one torch thread in the driver (its learner's)."""
    import ray
    import torch

    torch.set_num_threads(1)
    ray.shutdown()  # a test before may have left its driver connected
    ray.init(address=ray_cluster, logging_level="ERROR", log_to_driver=False)
    yield
    ray.shutdown()  # the driver leaves; the cluster stays for the next module


@pytest.fixture
def joined(ray_cluster) -> Iterator[list[str]]:
    """`joining` the session's Ray for one test."""
    with joining(ray_cluster) as args:
        yield args


@dataclass
class OperationsLoop:
    """The loop of docs/operations.md on a smoke budget: a forced first champion on bars with their last two months
    held back, a retrain refused for lack of fresh bars, the two months appended, an incremental retrain."""

    root: Path
    tracking_uri: str
    data: Path
    first: subprocess.CompletedProcess
    too_early: subprocess.CompletedProcess
    update: subprocess.CompletedProcess
    second: subprocess.CompletedProcess
    model: str = "dqn_btc-smoke"

    @property
    def client(self):
        from mlflow.tracking import MlflowClient

        return MlflowClient(self.tracking_uri)

    def module(self, name: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        """`python -m NAME ARGS` from the repo folder, as a user runs it, against this loop's tracking store."""
        return subprocess.run([sys.executable, "-m", name, *map(str, args)], cwd=REPO, capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO),
                                                    "MLFLOW_TRACKING_URI": self.tracking_uri})

    def call(self, name: str, *args: str) -> subprocess.CompletedProcess:
        """The command NAME's `main(ARGS)` in this process, as `python -m NAME` calls it, against this loop's tracking
        store: what it printed and its exit code, without a new interpreter's imports (tests of the process itself,
        and of one killed, use `module`)."""
        main = importlib.import_module(name).main
        out, err = io.StringIO(), io.StringIO()
        with (mock.patch.dict(os.environ, {"MLFLOW_TRACKING_URI": self.tracking_uri}), contextlib.chdir(REPO),
              contextlib.redirect_stdout(out), contextlib.redirect_stderr(err)):
            code = main([str(arg) for arg in args])
        return subprocess.CompletedProcess([name, *map(str, args)], code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="session")
def operations_loop(tmp_path_factory) -> OperationsLoop:
    """The loop, made once per session: the two retrains from the command line, each on its own local Ray as a
    scheduled retrain starts; the refusal and the update in this process (`OperationsLoop.call`)."""
    from envs.trading.data import load_bars, save_bars

    root = tmp_path_factory.mktemp("operations")
    bars = load_bars(REPO / "data" / "raw" / "BTC-USD_1h.parquet")
    data = save_bars(bars.iloc[:-1440], root / "BTC-USD_1h.parquet", "BTC-USD", "1h")
    fresh = save_bars(bars.iloc[-1440:], root / "two_months.parquet", "BTC-USD", "1h")
    loop = OperationsLoop(root, f"sqlite:///{root / 'mlflow.db'}", data, *([None] * 4))
    retrain = ["experiments.retrain", "conf/dqn_btc.yaml", "--smoke-test", "--no-dashboard", "--output", root / "runs",
               "--set", f"environment.env_config.data_path={data}"]
    loop.first = loop.module(*retrain, "--mode", "full", "--promote")
    loop.too_early = loop.call(*retrain)
    loop.update = loop.call("experiments.data", "update", data, "--from", fresh)
    loop.second = loop.module(*retrain)
    return loop
