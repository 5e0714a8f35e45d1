"""The refit (`experiments.retrain --refit`, issue 51): the champion's configuration trained through the newest bar.

Fast lane, no Ray: the refit protocol's parts, the window from the champion's first training bar through the newest
one, the recipe read from the champion's runs, the configuration check, the `retrain.refit` key and the flags in a
dry run against a registry that holds a champion, the stale alias, and a paper replay of a refit's env over the bars
after its last training bar against its backtest. tests/integration/test_refit_serving.py trains and registers a
real one.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from rich.console import Console

from envs.errors import InputError
from envs.splits import Protocol
from envs.trading.backtest import evaluate_policy
from envs.trading.bar_reader import BarReader
from envs.trading.data import load_bars, save_bars
from envs.trading.env import SpotTradingEnv
from experiments.api.preflight import load
from experiments.api.refit_plan import (
    configuration_changes,
    logged_protocol,
    recipe_of,
    refit_window,
)
from experiments.api.refitting import logged_params
from experiments.api.retraining import retire_stale_refit
from experiments.retrain import main as retrain
from tests.conftest import REPO, paper_replay_of_test_window

CONF = REPO / "conf" / "dqn_btc.yaml"
BARS = load_bars(REPO / "data" / "raw" / "BTC-USD_1h.parquet")
WALK = Protocol.from_dict({"type": "walk_forward", "folds": 4, "train": "expanding", "validation_size": 1500,
                           "test_size": 1500, "embargo": 24})


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


# --- The refit protocol (envs.splits, type refit)

def test_a_refit_trains_on_every_row_and_keeps_out_only_the_rows_after_it_for_a_backtest():
    assert Protocol.from_dict({"type": "refit"}).fold(1000, 0, min_rows=24).part("train") == (0, 1000)
    later = Protocol.from_dict({"type": "refit", "test_size": 200}).fold(1200, 0, min_rows=24)
    assert later.train == (0, 1000) and later.test == (1000, 1200) and later.validation == (1000, 1000)
    rolling = Protocol.from_dict({"type": "refit", "train": "rolling", "train_size": 600}).fold(1000, 0)
    assert rolling.train == (400, 1000)


@pytest.mark.parametrize("extra, key", [({"folds": 2}, "folds"), ({"validation_size": 100}, "validation_size"),
                                        ({"embargo": 24}, "embargo")])
def test_a_refit_protocol_with_a_part_it_does_not_have_is_refused_in_one_line(extra, key):
    with pytest.raises(InputError, match=rf"^env_config\.protocol\.{key}: a refit is one fold with no validation "):
        Protocol.from_dict({"type": "refit", **extra}, "env_config.protocol")


def test_an_experiment_cannot_select_or_score_on_a_refit_protocol(capsys):
    from experiments.run import main as run

    assert run([str(CONF), "--dry-run", "--set", "evaluation.protocol={type: refit}"]) == 2
    error = one_line(capsys)
    assert "evaluation.protocol" in error and "type refit holds out nothing to select or score on" in error


# --- The bars a refit trains on

def test_the_window_runs_from_the_champions_first_training_bar_through_the_newest_bar():
    champion_end = BARS.index[-721]  # the champion's data: the bars before a 720-bar forward window
    window = refit_window(BARS.index, WALK, 3, champion_end, "bars")
    assert (window.first_bar, window.last_bar, window.bars) == (BARS.index[0], BARS.index[-1], len(BARS))
    assert window.protocol == {"type": "refit", "train": "expanding"}
    # The champion trained through its fold's train part only: the refit adds its validation, test and forward bars
    champion_fold = WALK.fold(len(BARS) - 720, 3)
    assert champion_fold.train[1] == len(BARS) - 720 - 1500 - 24 - 1500 - 24
    rolling = Protocol.from_dict({**WALK.as_dict(), "train": "rolling", "train_size": 5000})
    window = refit_window(BARS.index, rolling, 3, champion_end, "bars")
    first = rolling.fold(len(BARS) - 720, 3).train[0]
    assert window.first_bar == BARS.index[first] and window.bars == len(BARS) - first
    assert Protocol.from_dict(window.protocol).fold(len(BARS), 0).train == (first, len(BARS))


def test_bars_that_do_not_hold_the_champions_last_bar_are_refused_in_one_line():
    with pytest.raises(InputError, match="does not hold 2019-10-17 10:00:00.00:00, the last bar of the champion's"):
        refit_window(BARS.index, WALK, 3, pd.Timestamp("2019-10-17 10:00", tz="UTC"), "bars")


# --- What the champion was trained with

def champion_params(**changes: str) -> dict[str, str]:
    """A champion's trial params, as the sweep logs them: the file's settings, its searched value and seed."""
    return {**logged_params(load(CONF, [], False)), "training.n_step": "1", "seed": "1", **changes}


def test_the_recipe_is_the_champions_searched_values_seed_iterations_and_protocol():
    tags = {"fold": "3", "data_end": str(BARS.index[-721]), "retrain/mode": "full", "parent_version": "none"}
    recipe = recipe_of("m", "1", tags, champion_params(), {"best_checkpoint_iteration": "5"},
                       ["training.n_step", "environment.env_config.fold"])
    assert (recipe.searched, recipe.seed, recipe.iterations, recipe.fold) == ({"training.n_step": "1"}, "1", 5, 3)
    assert recipe.protocol == WALK and recipe.warm_started_from is None
    warm = recipe_of("m", "4", {**tags, "retrain/mode": "incremental", "parent_version": "2"}, champion_params(),
                     {"best_checkpoint_iteration": "2"}, ["training.n_step"])
    assert warm.warm_started_from == "2" and warm.iterations == 2
    with pytest.raises(InputError, match="models:/m/1: its sweep run records no best_checkpoint_iteration"):
        recipe_of("m", "1", tags, champion_params(), {}, ["training.n_step"])


def test_a_holdout_champions_protocol_is_the_default():
    params = {k: v for k, v in champion_params().items() if not k.startswith("environment.env_config.protocol.")}
    assert logged_protocol(params) == Protocol()


def test_a_changed_setting_is_a_change_of_configuration_and_where_the_bars_are_is_not():
    logged = champion_params()
    moved = {**logged, "environment.env_config.data_path": "/elsewhere.parquet",
             "environment.env_config.protocol.type": "refit", "environment.env_config.fold": "0"}
    assert configuration_changes(logged, moved, ["data_path"]) == []
    assert configuration_changes(logged, {**logged, "training.lr": "0.001"}, ["data_path"]) == [
        "training.lr 0.0005 -> 0.001"]


# --- Paper trading a refit over the bars after its last training bar

def linear_policy(width: int, actions: int, seed: int = 4):
    weights = np.random.default_rng(seed).normal(size=(width, actions)).astype(np.float32)
    return lambda observations: np.argmax(np.asarray(observations, dtype=np.float32) @ weights, axis=1)


def test_paper_trading_a_refit_over_the_bars_after_its_last_training_bar_is_its_backtest_to_the_last_digit(tmp_path):
    """The refit's reader is made on the file it trained on (all of it); the backtest runs the same configuration on
    the file with 500 more bars, cut so that those are its test part: the same train rows, so the same
    normalization, and the paper replay over the new bars is the backtest's equity curve."""
    later = 500
    trained_on = save_bars(BARS.iloc[:-later], tmp_path / "BTC-USD_1h.parquet", "BTC-USD", "1h")
    common = {"decision_interval": 4, "positions": "long_short", "features": ["basic", {"ta": "RSI"}]}
    reader = BarReader.for_env_config({**common, "data_path": str(trained_on), "protocol": {"type": "refit"}})
    assert reader.data_end == BARS.index[-later - 1].isoformat() and reader.test_start == ""
    backtest = {**common, "data_path": str(REPO / "data" / "raw" / "BTC-USD_1h.parquet"),
                "protocol": {"type": "refit", "test_size": later}}
    env = SpotTradingEnv({**backtest, "split": "test", "episode_length": None})
    assert np.array_equal(env.market.feature_mean, reader.mean) and np.array_equal(env.market.feature_std, reader.std)
    policy = linear_policy(env.observation_space.shape[0], env.action_space.n)
    report = evaluate_policy(policy, backtest)
    equity, book = paper_replay_of_test_window(reader, policy, BARS, env)
    assert env.market.bounds["test"] == (len(BARS) - later, len(BARS))
    assert np.array_equal(equity, report.series["agent"].to_numpy())
    assert book.ledger.trades == report.table.loc["agent", "trades"] > 10


