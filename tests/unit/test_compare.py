"""experiments.compare on a temporary MLflow store holding two sweeps on two coins."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from mlflow.entities import Metric, Param  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

from envs.errors import InputError  # noqa: E402
from experiments.compare import main  # noqa: E402
from experiments.tracking import comparison as compare  # noqa: E402


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Two sweeps (BTC-USD, then ETH-USD) with two trials each; the BTC sweep has an evaluation table."""
    folder = tmp_path_factory.mktemp("compare")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    client = MlflowClient(uri)
    exp_id = client.create_experiment("exp", artifact_location=(folder / "artifacts").as_uri())
    sweeps = {}
    for start, symbol in enumerate(["BTC-USD", "ETH-USD"]):
        parent = client.create_run(exp_id, run_name=f"sweep-{symbol}", start_time=1000 * (start + 1),
                                   tags={"role": "sweep", "symbol": symbol, "env": "trading/Spot-v0"})
        pid = parent.info.run_id
        client.log_batch(pid, metrics=[Metric("eval/sharpe", 0.5 + start, 0, 0)],
                         params=[Param("training.lr", "0.0005")])
        for trial in range(2):
            # Each trial is tagged with its own coin (as the trading family tags runs).
            child = client.create_run(exp_id, run_name=f"{symbol}_trial_{trial}",
                                      start_time=1000 * (start + 1) + trial + 1,
                                      tags={"mlflow.parentRunId": pid, "symbol": symbol,
                                            "env": "trading/Spot-v0"})
            cid = child.info.run_id
            lr = 1e-4 * (trial + 1)
            coin = [Param("environment.env_config.symbol", symbol)]
            client.log_batch(cid, params=[Param("training.lr", str(lr)), Param("training.gamma", "0.99"),
                                          Param("training.dueling", "True"), *coin], metrics=[
                Metric(key, value * (trial + 1), 0, step)
                for step in (1, 2, 3)
                for key, value in ((compare.TRAIN_RETURN, step), (compare.EVAL_RETURN, -step))])
            client.set_terminated(cid)
        client.set_terminated(pid)
        sweeps[symbol] = pid
    table = folder / "evaluation.csv"
    pd.DataFrame({"total_return": [0.1, 0.05]}, index=["agent", "buy_and_hold"]).to_csv(table)
    client.log_artifact(sweeps["BTC-USD"], str(table), "evaluation")
    return uri, client, exp_id, sweeps


