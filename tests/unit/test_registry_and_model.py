"""What the registry calls a policy, how the experiment is marked for the MLflow UI, which MLflow lines are
quiet, and what the registered model's predict accepts: real MLflow on a sqlite store, no Ray."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import envs
from envs.errors import InputError
from experiments.results.policy_model import as_observation_batch, reader_class
from experiments.results.registry import registered_name
from experiments.tracking.comparison import DISPLAY_OPTIONS
from experiments.tracking.runs import EXPERIMENT_KIND_TAG, MODEL_TRAINING_KIND, make_client, open_experiment
from tests.conftest import REPO

ENV = {"data_path": "/data/ETH-USD_1h.parquet", "symbol": "BTC-USD"}
DATA_KEYS = envs.family("trading/Spot-v0").data_keys


@pytest.mark.parametrize("overridden, group, smoke, expected", [
    ([], None, False, "dqn_btc"),
    ([], None, True, "dqn_btc-smoke"),
    (["environment.env_config.data_path"], None, False, "dqn_btc-ETH-USD_1h"),
    (["environment.env_config.data_path", "name"], None, False, "dqn_btc"),  # --set name=... decides
    (["training.lr"], "SOL-USD", True, "dqn_btc-SOL-USD-smoke"),
])
def test_the_registered_name_says_what_the_model_is(overridden, group, smoke, expected):
    name, reasons = registered_name("dqn_btc", overridden, ENV, group, smoke, DATA_KEYS)
    assert name == expected
    assert bool(reasons) == (name != "dqn_btc")


def test_a_name_is_cleaned_to_what_the_registry_accepts():
    name, _ = registered_name("my run", ["environment.env_config.symbol"], {"symbol": "BTC/USD:USD"}, None, False,
                              DATA_KEYS)
    assert name == "my_run-BTC_USD_USD"


def test_experiments_are_marked_as_model_training_new_and_old(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = make_client(uri)
    new = client.get_experiment(open_experiment(client, "fresh", uri))
    assert new.tags[EXPERIMENT_KIND_TAG] == MODEL_TRAINING_KIND == "custom_model_development"
    old_id = client.create_experiment("from_an_older_version")
    open_experiment(client, "from_an_older_version", uri)
    assert client.get_experiment(old_id).tags[EXPERIMENT_KIND_TAG] == MODEL_TRAINING_KIND


def test_creating_a_store_prints_no_mlflow_bookkeeping(tmp_path):
    code = ("from experiments.tracking.runs import make_client, open_experiment; "
            f"uri = 'sqlite:///{tmp_path / 'new.db'}'; open_experiment(make_client(uri), 'x', uri)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)
    assert result.returncode == 0, result.stderr
    assert "Creating initial MLflow database tables" not in result.stderr
    assert (tmp_path / "new.db").exists()  # the store was created: the check is not vacuous


SHAPE = (3, 2)
BATCH = np.arange(12, dtype=np.float32).reshape(2, *SHAPE)


@pytest.mark.parametrize("given", [
    BATCH, BATCH.astype(np.float64), BATCH.astype(np.int64), BATCH.tolist(),
], ids=["float32", "float64", "int64", "list"])
def test_predict_takes_a_batch_in_any_safe_dtype(given):
    batch = as_observation_batch(given, SHAPE)
    assert batch.dtype == np.float32 and np.array_equal(batch, BATCH)


def test_predict_takes_one_observation_and_a_dataframe():
    assert as_observation_batch(BATCH[1], SHAPE).shape == (1, *SHAPE)
    flat = pd.DataFrame(BATCH.reshape(2, 6))
    assert as_observation_batch(flat, (6,)).shape == (2, 6)


@pytest.mark.parametrize("given, fragment", [
    (np.zeros((4, 3, 3)), "must have shape (3, 2) (one) or (n, 3, 2) (a batch); got shape (4, 3, 3)"),
    (np.zeros(5), "got shape (5,)"),
    (np.array([["a", "b"]] * 3), "must be numbers"),
    (np.full((1, *SHAPE), np.nan), "finite"),
    (np.full((1, *SHAPE), 1e300), "beyond float32's range"),
    ([[1.0, 2.0], [3.0]], "rows of different lengths"),
])
def test_predict_refuses_bad_input_in_one_short_line(given, fragment):
    with pytest.raises(ValueError) as error:
        as_observation_batch(given, SHAPE)
    message = str(error.value)
    assert fragment in message and "\n" not in message and len(message) < 200


def test_tables_show_significant_digits_not_rounded_decimals():
    frame = pd.DataFrame({"training.lr": [0.00028, 0.00033], "return": [61.234, 7.0]})
    with pd.option_context(*DISPLAY_OPTIONS):
        text = frame.to_string()
    assert "0.00028" in text and "0.00033" in text and "61.23" in text


def test_the_notebook_uses_the_same_display_options():
    assert "compare.DISPLAY_OPTIONS" in (REPO / "notebooks/compare_runs.ipynb").read_text()


def test_a_version_that_means_something_else_gets_a_name_that_says_so(tmp_path):
    """Four smoke runs put DQN, PPO and DQN with 194 then 218 floats under one name; now each meaning keeps its
    own name, and the same meaning keeps the same name."""
    from mlflow import MlflowClient

    from experiments.results.registry import model_meaning, name_for_meaning

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    dqn = model_meaning("dqn", (194,), "Discrete(2)", {})

    def register(name: str, meaning: dict[str, str]) -> None:
        if not client.search_registered_models(f"name = '{name}'"):
            client.create_registered_model(name)
        client.create_model_version(name, source=str(tmp_path), tags=meaning)

    assert name_for_meaning(client, "dqn_btc-smoke", dqn) == ("dqn_btc-smoke", None)  # a new name
    register("dqn_btc-smoke", dqn)
    assert name_for_meaning(client, "dqn_btc-smoke", dqn) == ("dqn_btc-smoke", None)  # the same meaning
    ppo_name, why = name_for_meaning(client, "dqn_btc-smoke", model_meaning("ppo", (194,), "Discrete(2)", {}))
    assert ppo_name == "dqn_btc-smoke-ppo" and "algorithm dqn -> ppo" in why
    wider, why = name_for_meaning(client, "dqn_btc-smoke", model_meaning("dqn", (218,), "Discrete(2)", {}))
    assert wider == "dqn_btc-smoke-obs218" and "observation_shape 194 -> 218" in why
    short, _ = name_for_meaning(client, "dqn_btc-smoke", model_meaning("dqn", (194,), "Discrete(3)", {}))
    assert short == "dqn_btc-smoke-act3"
    features = model_meaning("dqn", (194,), "Discrete(2)", {"features": ["basic", {"ta": "RSI"}]})
    renamed, why = name_for_meaning(client, "dqn_btc-smoke", features)
    assert renamed.startswith("dqn_btc-smoke-features") and "features default ->" in why
    register(ppo_name, model_meaning("dqn", (10,), "Discrete(2)", {}))  # the derived name is taken by another meaning
    taken, _ = name_for_meaning(client, "dqn_btc-smoke", model_meaning("ppo", (194,), "Discrete(2)", {}))
    assert taken not in ("dqn_btc-smoke", ppo_name)


def test_the_commit_tag_says_when_the_tree_was_dirty():
    import subprocess

    from experiments.plan.provenance import git_commit

    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True,
                           cwd=REPO).stdout.strip()
    assert git_commit().endswith("+dirty") == bool(dirty)


def test_a_model_names_its_env_and_one_registered_before_names_its_readers_class_path():
    """The served model finds its reader through its env's family; a model registered before families were objects
    (its model_config names the reader's class path) still finds the same class, without importing the string."""
    from envs.portfolio.universe_reader import UniverseReader
    from envs.trading.bar_reader import BarReader

    assert reader_class({"env": "trading/Spot-v0"}) is BarReader
    assert reader_class({"input_reader": "envs.trading.bar_reader:BarReader"}) is BarReader
    assert reader_class({"input_reader": "envs.portfolio.universe_reader:UniverseReader"}) is UniverseReader
    assert reader_class({"observation_shape": [3]}) is None
    with pytest.raises(InputError, match=r"'envs.gone:Reader' is no family's reader: register the model again"):
        reader_class({"input_reader": "envs.gone:Reader"})
