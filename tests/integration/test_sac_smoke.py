"""SAC sizing positions, end to end on real Ray, RLlib, Tune and MLflow: conf/sac_btc.yaml's smoke run ends in a
verdict of the main job's form, and its registered model decides target exposures from bars, in a fresh process
without torch, and paper-trades its test window to the backtest's last digit."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

import envs
from tests.conftest import REPO

MODEL = "sac_btc-smoke"
BASELINES = [b.name for b in envs.family("trading/Spot-v0").baseline_table()]  # headline first


def _module(uri: str, name: str, *args: str) -> subprocess.CompletedProcess:
    """`python -m NAME ARGS` from the repo folder, as a user runs it, against this test's tracking store."""
    return subprocess.run([sys.executable, "-m", name, *args], cwd=REPO, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(REPO), "MLFLOW_TRACKING_URI": uri})


@pytest.fixture(scope="module")
def sac_run(tmp_path_factory):
    import ray

    ray.shutdown()  # another test module may have left a session behind
    out = tmp_path_factory.mktemp("sac")
    uri = f"sqlite:///{out / 'mlflow.db'}"
    result = _module(uri, "experiments.run", "conf/sac_btc.yaml", "--smoke-test", "--no-dashboard",
                     "--output", str(out), "--set", "tracking.experiment_name=sac")
    return result, MlflowClient(uri), uri


def test_the_smoke_run_ends_in_a_verdict_of_the_main_jobs_form(sac_run):
    result, client, _ = sac_run
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "edge over buy_and_hold:" in result.stdout and "DSR" in result.stdout
    parent = next(r for r in client.search_runs([client.get_experiment_by_name("sac").experiment_id])
                  if r.data.tags.get("role") == "sweep")
    assert {"verdict/dsr/buy_and_hold", "verdict/dsr/flat", "verdict/agent_sharpe_mean"} <= set(parent.data.metrics)
    evaluation = pd.read_csv(client.download_artifacts(parent.info.run_id, "evaluation/evaluation.csv"), index_col=0)
    assert list(evaluation.index) == ["agent", *BASELINES]  # a row per baseline of the family's table, in its order
    assert 0.0 <= evaluation.loc["agent", "exposure"] <= 1.0


def test_the_registered_model_sizes_positions_from_bars_and_observations(sac_run):
    import mlflow

    _, client, uri = sac_run
    version = client.search_model_versions(f"name = '{MODEL}'")[0]
    assert version.tags["meaning/algorithm"] == "sac" and version.tags["meaning/action_space"].startswith("Box(")
    mlflow.set_tracking_uri(uri)
    model = mlflow.pyfunc.load_model(f"models:/{MODEL}/{version.version}")
    bars = pd.read_parquet(REPO / "data" / "raw" / "BTC-USD_1h.parquet")
    reader = model.unwrap_python_model().inputs
    decision = model.predict(bars.iloc[-reader.bars_needed:])
    target = float(decision["target_position"].iloc[0])
    assert 0.0 <= target <= 1.0 and float(decision["action"].iloc[0]) == pytest.approx(target)
    observations = np.zeros((3, *model.model_config["observation_shape"]), dtype=np.float32)
    actions = model.predict(observations)  # advanced use: observations in, target exposures out
    assert actions.shape == (3, 1) and actions.dtype == np.float32 and ((0 <= actions) & (actions <= 1)).all()


def test_paper_trading_its_test_window_is_its_backtest_to_the_last_digit(sac_run):
    _, client, uri = sac_run
    version = client.search_model_versions(f"name = '{MODEL}'")[0]
    trained_on = client.get_run(version.run_id).data.params["environment.env_config.data_path"]
    result = _module(uri, "experiments.paper", f"models:/{MODEL}/{version.version}", "--bars", trained_on,
                     "--start", version.tags["test_start"])
    assert result.returncode == 0, result.stdout + result.stderr
    backtest = client.get_run(version.run_id).data.metrics
    paper = client.search_runs([client.get_experiment_by_name(f"{MODEL}-paper").experiment_id])[0]
    equity = sorted(client.get_metric_history(paper.info.run_id, "equity"), key=lambda m: m.step)
    assert equity[-1].value == backtest["eval/final_equity"]
    assert paper.data.metrics["fills"] == backtest["eval/trades"]
