"""A hypothesis written as a feature list, through the whole pipeline: TA-Lib indicators, 4h and 1d context, another
market (Bitfinex ETH-USD) and an outside series (the S&P 500, published a day later) on Bitfinex BTC-USD, as
`conf/dqn_btc_research.yaml` ships it, with the smoke budget."""
from __future__ import annotations

from mlflow.tracking import MlflowClient

from experiments.run import main
from tests.conftest import REPO


def test_the_research_conf_runs_end_to_end(tmp_path, capsys, joined):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    code = main([str(REPO / "conf/dqn_btc_research.yaml"), "--smoke-test", "--no-dashboard", "--output",
                 str(tmp_path), "--set", f"tracking.tracking_uri={uri}", *joined])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    assert "features: 21 columns of 19 feature(s), warm-up 669 bars" in out
    client = MlflowClient(uri)
    parent = client.search_runs([client.get_experiment_by_name("dqn_btc_research").experiment_id],
                                "tags.role = 'sweep'")[0]
    assert parent.data.metrics["verdict/attempt"] == 1.0
    importance = client.download_artifacts(parent.info.run_id, "importance/importance.csv")
    names = open(importance).read()
    for feature in ("MACD(12,26,9)", "4h:RSI(14)", "1d:trend_20", "ETH:log_return", "SP500:log_return"):
        assert feature in names
    assert len(list((tmp_path / "features").glob("*.arrow"))) == 1
