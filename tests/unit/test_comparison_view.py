"""The saved view a sweep's printed link opens in the MLflow UI (experiments/tracking/comparison_view.py)."""
from __future__ import annotations

import json

from mlflow.tracking import MlflowClient

from experiments.tracking.comparison_view import VIEW_KEY, VIEW_NAME, VIEW_TAG, comparison_columns, save_view
from experiments.tracking.runs import ui_lines, ui_url

VALIDATION = "evaluation/env_runners/episode_return_mean"


def _state(client: MlflowClient, experiment_id: str) -> tuple[str, list[str]]:
    envelope = json.loads(client.get_experiment(experiment_id).tags[VIEW_TAG])
    return envelope["name"], json.loads(envelope["state"])["selectedColumns"]


def test_a_verdict_family_shows_its_verdict_a_plain_one_its_headline_metrics():
    trading = comparison_columns(["buy_and_hold", "flat"], ["eval/sharpe"], VALIDATION, ["training.lr"], verdict=True)
    assert trading[0] == "attributes.`Dataset`"
    assert {"metrics.`verdict/agent_sharpe_mean`", "metrics.`verdict/dsr/flat`", "metrics.`verdict/pbo`",
            "metrics.`verdict/wins/buy_and_hold`", "metrics.`verdict/attempt`", "tags.`verdict.buy_and_hold`",
            f"metrics.`{VALIDATION}`", "params.`training.lr`"} <= set(trading)
    assert "metrics.`eval/sharpe`" not in trading  # one split's number: the verdict is the comparison
    ci = comparison_columns([], ["eval/nrpa", "eval/apfd"], VALIDATION, ["training.gamma"], verdict=False)
    assert ci == ["attributes.`Dataset`", "metrics.`eval/nrpa`", "metrics.`eval/apfd`", f"metrics.`{VALIDATION}`",
                  "params.`training.gamma`"]


def test_a_later_sweep_widens_the_view_and_keeps_what_the_user_added(tmp_path):
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment_id = client.create_experiment("x")
    save_view(client, experiment_id, comparison_columns([], [], VALIDATION, ["training.lr"], verdict=False))
    name, columns = _state(client, experiment_id)
    assert name == VIEW_NAME and columns[-1] == "params.`training.lr`"
    # The user changed the view in the UI (plain state, no envelope); a sweep searching gamma adds it.
    client.set_experiment_tag(experiment_id, VIEW_TAG, json.dumps({"selectedColumns": [*columns, "tags.`fold`"]}))
    save_view(client, experiment_id, comparison_columns([], [], VALIDATION, ["training.gamma"], verdict=False))
    _, widened = _state(client, experiment_id)
    assert widened == [*columns, "tags.`fold`", "params.`training.gamma`"]
    client.set_experiment_tag(experiment_id, VIEW_TAG, "not json")  # unreadable: replaced, not a crash
    save_view(client, experiment_id, ["attributes.`Dataset`"])
    assert _state(client, experiment_id)[1] == ["attributes.`Dataset`"]


def test_the_printed_link_opens_the_saved_view_on_the_training_runs():
    url = ui_url("http://127.0.0.1:5000/", "7")
    assert url == (f"http://127.0.0.1:5000/#/experiments/7/runs?viewStateShareKey={VIEW_KEY}"
                   "&workflowType=machine_learning")
    assert ui_lines("http://127.0.0.1:5000", [("run", "7")]) == [f"run: {url}"]
