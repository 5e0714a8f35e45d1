"""A refit on real Ray, Tune and MLflow (issue 51): the champion's configuration trained through the newest bar,
registered as its own version, then paper-traded over the bars after its last training bar exactly as its backtest.

The bundled bars lose their newest 240 bars, which play the bars that have not arrived yet. One retrain on a smoke
budget (one fold, one trial; `--promote`, since a smoke challenger never becomes champion on its own) makes a
champion (version 1) and, with `--refit`, its refit on every bar it has (version 2). The 240 bars then arrive with
`experiments.data update`; the refit is paper traded over them (its default start: the first bar after its last
training bar) and backtested on them. An incremental retrain on them, promoted with --refit, makes the next champion
(version 3) and its refit (version 4), warm-started where version 3 started. tests/unit/test_refit.py holds the
window, the recipe and the key without Ray.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.conftest import REPO
from tests.integration.conftest import OperationsLoop
from tests.servers import joining

FUTURE = 240
CONF = REPO / "conf" / "dqn_btc.yaml"


@pytest.fixture(scope="module")
def refit_loop(tmp_path_factory, ray_cluster) -> OperationsLoop:
    """`first`: the retrain with --refit; `too_early`: --refit-only with no new bar; `update`: the 240 bars
    arriving; `second`: an incremental retrain on them with --refit. Both retrains join the session's Ray."""
    from envs.trading.data import load_bars, save_bars

    root = tmp_path_factory.mktemp("refit")
    bars = load_bars(REPO / "data" / "raw" / "BTC-USD_1h.parquet")
    data = save_bars(bars.iloc[:-FUTURE], root / "BTC-USD_1h.parquet", "BTC-USD", "1h")
    future = save_bars(bars.iloc[-FUTURE:], root / "future.parquet", "BTC-USD", "1h")
    loop = OperationsLoop(root, f"sqlite:///{root / 'mlflow.db'}", data, *([None] * 4))
    retrain = ["experiments.retrain", CONF, "--smoke-test", "--no-dashboard", "--output", root / "runs",
               "--set", f"environment.env_config.data_path={data}", "--set", "evaluation.protocol.folds=1"]
    with joining(ray_cluster) as joined:
        loop.first = loop.call(*retrain, "--mode", "full", "--promote", "--refit", *joined)
    loop.too_early = loop.call(*retrain, "--refit-only")
    loop.update = loop.call("experiments.data", "update", data, "--from", future)
    with joining(ray_cluster) as joined:
        loop.second = loop.call(*retrain, "--promote", "--refit", "--set", f"retrain.forward_bars={FUTURE}", *joined)
    return loop


def test_the_refit_is_its_own_version_tagged_with_what_was_and_was_not_verified(refit_loop):
    from envs.trading.data import load_bars

    loop = refit_loop
    out = loop.first.stdout
    assert loop.first.returncode == 0, out[-3000:] + loop.first.stderr[-3000:]
    client = loop.client
    champion, refit = (client.get_model_version(loop.model, v) for v in ("1", "2"))
    trained = load_bars(REPO / "data" / "raw" / "BTC-USD_1h.parquet").iloc[:-FUTURE]
    tags = refit.tags
    assert tags["refit_of"] == "1" and tags["parent_version"] == "1" and tags["retrain/mode"] == "refit"
    assert tags["verified"] == ("configuration chosen on validation bars and forward-tested on held-out bars "
                                "(version 1); refit weights not tested out of sample")
    # Every bar it had, the champion's validation, test and forward bars included; nothing held out
    assert pd.Timestamp(tags["refit/first_bar"]) == trained.index[0]
    assert pd.Timestamp(tags["refit/last_bar"]) == pd.Timestamp(tags["data_end"]) == trained.index[-1]
    assert int(tags["refit/bars"]) == len(trained) and tags["test_start"] == ""
    assert pd.Timestamp(champion.tags["data_end"]) < trained.index[-720]  # the champion never saw the newest bars
    # Its configuration, seed and the iterations of the champion's checkpoint
    sweep = client.get_run(champion.tags["parent_run_id"]).data.tags
    assert tags["refit/iterations"] == sweep["best_checkpoint_iteration"] and tags["seed"] == champion.tags["seed"]
    run, champion_run = client.get_run(refit.run_id), client.get_run(champion.run_id)
    assert run.data.params["training.n_step"] == champion_run.data.params["training.n_step"]
    assert run.data.metrics["training_iteration"] == int(tags["refit/iterations"])
    assert client.get_run(tags["parent_run_id"]).data.tags["role"] == "refit"
    assert refit.description.startswith("refit of version 1: models:/dqn_btc-smoke/1's configuration")
    assert "models:/dqn_btc-smoke/1 -> @champion: first champion, forced with --promote" in out  # kept
    assert "models:/dqn_btc-smoke/2 -> @refit: version 1's configuration trained through" in out
    assert "serve it: " in out and "'models:/dqn_btc-smoke@refit'" in out


