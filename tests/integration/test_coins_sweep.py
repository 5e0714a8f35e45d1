"""One model per coin: a grid over symbols on synthetic markets, scored and registered per coin."""
from __future__ import annotations

import pandas as pd
from mlflow.tracking import MlflowClient

from experiments.run import main
from tests.conftest import REPO


def test_coins_smoke_sweep_has_a_per_coin_table(tmp_path, capsys, joined):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    code = main([str(REPO / "conf/dqn_coins.yaml"), "--smoke-test", "--no-dashboard", "--output", str(tmp_path),
                 "--set", f"tracking.tracking_uri={uri}", *joined])
    assert code == 0
    assert "SYNTHETIC" in capsys.readouterr().out
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("dqn_coins").experiment_id])
    parent = next(r for r in runs if r.data.tags.get("role") == "sweep")
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    # The smoke test keeps two coins and the two most recent walk-forward folds: one trial each.
    trials = sorted((r.data.params["environment.env_config.symbol"], r.data.tags["fold"]) for r in children)
    assert trials == [("BTC-USD", "1"), ("BTC-USD", "2"), ("ETH-USD", "1"), ("ETH-USD", "2")]
    assert all(r.data.tags["symbol"] == r.data.params["environment.env_config.symbol"] for r in children)
    symbols = ["BTC-USD", "ETH-USD"]
    table = pd.read_csv(client.download_artifacts(parent.info.run_id, "verdict/per_group.csv"), index_col=0)
    assert sorted(table.index) == symbols
    assert {"agent_sharpe", "buy_and_hold_sharpe", "agent_trades", "dsr", "pbo", "edge"} <= set(table)
    assert set(table["edge"]) <= {"supported", "not supported"}
    for symbol in symbols:
        assert f"eval/{symbol}/sharpe" in parent.data.metrics  # the registered model on its test part
        assert f"verdict/{symbol}/wins/buy_and_hold" in parent.data.metrics
        assert parent.data.metrics[f"verdict/{symbol}/folds"] == 2.0
        assert client.search_model_versions(f"name = 'dqn_coins-{symbol}-smoke'")
