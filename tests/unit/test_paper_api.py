"""`api.paper` (experiments/api/paper_trading.py), the session `python -m experiments.paper` prints: silent from
Python, it says what it does through `on_event`, logs the backtest's equity curve to the last digit, resumes where it
stopped, and refuses a model of a family without paper trading before any run opens.

Fast lane: a registry on a temporary sqlite store whose model version is tagged as a registration tags it, and the
registered model's loading replaced by the same reader and policy in process (no training).
tests/integration/test_paper_trading.py paper-trades a trained, registered and served champion.
"""
from __future__ import annotations

from types import SimpleNamespace

import mlflow.pyfunc
import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from envs.errors import InputError
from envs.trading.backtest import evaluate_policy
from envs.trading.bar_reader import BarReader
from envs.trading.data import load_bars, save_bars
from envs.trading.env import SpotTradingEnv
from experiments.api.paper_trading import PaperOptions, paper
from tests.conftest import REPO

FEATURES = {"decision_interval": 4, "positions": "long_short", "features": ["basic", {"ta": "RSI"}],
            "protocol": {"type": "refit", "test_size": 300}, "episode_length": 250}


class LoadedModel:
    """What `mlflow.pyfunc.load_model` gives paper trading: `predict` on the bars, and the model's reader."""

    def __init__(self, reader: BarReader | None, policy) -> None:
        self.reader, self.policy = reader, policy

    def unwrap_python_model(self) -> SimpleNamespace:
        return SimpleNamespace(inputs=self.reader)

    def predict(self, request: pd.DataFrame) -> pd.DataFrame:
        return self.reader.decide(request, self.policy)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> SimpleNamespace:
    """trading/Spot-v0 on the last 1500 BTC bars (the last 300 its test window), a linear policy, its backtest's
    report, and a registry to register it in (one per module: an MLflow store takes seconds to make)."""
    folder = tmp_path_factory.mktemp("paper_api")
    bars = load_bars(REPO / "data" / "raw" / "BTC-USD_1h.parquet").iloc[-1500:]
    path = save_bars(bars, folder / "BTC-USD_1h.parquet", "BTC-USD", "1h")
    cfg = {**FEATURES, "data_path": str(path)}
    width = SpotTradingEnv({**cfg, "split": "test"}).observation_space.shape[0]
    weights = np.random.default_rng(4).normal(size=(width, 3)).astype(np.float32)

    def policy(observations):
        return np.argmax(np.asarray(observations, dtype=np.float32) @ weights, axis=1)

    uri = f"sqlite:///{folder / 'mlflow.db'}"
    return SimpleNamespace(uri=uri, client=MlflowClient(uri), folder=folder, path=str(path), policy=policy,
                           reader=BarReader.for_env_config(cfg), report=evaluate_policy(policy, cfg))


def registered(world: SimpleNamespace, name: str, monkeypatch, reader: BarReader | None,
               env: str = "trading/Spot-v0") -> str:
    """models:/NAME/1 of `env`, tagged as a registration tags it; loading it gives `reader` and the world's policy."""
    world.client.create_registered_model(name)
    world.client.create_model_version(name, source=str(world.folder), tags={"env": env, **world.reader.tags()})
    monkeypatch.setattr(mlflow.pyfunc, "load_model", lambda _uri: LoadedModel(reader, world.policy))
    return f"models:/{name}/1"


def test_a_session_prints_nothing_says_what_it_does_and_logs_its_backtest_to_the_last_digit(world, monkeypatch,
                                                                                              capsys):
    model = registered(world, "m", monkeypatch, world.reader)
    events = []
    options = PaperOptions(start=world.reader.test_start, drift_bars=50, tracking_uri=world.uri)
    result = paper(model, [world.path], options, events.append)
    assert capsys.readouterr() == ("", "")
    kinds = [event.kind for event in events]  # the file holds the test window: a drift band, no "drift_off"
    assert kinds[0] == "started" and set(kinds[1:]) == {"drift_alarm"}
    assert events[0].text == f"paper trading m version 1 on {world.path}: MLflow run {result.run_id}"
    client = world.client
    run = client.get_run(result.run_id)
    assert events[-1].text == f"drift alarm at {run.data.tags['drift']} (band: the model's backtest)"
    equity = sorted(client.get_metric_history(result.run_id, "equity"), key=lambda metric: metric.step)
    assert [metric.value for metric in equity] == list(world.report.series["agent"])  # to the last digit
    assert run.data.metrics["fills"] == world.report.table.loc["agent", "trades"]
    assert (result.name, result.version, result.resumed_after) == ("m", "1", None)
    assert result.book.last_bar == world.reader.test_end
    assert result.summary.startswith(f"equity {world.report.table.loc['agent', 'final_equity']:.4f}")

    again = []
    resumed = paper(model, [world.path], options, again.append)
    assert resumed.run_id == result.run_id and resumed.resumed_after == world.reader.test_end
    assert again[0].text.endswith(f", resumed after {world.reader.test_end}")
    assert len(client.get_metric_history(result.run_id, "equity")) == len(equity)  # no bar twice


def test_without_its_test_window_the_drift_alarm_is_off_and_says_why(world, monkeypatch):
    model = registered(world, "short", monkeypatch, world.reader)
    events = []
    paper(model, [world.path], PaperOptions(start=world.reader.test_start, drift_bars=200, tracking_uri=world.uri),
          events.append)
    assert [event.kind for event in events] == ["drift_off", "started"]
    assert events[0].text.startswith(f"drift alarm off: {world.path} does not hold the model's test window")


def test_a_model_that_reads_no_bars_is_refused_before_any_run_opens(world, monkeypatch):
    model = registered(world, "cartpole", monkeypatch, None, env="CartPole-v1")
    with pytest.raises(InputError, match=r"models:/cartpole/1: CartPole-v1 has no paper trading \(envs.abilities."
                                         r"PaperTrades: trading/Spot-v0, trading/Portfolio-v0\): paper trading "
                                         r"replays a model that reads bars"):
        paper(model, [world.path], PaperOptions(tracking_uri=world.uri))
    assert world.client.get_experiment_by_name("cartpole-paper") is None
