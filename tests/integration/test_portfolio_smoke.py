"""trading/Portfolio-v0 end to end on real Ray, RLlib, Tune and MLflow with a tiny budget: the crypto file's smoke
test, and the 500-coin file's, which runs at 20 coins."""
from __future__ import annotations

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from envs.portfolio.baselines import BASELINES, HINDSIGHT
from experiments.run import main
from tests.conftest import REPO


def smoke(name: str, out, joined: list[str]) -> tuple[MlflowClient, list]:
    """Run conf/<name>.yaml --smoke-test on the session's Ray; the client and the experiment's runs."""
    uri = f"sqlite:///{out / 'mlflow.db'}"
    code = main([str(REPO / f"conf/{name}.yaml"), "--smoke-test", "--no-dashboard", "--output", str(out),
                 "--set", f"tracking.tracking_uri={uri}", *joined])
    assert code == 0
    client = MlflowClient(uri)
    return client, client.search_runs([client.get_experiment_by_name(name).experiment_id])


# The direct learner's crypto file runs through the same pipeline in tests/integration/test_ensemble.py.
@pytest.mark.parametrize("name", ["ppo_portfolio_crypto"])
def test_the_crypto_file_trains_scores_judges_and_registers_a_universe_model(tmp_path, joined, name):
    client, runs = smoke(name, tmp_path, joined)
    parent = next(r for r in runs if r.data.tags.get("role") == "sweep")
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(children) == 2 and all(r.info.status == "FINISHED" for r in runs)
    metrics = parent.data.metrics
    for baseline in BASELINES:  # a verdict line per baseline, through the same verdict as every family
        assert f"verdict/dsr/{baseline.name}" in metrics, baseline.name
    assert not any(HINDSIGHT in key for key in metrics)  # shown in the table, never judged
    for child in children:
        assert child.data.metrics["eval/fees_paid"] > 0.0  # costs are paid
        assert child.data.params["environment.env_config.decision_interval"] == "24"
    versions = client.search_model_versions(f"name = '{name}-smoke'")
    assert len(versions) == 1
    # The registered model reads the universe's last bars (one wide table) and answers weights, cash first.
    import mlflow
    import pandas as pd

    mlflow.set_tracking_uri(client.tracking_uri)
    model = mlflow.pyfunc.load_model(f"models:/{name}-smoke/{versions[0].version}")
    assert "wide table" in versions[0].tags["inputs"]
    columns: dict = {}
    for coin in ("BTC", "ETH", "LTC", "XRP", "EOS"):
        bars = pd.read_parquet(REPO / "data" / "raw" / "bitfinex" / f"{coin}-USD_1h.parquet").iloc[-200:]
        columns["timestamp"] = bars.index.astype(str)
        columns.update({f"{coin}-USD:{field}": bars[field].to_numpy() for field in bars.columns})
    answer = model.predict(pd.DataFrame(columns))
    assert list(answer["asset"]) == ["cash", "BTC-USD", "ETH-USD", "LTC-USD", "XRP-USD", "EOS-USD"]
    assert abs(answer["target_weight"].sum() - 1.0) < 1e-9 and (answer["target_weight"] >= 0).all()
    # Zero-shot: the model of 5 coins scores a synthetic universe of 7 it never saw, through its numpy policy.
    from experiments.studies.portfolio_zero_shot import main as zero_shot

    code = zero_shot([f"models:/{name}-smoke/{versions[0].version}",
                      str(REPO / "conf" / "canary_portfolio_planted.yaml"), "--tracking-uri", client.tracking_uri,
                      "--set", "environment.env_config.synthetic_assets=7", "--set",
                      "environment.env_config.synthetic_bars=4000", "--set", "environment.env_config.synthetic_seed=9",
                      "--set", "evaluation.protocol={type: walk_forward, folds: 2, validation_size: 500, "
                      "test_size: 600, embargo: 24}"])
    assert code == 0
    # Paper trading the registered model over its test window is its backtest to the last digit.
    from experiments.paper import main as paper

    version = versions[0]
    files = [str(REPO / "data" / "raw" / "bitfinex" / f"{coin}-USD_1h.parquet") for coin in ("EOS", "BTC", "LTC",
                                                                                               "XRP", "ETH")]
    assert paper([f"models:/{name}-smoke/{version.version}", "--bars", *files, "--start",
                  version.tags["test_start"], "--tracking-uri", client.tracking_uri]) == 0
    [session] = client.search_runs([client.get_experiment_by_name(f"{name}-smoke-paper").experiment_id])
    equity = {m.step: m.value for m in client.get_metric_history(session.info.run_id, "equity")}
    test_end = int(pd.Timestamp(version.tags["test_end"]).timestamp())
    backtest = client.get_run(version.run_id).data.metrics
    assert equity[test_end] == backtest["eval/final_equity"]  # to the last digit
    assert min(equity) == int(pd.Timestamp(version.tags["test_start"]).timestamp())


def test_the_500_coin_files_smoke_test_runs_at_20_coins(tmp_path, joined):
    from envs.portfolio.env import PortfolioEnv

    client, runs = smoke("ppo_portfolio_500", tmp_path, joined)
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert children and all(r.data.params["environment.env_config.synthetic_assets"] == "20" for r in children)
    assert all(np.isfinite(r.data.metrics["eval/sharpe"]) for r in children)
    env = PortfolioEnv({"source": "synthetic", "synthetic_assets": 20, "synthetic_bars": 12000})
    assert env.observation_space.shape[0] == 20