# --- The key, the flags and the dry run, against a registry (one per module: an MLflow store takes seconds to make)

@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    """A tracking store with three champions as a retrain records them: models:/dqn_btc/1 (its trial run's params, its
    sweep run's checkpoint iteration, its data ending before the newest 720 bars); models:/nobudget/1, whose sweep run
    records no checkpoint iteration; models:/warm/1, an incremental one (warm-started from version 7 with the file's
    retrain.incremental.settings, on its newest fold). The commands read it through MLFLOW_TRACKING_URI."""
    folder = tmp_path_factory.mktemp("refit_store")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("dqn_btc")
    incremental = {"training.epsilon": "[[0, 0.1], [4000, 0.02]]", "environment.env_config.protocol.folds": "1"}
    for name, iterations, params, lineage in (
            ("dqn_btc", "5", {}, {"retrain/mode": "full", "parent_version": "none", "fold": "3"}),
            ("nobudget", "", {}, {"retrain/mode": "full", "parent_version": "none", "fold": "3"}),
            ("warm", "2", incremental, {"retrain/mode": "incremental", "parent_version": "7", "fold": "0"})):
        sweep = client.create_run(experiment, tags={"best_checkpoint_iteration": iterations}).info.run_id
        trial = client.create_run(experiment).info.run_id
        for key, value in champion_params(**params).items():
            client.log_param(trial, key, value)
        client.create_registered_model(name)
        client.create_model_version(name, source=str(folder), run_id=trial, tags={
            "parent_run_id": sweep, "data_end": str(BARS.index[-721]), "forward_end": str(BARS.index[-721]),
            **lineage})
        client.set_registered_model_alias(name, "champion", "1")
    with pytest.MonkeyPatch.context() as environment:
        environment.setenv("MLFLOW_TRACKING_URI", uri)
        yield uri


