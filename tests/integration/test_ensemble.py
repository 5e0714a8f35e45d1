"""`ensemble: {over: seeds}` end to end on real Ray, RLlib, Tune and MLflow, with the direct learner (algos/direct/,
the cheapest to train): the crypto portfolio file's smoke test (one walk-forward fold, two seeds) trains through the
pipeline, registers its single chosen trial (which serves), and makes the ensemble of the two seeds, the verdict
judges it beside the single chosen trial and the trials ledger counts it as one more attempt, and its registered
version (alias `ensemble`) serves the universe's bars and paper-trades its test window to the last digit of its
backtest."""
from __future__ import annotations

import mlflow
import pandas as pd
from mlflow.tracking import MlflowClient

from algos.export.ensemble_policy import EnsemblePolicy
from envs.portfolio.baselines import BASELINES
from experiments.paper import main as paper
from experiments.run import main
from tests.conftest import REPO

NAME = "direct_portfolio_crypto"
MODEL = f"{NAME}-smoke"
COINS = ("BTC", "ETH", "LTC", "XRP", "EOS")


def test_an_ensemble_of_two_seeds_is_judged_counted_registered_served_and_paper_traded(tmp_path, joined, capsys):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    code = main([str(REPO / f"conf/{NAME}.yaml"), "--smoke-test", "--no-dashboard", "--output", str(tmp_path),
                 "--set", f"tracking.tracking_uri={uri}", "--set", "ensemble.over=seeds",
                 "--set", "evaluation.protocol.folds=1", "--set", "tune.num_samples=1", *joined])
    assert code == 0
    printed = capsys.readouterr().out
    assert "ensemble verdict over attempt 2 on these windows" in printed
    assert all(f"ensemble edge over {baseline.name}: not supported" in printed for baseline in BASELINES)
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name(NAME).experiment_id])
    parent = next(r for r in runs if r.data.tags.get("role") == "sweep")
    [ensemble_run] = [r for r in runs if r.data.tags.get("role") == "ensemble"]
    trials = [r for r in runs if r.data.tags.get("mlflow.parentRunId") and r is not ensemble_run]
    assert sorted(r.data.params["seed"] for r in trials) == ["0", "1"]  # the smoke test kept two seeds
    assert ensemble_run.info.status == "FINISHED" and ensemble_run.data.tags["ensemble.over"] == "seeds"
    assert ensemble_run.data.tags["ensemble.decision"] == "the mean of 2 members' weights"
    # Its verdict: a line per baseline on the parent, and one more configuration and attempt than the single trial's
    for baseline in BASELINES:
        assert f"ensemble/verdict/dsr/{baseline.name}" in parent.data.metrics, baseline.name
        assert f"ensemble.verdict.{baseline.name}" in parent.data.tags
    assert parent.data.metrics["verdict/attempt"] == 1 and parent.data.metrics["ensemble/verdict/attempt"] == 2
    assert parent.data.metrics["ensemble/verdict/configurations_tried"] == 2
    assert ensemble_run.data.tags["verdict"].startswith("edge over ucrp: ")
    ledger = client.get_experiment_by_name("trials-ledger").tags
    assert ledger[f"ledger.{parent.data.tags['ledger.key']}.attempts"] == "2"
    # Registered beside the single chosen trial: the alias names the ensemble's version, attached to its run
    single = client.get_model_version(MODEL, "1")
    version = client.get_model_version_by_alias(MODEL, "ensemble")
    assert str(version.version) == "2" and version.run_id == ensemble_run.info.run_id and single.tags["seed"] in "01"
    assert version.tags["seed"] == "0,1" and version.tags["ensemble"] == "seeds"
    mlflow.set_tracking_uri(uri)
    model = mlflow.pyfunc.load_model(f"models:/{MODEL}@ensemble")
    assert isinstance(model.unwrap_python_model().policy, EnsemblePolicy)
    alone = mlflow.pyfunc.load_model(f"models:/{MODEL}/1")  # the single chosen direct trial, exported to numpy
    assert alone.unwrap_python_model().policy.algorithm == "direct"
    columns: dict = {}
    for coin in COINS:
        bars = pd.read_parquet(REPO / "data" / "raw" / "bitfinex" / f"{coin}-USD_1h.parquet").iloc[-200:]
        columns["timestamp"] = bars.index.astype(str)
        columns.update({f"{coin}-USD:{field}": bars[field].to_numpy() for field in bars.columns})
    for served in (model, alone):
        answer = served.predict(pd.DataFrame(columns))
        assert list(answer["asset"]) == ["cash", *(f"{coin}-USD" for coin in COINS)]
        assert abs(answer["target_weight"].sum() - 1.0) < 1e-9 and (answer["target_weight"] >= 0).all()
    # Paper trading the ensemble over its test window is its backtest to the last digit
    files = [str(REPO / "data" / "raw" / "bitfinex" / f"{coin}-USD_1h.parquet") for coin in COINS]
    assert paper([f"models:/{MODEL}@ensemble", "--bars", *files, "--start", version.tags["test_start"],
                  "--tracking-uri", uri]) == 0
    [session] = client.search_runs([client.get_experiment_by_name(f"{MODEL}-paper").experiment_id])
    equity = {m.step: m.value for m in client.get_metric_history(session.info.run_id, "equity")}
    test_end = int(pd.Timestamp(version.tags["test_end"]).timestamp())
    assert equity[test_end] == ensemble_run.data.metrics["eval/final_equity"]  # to the last digit
    assert min(equity) == int(pd.Timestamp(version.tags["test_start"]).timestamp())
