"""One model per coin: a grid over symbols on synthetic markets, scored and registered per coin."""
from __future__ import annotations

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from experiments.run import main
from tests.conftest import REPO

pytestmark = pytest.mark.slow


def test_coins_smoke_sweep_has_a_per_coin_table(tmp_path, capsys):
    import ray

    ray.shutdown()
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    code = main([str(REPO / "conf/dqn_coins.yaml"), "--smoke-test", "--no-dashboard", "--output", str(tmp_path),
                 "--set", f"tracking.tracking_uri={uri}"])
    assert code == 0
    assert "SYNTHETIC" in capsys.readouterr().out
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("dqn_coins").experiment_id])
    parent = next(r for r in runs if r.data.tags.get("role") == "sweep")
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    symbols = sorted(r.data.params["environment.env_config.symbol"] for r in children)
    assert symbols == ["BTC-USD", "ETH-USD"]
    assert all(r.data.tags["symbol"] == r.data.params["environment.env_config.symbol"] for r in children)
    table = pd.read_csv(client.download_artifacts(parent.info.run_id, "evaluation/per_group.csv"), index_col=0)
    assert sorted(table.index) == symbols
    assert {"agent_sharpe", "buy_and_hold_sharpe", "agent_total_return", "buy_and_hold_total_return"} <= set(table)
    for symbol in symbols:
        assert f"eval/{symbol}/sharpe" in parent.data.metrics
        assert client.search_model_versions(f"name = 'dqn_coins-{symbol}'")