def test_a_refit_already_made_through_the_newest_bar_is_not_made_again(refit_loop):
    again = refit_loop.too_early
    assert again.returncode == 0, again.stdout + again.stderr
    assert "nothing to refit: models:/dqn_btc-smoke/2 (@refit) refits version 1 through" in again.stdout
    # the next version is the next retrain's challenger: --refit-only registered none
    assert refit_loop.client.get_model_version(refit_loop.model, "3").tags["retrain/mode"] == "incremental"


def test_paper_trading_the_refit_over_the_bars_after_its_last_training_bar_is_its_backtest_to_the_last_digit(
        refit_loop):
    import mlflow

    from envs.trading.backtest import evaluate_policy
    from envs.trading.env import SpotTradingEnv
    from experiments.api.preflight import load

    loop = refit_loop
    assert loop.update.returncode == 0 and f"appended {FUTURE} 1h bars" in loop.update.stdout
    paper = loop.call("experiments.paper", f"models:/{loop.model}/2", "--bars", loop.data)
    assert paper.returncode == 0, paper.stdout + paper.stderr
    client = loop.client
    refit = client.get_model_version(loop.model, "2")
    [session] = client.search_runs([client.get_experiment_by_name(f"{loop.model}-paper").experiment_id])
    equity = sorted(client.get_metric_history(session.info.run_id, "equity"), key=lambda m: m.step)
    assert len(equity) == FUTURE
    assert pd.Timestamp(equity[0].step, unit="s", tz="UTC") > pd.Timestamp(refit.tags["refit/last_bar"])
    # Its backtest: the refit's env on the grown file, the bars after its last training bar as the test part
    env_config = load(CONF, [f"environment.env_config.data_path={loop.data}", "evaluation.protocol=null",
                             f"environment.env_config.protocol={{type: refit, test_size: {FUTURE}}}"],
                      True).environment.env_config
    mlflow.set_tracking_uri(loop.tracking_uri)
    model = mlflow.pyfunc.load_model(f"models:/{loop.model}/2").unwrap_python_model()
    env = SpotTradingEnv({**env_config, "split": "test", "episode_length": None})
    assert np.array_equal(env.market.feature_mean, model.inputs.mean)  # normalized on the bars it trained on
    backtest = evaluate_policy(model.policy, env_config).agent_metrics
    assert equity[-1].value == backtest["eval/final_equity"]  # to the last digit
    assert session.data.metrics["fills"] == backtest["eval/trades"]


def test_the_next_champions_refit_replaces_the_alias_and_starts_where_that_champion_started(refit_loop):
    """An incremental champion was warm-started from its parent's checkpoint with retrain.incremental.settings: its
    refit is too, through the bars that arrived."""
    loop = refit_loop
    out = loop.second.stdout
    assert loop.second.returncode == 0, out[-3000:] + loop.second.stderr[-3000:]
    client = loop.client
    assert client.get_registered_model(loop.model).aliases == {"champion": 3, "refit": 4}
    champion, refit = (client.get_model_version(loop.model, v) for v in ("3", "4"))
    assert champion.tags["retrain/mode"] == "incremental" and champion.tags["parent_version"] == "1"
    assert refit.tags["refit_of"] == "3" and refit.tags["refit/warm_start"] == "1"
    assert pd.Timestamp(refit.tags["refit/last_bar"]) == pd.Timestamp(champion.tags["forward_end"])
    params, champion_params = (client.get_run(v.run_id).data.params for v in (refit, champion))
    assert params["training.epsilon"] == champion_params["training.epsilon"] == "[[0, 0.1], [4000, 0.02]]"
    assert params["warm_start"].endswith("champion-v1/best_checkpoint")
