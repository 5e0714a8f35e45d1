"""Fixtures shared by the integration tests."""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.fixture(scope="module")
def ray_session():
    """A small local Ray for one test module (2 CPUs, no dashboard), with one torch thread in the driver."""
    import ray
    import torch

    torch.set_num_threads(1)
    ray.shutdown()  # another test module may have left a session behind
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    yield
    ray.shutdown()


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


@pytest.fixture(scope="session")
def operations_loop(tmp_path_factory) -> OperationsLoop:
    from envs.trading.data import load_bars, save_bars

    root = tmp_path_factory.mktemp("operations")
    bars = load_bars(REPO / "data" / "raw" / "BTC-USD_1h.parquet")
    data = save_bars(bars.iloc[:-1440], root / "BTC-USD_1h.parquet", "BTC-USD", "1h")
    fresh = save_bars(bars.iloc[-1440:], root / "two_months.parquet", "BTC-USD", "1h")
    loop = OperationsLoop(root, f"sqlite:///{root / 'mlflow.db'}", data, *([None] * 4))
    retrain = ["experiments.retrain", "conf/dqn_btc.yaml", "--smoke-test", "--no-dashboard", "--output", root / "runs",
               "--set", f"environment.env_config.data_path={data}"]
    loop.first = loop.module(*retrain, "--mode", "full", "--promote")
    loop.too_early = loop.module(*retrain)
    loop.update = loop.module("experiments.data", "update", data, "--from", fresh)
    loop.second = loop.module(*retrain)
    return loop
