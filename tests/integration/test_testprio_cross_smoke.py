"""The cross-project execution agent end to end (slow): a smoke sweep of conf/dqn_testprio_cross.yaml on slices of
the bundled histories, its registered model ranking a cycle's table through pyfunc, and experiments.transfer scoring
it zero-shot and online on a history it never saw (and refusing a file in an unknown format)."""
from __future__ import annotations

import mlflow
import pandas as pd
import pytest

import envs
from envs.agents.testprio.evaluate import LEARNED_BASELINE
from experiments.run import main as run
from experiments.transfer import main as transfer
from tests.conftest import REPO
from tests.servers import joining

DATA = REPO / "data/testprio"


@pytest.fixture(scope="module")
def registered(tmp_path_factory, ray_cluster):
    out = tmp_path_factory.mktemp("cross_smoke")
    uri = f"sqlite:///{out / 'mlflow.db'}"
    with joining(ray_cluster) as joined:
        code = run([
            str(REPO / "conf/dqn_testprio_cross.yaml"), "--smoke-test", "--no-dashboard", "--output", str(out),
            "--set", f"tracking.tracking_uri={uri}", "--set", "tracking.experiment_name=cross_smoke",
            # codec and imaging only: IOF/ROL is the history it never sees (below)
            "--set",
            f"environment.env_config.data_paths=[{DATA / 'Commons_codec.csv'}, {DATA / 'Commons_imaging.csv'}]",
            "--set", "environment.env_config.max_cycles=60", "--set", "evaluation.evaluation_duration=4", *joined,
        ])
    assert code == 0
    client = mlflow.MlflowClient(uri)
    [model] = client.search_registered_models()
    version = max(client.search_model_versions(f"name = '{model.name}'"), key=lambda v: int(v.version))
    return uri, f"models:/{model.name}/{version.version}", out


def test_the_registered_model_ranks_a_cycle_table_through_pyfunc(registered):
    uri, model_uri, _ = registered
    mlflow.set_tracking_uri(uri)
    frame = pd.read_csv(DATA / "iofrol.csv", sep=";", dtype=str, keep_default_na=False)
    sizes = frame.groupby("Cycle").size()
    cycle = frame[frame["Cycle"] == sizes[sizes >= 20].index[0]].drop(columns=["Verdict"])
    order = mlflow.pyfunc.load_model(model_uri).predict(cycle)
    assert list(order.columns) == ["Name", "position", "row"]
    assert sorted(order["row"]) == list(range(len(cycle))) and list(order["position"]) == list(range(1, len(cycle) + 1))
    assert sorted(order["Name"]) == sorted(cycle["Name"])
    # the registry's guard: judged on the held-out cycles' APFDc against the heuristic, a warning when below
    name, number = model_uri.split("/")[1:]
    tags = mlflow.MlflowClient(uri).get_model_version(name, number).tags
    assert tags["apfdc_below_heuristic"] in ("true", "false", "unknown")
    assert ("warning" in tags) == (tags["apfdc_below_heuristic"] == "true")


def test_model_selection_read_the_validation_cycles_ranked_whole(registered):
    """tune.metric evaluation/validation/score: every evaluated iteration of every trial carries it, computed by
    ranking the pooled validation cycles as the final table ranks the test cycles."""
    uri, _, _ = registered
    client = mlflow.MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("cross_smoke").experiment_id])
    trials = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert trials and all("evaluation/validation/score" in r.data.metrics for r in trials)
    assert all(0.0 < r.data.metrics["evaluation/validation/nrpa"] <= 1.0 for r in trials)


def test_transfer_scores_an_unseen_history_zero_shot_and_online(registered, tmp_path, capsys):
    uri, model_uri, _ = registered
    held_out = tmp_path / "iofrol_head.csv"
    frame = pd.read_csv(DATA / "iofrol.csv", sep=";", dtype=str, keep_default_na=False)
    frame[frame["Cycle"].astype(int) <= sorted(frame["Cycle"].astype(int).unique())[39]].to_csv(
        held_out, sep=";", index=False)
    code = transfer([model_uri, str(held_out), "--tracking-uri", uri, "--output", str(tmp_path / "scores")])
    assert code == 0
    table = pd.read_csv(tmp_path / "scores/iofrol_head.table.csv", index_col=0)
    baselines = [b.name for b in envs.family("agents/TestPrioritizationPairwise-v0").baseline_table()]  # read
    assert list(table.index) == ["agent (zero-shot)", "online (from the cross-project model)", "online (cold start)",
                                 "periodic retraining", LEARNED_BASELINE, *baselines]
    assert table.loc["optimal", "paper_apfd"] >= table["paper_apfd"].max() - 1e-12
    assert table["paper_cycles"].nunique() == 1 and table["paper_cycles"].iloc[0] > 20
    assert "NOT zero-shot" not in capsys.readouterr().out
    run_ = mlflow.MlflowClient(uri).search_runs(
        [mlflow.MlflowClient(uri).get_experiment_by_name(f"{model_uri.split('/')[1]}-transfer").experiment_id])[0]
    assert {"recent_failures/paper_apfd", "recent_failures/paper_apfdc", "recent_failures/paper_ttff"} <= set(
        run_.data.metrics)
    [scored] = run_.inputs.dataset_inputs  # the history it scored, and every strategy's NRPA per cycle
    assert scored.dataset.name == "iofrol_head[transfer]"
    steps = mlflow.MlflowClient(uri).get_metric_history(run_.info.run_id, "recent_failures/cycle_nrpa")
    assert [m.step for m in steps] == list(range(1, len(steps) + 1)) and len(steps) > 20


def test_transfer_refuses_a_file_in_an_unknown_format(registered, tmp_path, capsys):
    uri, model_uri, _ = registered
    unknown = tmp_path / "bars.csv"
    unknown.write_text("timestamp,open,high,low,close,volume\n2024-01-01,1,2,0.5,1.5,10\n")
    assert transfer([model_uri, str(unknown), "--tracking-uri", uri]) == 2
    err = capsys.readouterr().err
    assert "unrecognized header" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_the_trials_show_each_history_they_read(registered):
    """Dataset inputs in the MLflow runs table: every trial's pooled histories, part by part."""
    uri, _, _ = registered
    client = mlflow.MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("cross_smoke").experiment_id])
    trial = next(r for r in runs if r.data.tags.get("mlflow.parentRunId"))
    assert sorted(i.dataset.name for i in trial.inputs.dataset_inputs) == sorted(
        f"{stem}[{part}]" for stem in ("Commons_codec", "Commons_imaging") for part in ("train", "validation", "test"))
