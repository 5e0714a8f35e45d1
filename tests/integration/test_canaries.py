"""Canaries: the whole pipeline (Ray, RLlib, Tune, MLflow, walk-forward folds, verdict) on markets whose
answer is known. Noise: no edge on any random walk. Planted: the edge is found, by FastDQN choosing long or flat
and by FastSAC sizing a continuous position. The third canary, no
leak across a fold's boundary, is tests/unit/test_folds.py::test_leak_canary."""
from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

import envs
from experiments.run import main
from tests.conftest import REPO

BASELINES = tuple(b.name for b in envs.family("trading/Spot-v0").baseline_table())  # read, never pinned


def run_canary(name: str, out, joined: list[str]) -> dict[str, float]:
    """Run conf/<name>.yaml on the session's Ray; the metrics of its sweep's parent run."""
    uri = f"sqlite:///{out / 'mlflow.db'}"
    code = main([str(REPO / f"conf/{name}.yaml"), "--no-dashboard", "--output", str(out),
                 "--set", f"tracking.tracking_uri={uri}", *joined])
    assert code == 0
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name(name).experiment_id], "tags.role = 'sweep'")
    assert len(runs) == 1
    return runs[0].data.metrics


def test_noise_canary_never_claims_an_edge(tmp_path, joined):
    metrics = run_canary("canary_noise", tmp_path, joined)
    for seed in ("0", "1", "2"):  # one verdict per random-walk market
        for baseline in BASELINES:
            assert metrics[f"verdict/{seed}/supported/{baseline}"] == 0.0, (seed, baseline)
        assert metrics[f"verdict/{seed}/folds"] == 3.0


@pytest.mark.parametrize("name", ["canary_planted", "canary_planted_continuous"])  # DQN long/flat; SAC sizing
def test_planted_canary_finds_the_edge(tmp_path, name, joined):
    metrics = run_canary(name, tmp_path, joined)
    for baseline in ("buy_and_hold", "flat"):
        assert metrics[f"verdict/supported/{baseline}"] == 1.0, baseline
        assert metrics[f"verdict/wins/{baseline}"] == 3.0  # every test fold
        assert metrics[f"verdict/dsr/{baseline}"] >= 0.95
    assert metrics["verdict/agent_sharpe_mean"] > 3.0
    assert metrics["verdict/folds"] == 3.0 and metrics["verdict/seeds"] == 2.0