def test_settings_precedence(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("EXPERIMENT_NAME", raising=False)
    assert compare.settings() == ("sqlite:///mlruns/mlflow.db", None)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////x/mlflow.db")
    monkeypatch.setenv("EXPERIMENT_NAME", "from_env")
    assert compare.settings() == ("sqlite:////x/mlflow.db", "from_env")
    assert compare.settings("http://host:5000", "given") == ("http://host:5000", "given")


def test_without_a_name_the_experiment_with_the_newest_sweep_is_compared(tmp_path):
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    with pytest.raises(InputError, match="no sweep runs yet"):
        compare.newest_experiment(client)
    for name, start in (("newer", 2_000), ("older", 1_000)):
        run = client.create_run(client.create_experiment(name), start_time=start, tags={"role": "sweep"})
        client.set_terminated(run.info.run_id)
    client.create_run(client.get_experiment_by_name("older").experiment_id, start_time=3_000)  # not a sweep
    assert compare.newest_experiment(client) == "newer"


def test_open_client_refuses_a_missing_sqlite_file(tmp_path):
    with pytest.raises(InputError, match="no MLflow store"):
        compare.open_client(f"sqlite:///{tmp_path / 'absent.db'}")
    assert not (tmp_path / "absent.db").exists()


def test_unknown_experiment_lists_the_known_ones(store):
    _, client, _, _ = store
    with pytest.raises(InputError, match=r"known: \[.*'exp'"):
        compare.experiment_id(client, "nope")


def test_parents_children_and_latest_pick(store):
    uri, client, exp_id, sweeps = store
    assert compare.experiment_id(compare.open_client(uri), "exp") == exp_id
    parents = compare.parent_runs(client, exp_id)
    assert [r.info.run_id for r in parents] == [sweeps["ETH-USD"], sweeps["BTC-USD"]]  # newest first
    assert compare.pick_parent(parents).info.run_id == sweeps["ETH-USD"]
    assert compare.pick_parent(parents, sweeps["BTC-USD"]).info.run_id == sweeps["BTC-USD"]
    with pytest.raises(InputError):
        compare.pick_parent(parents, "missing")
    with pytest.raises(InputError):
        compare.pick_parent([])
    children = compare.child_runs(client, exp_id, sweeps["BTC-USD"])
    assert [compare.trial_label(r) for r in children] == ["BTC-USD_trial_0", "BTC-USD_trial_1"]


def test_runs_table_has_numeric_params_and_last_values(store):
    _, client, exp_id, sweeps = store
    children = compare.child_runs(client, exp_id, sweeps["BTC-USD"])
    table = compare.runs_table(children, params=("training.lr", "training.dueling", "absent"))
    assert list(table["training.lr"]) == [1e-4, 2e-4]
    assert list(table["training.dueling"]) == ["True", "True"]
    assert table["absent"].isna().all()
    assert list(table[compare.EVAL_RETURN]) == [-3.0, -6.0]  # the latest value
    assert set(table["symbol"]) == {"BTC-USD"} and set(table["status"]) == {"FINISHED"}
    parents = compare.runs_table(compare.parent_runs(client, exp_id), params=(), metrics=())
    assert list(parents["eval/sharpe"]) == [1.5, 0.5]
    assert "training.lr" not in parents.columns
    assert compare.runs_table([]).empty


def test_metric_histories_are_per_iteration(store):
    _, client, exp_id, sweeps = store
    history = compare.metric_histories(client, compare.child_runs(client, exp_id, sweeps["BTC-USD"]))
    assert len(history) == 2 * 2 * 3
    curve = history[(history.run_name == "BTC-USD_trial_1") & (history.metric == compare.TRAIN_RETURN)]
    assert list(curve.step) == [1, 2, 3] and list(curve.value) == [2.0, 4.0, 6.0]


def test_by_symbol_groups_trials_of_several_coins(store):
    _, client, exp_id, sweeps = store
    trials = compare.runs_table([r for pid in sweeps.values() for r in compare.child_runs(client, exp_id, pid)])
    summary = compare.by_symbol(trials, [compare.EVAL_RETURN, "not-a-column"])
    assert list(summary.index) == ["BTC-USD", "ETH-USD"]
    assert summary.loc["BTC-USD", (compare.EVAL_RETURN, "max")] == -3.0
    assert summary.loc["ETH-USD", (compare.EVAL_RETURN, "count")] == 2
    assert list(summary.columns.get_level_values(0).unique()) == [compare.EVAL_RETURN]


def test_evaluation_table(store):
    _, client, _, sweeps = store
    table = compare.evaluation_table(client, sweeps["BTC-USD"])
    assert list(table.index) == ["agent", "buy_and_hold"] and table.loc["agent", "total_return"] == 0.1
    assert compare.evaluation_table(client, sweeps["ETH-USD"]) is None


def test_plots_draw_one_line_or_bar_per_trial(store):
    import matplotlib.pyplot as plt

    _, client, exp_id, sweeps = store
    children = [r for pid in sweeps.values() for r in compare.child_runs(client, exp_id, pid)]
    fig = compare.plot_learning_curves(compare.metric_histories(client, children))
    assert [len(ax.lines) for ax in fig.axes] == [4, 4]
    assert any(text.get_text().startswith("ETH-USD: ") for text in fig.axes[0].get_legend().get_texts())
    plt.close(fig)
    fig = compare.plot_final_metric(compare.runs_table(children))
    assert len(fig.axes[0].patches) == 4
    plt.close(fig)
    empty = compare.metric_histories(client, [])
    fig = compare.plot_learning_curves(empty)
    assert "not logged" in [t.get_text() for t in fig.axes[0].texts]
    plt.close(fig)


def test_the_cli_prints_sweeps_the_chosen_sweeps_trials_and_its_evaluation(store, capsys, tmp_path):
    uri, _, _, sweeps = store
    assert main(["--tracking-uri", uri, "--experiment", "exp", "--run", sweeps["BTC-USD"],
                         "--csv", str(tmp_path / "trials.csv")]) == 0
    out = capsys.readouterr().out
    assert sweeps["BTC-USD"] in out and sweeps["ETH-USD"] in out and "2 sweep(s)" in out
    assert "BTC-USD_trial_0" in out and "BTC-USD_trial_1" in out and "ETH-USD_trial_0" not in out
    assert "training.lr" in out and "training.gamma" not in out  # only what differs between the trials
    assert "out-of-sample evaluation" in out and "buy_and_hold" in out
    written = pd.read_csv(tmp_path / "trials.csv", index_col=0)
    assert list(written.index) == ["BTC-USD_trial_0", "BTC-USD_trial_1"]
    assert main(["--tracking-uri", uri, "--experiment", "exp"]) == 0  # default: the newest sweep
    assert "ETH-USD_trial_0" in capsys.readouterr().out


def test_api_compare_returns_the_tables_the_command_prints(store, capsys):
    """The command prints `api.compare`'s tables (the sweeps' start, status and verdict; the trials by name with the
    params that vary and the family's headline metrics) and writes `headline` as its CSV; the API prints nothing."""
    from experiments import api

    uri, _, _, sweeps = store
    found = api.compare(uri, "exp", sweeps["BTC-USD"])
    assert capsys.readouterr().out == ""
    assert list(found.sweeps.index) == [sweeps["ETH-USD"], sweeps["BTC-USD"]]
    assert list(found.sweeps["started"]) == [pd.Timestamp(2000, unit="ms"), pd.Timestamp(1000, unit="ms")]
    assert list(found.sweeps["smoke_test"]) == [False, False] and list(found.sweeps["verdict"]) == ["", ""]
    assert list(found.headline.index) == ["BTC-USD_trial_0", "BTC-USD_trial_1"]
    assert {"training.lr", compare.TRAIN_RETURN, compare.EVAL_RETURN} <= set(found.headline.columns)
    assert "training.gamma" not in found.headline.columns  # it did not vary
    assert "0.0001" in found.as_text(found.headline)  # significant digits


@pytest.mark.parametrize("args, fragment", [(["--experiment", "nope"], "known: ['Default', 'exp']"),
                                            (["--experiment", "exp", "--run", "abc"], "--run abc: no such sweep run")])
def test_the_cli_names_what_is_missing_in_one_line(store, capsys, args, fragment):
    assert main(["--tracking-uri", store[0], *args]) == 2
    err = capsys.readouterr().err
    assert fragment in err and len(err.strip().splitlines()) == 1


def test_the_cli_without_a_store_exits_2(tmp_path, capsys):
    assert main(["--tracking-uri", f"sqlite:///{tmp_path / 'absent.db'}"]) == 2
    assert "no MLflow store" in capsys.readouterr().err


def test_a_param_only_the_chosen_trial_logged_did_not_vary():
    """The registered model's config (greedy_argmax, observation_shape) is logged on one trial only: constant."""
    from types import SimpleNamespace

    def run(**params: str) -> SimpleNamespace:
        return SimpleNamespace(data=SimpleNamespace(params=params))

    runs = [run(lr="0.1", greedy_argmax="False", observation_shape="[194]"), run(lr="0.2"), run(lr="0.2")]
    assert compare.varying_params(runs) == ["lr"]