def test_the_refit_key_is_checked_by_the_file_and_said_by_the_dry_run(store, capsys):
    fresh = ["--set", "name=fresh"]  # no champion yet
    assert retrain([str(CONF), "--dry-run", *fresh, "--set", "retrain.refit=maybe"]) == 2
    assert "retrain.refit: Input should be a valid boolean (got 'maybe')" in one_line(capsys)
    assert retrain([str(CONF), "--dry-run", *fresh, "--set", "retrain.refit=true"]) == 0
    assert "refit after the gate: the champion's configuration through 2019-10-17 09:00" in capsys.readouterr().out
    assert retrain([str(CONF), "--dry-run", *fresh]) == 0  # the shipped file does not refit
    assert "refit" not in capsys.readouterr().out


@pytest.mark.parametrize("flags, says", [
    (["--refit-only", "--promote"], "--refit-only trains no challenger and refits the champion: leave out --promote"),
    (["--refit-only", "--set", "name=fresh"], "models:/fresh@champion does not exist: --refit-only refits the champ"),
])
def test_refit_only_without_a_champion_or_with_a_challengers_flag_is_refused_in_one_line(store, capsys, flags, says):
    assert retrain([str(CONF), "--dry-run", *flags]) == 2
    assert says in one_line(capsys)


def test_the_dry_run_plans_the_champions_refit_through_the_newest_bar(store, capsys):
    assert retrain([str(CONF), "--dry-run", "--refit-only"]) == 0
    assert ("refit: models:/dqn_btc/1's configuration (training.n_step=1, seed 1, 5 iteration(s)) on "
            "2017-07-01 11:00 .. 2019-10-17 09:00 (20,111 bars, none held out)") in capsys.readouterr().out


def test_an_incremental_champions_refit_starts_where_it_started_with_the_settings_it_had(store, capsys):
    """Its warm start and retrain.incremental.settings are its configuration: the refit has them, so the file still
    gives the champion's configuration."""
    assert retrain([str(CONF), "--dry-run", "--refit-only", "--set", "name=warm"]) == 0
    assert ("refit: models:/warm/1's configuration (training.n_step=1, seed 1, 2 iteration(s), warm-started from "
            "version 7's checkpoint) on 2017-07-01 11:00 .. 2019-10-17 09:00") in capsys.readouterr().out


def test_a_refit_of_a_configuration_the_file_no_longer_has_is_refused_before_anything_trains(store, capsys):
    assert retrain([str(CONF), "--dry-run", "--refit", "--set", "training.lr=0.001"]) == 2
    error = one_line(capsys)
    assert "training.lr 0.0005 -> 0.001 since models:/dqn_btc/1 was trained: a refit trains the champion's" in error


def test_a_champion_without_the_iterations_of_its_checkpoint_cannot_be_refit(store, capsys):
    assert retrain([str(CONF), "--dry-run", "--refit", "--set", "name=nobudget"]) == 2
    assert "models:/nobudget/1: its sweep run records no best_checkpoint_iteration" in one_line(capsys)


def test_a_champion_promoted_without_a_refit_retires_the_refit_of_the_one_before(tmp_path, capsys):
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    client.create_registered_model("m")
    for refits in ("", "1", ""):
        client.create_model_version("m", source=str(tmp_path), tags={"refit_of": refits} if refits else {})
    client.set_registered_model_alias("m", "refit", "2")
    retire_stale_refit(client, "m", "1", Console())  # version 2 refits the champion: kept
    assert client.get_registered_model("m").aliases == {"refit": 2}
    retire_stale_refit(client, "m", "3", Console())
    assert client.get_registered_model("m").aliases == {}
    assert "models:/m@refit removed: version 2 refits version 1, no longer the champion" in capsys.readouterr().out
