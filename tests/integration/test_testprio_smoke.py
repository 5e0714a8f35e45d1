"""The execution agent end to end: a smoke sweep on a slice of IOF/ROL through the platform (slow)."""
from __future__ import annotations

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from experiments.run import main
from tests.conftest import REPO

pytestmark = pytest.mark.slow

IOFROL = REPO / "data/testprio/iofrol.csv"  # bundled: conf/dqn_testprio_iofrol.yaml reads it


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    import ray

    ray.shutdown()  # another test module may have left a session behind
    out = tmp_path_factory.mktemp("testprio_smoke")
    uri = f"sqlite:///{out / 'mlflow.db'}"
    code = main([
        str(REPO / "conf/dqn_testprio_iofrol.yaml"), "--smoke-test", "--no-dashboard", "--output", str(out),
        "--set", f"tracking.tracking_uri={uri}", "--set", "tracking.experiment_name=testprio_smoke",
        "--set", f"environment.env_config.data_path={IOFROL}",
        "--set", "environment.env_config.max_cycles=80",   # a slice: 44 train, 12 validation, 24 test cycles
        "--set", "evaluation.evaluation_duration=4",
    ])
    return code, MlflowClient(uri), out


def _runs(client: MlflowClient):
    experiment = client.get_experiment_by_name("testprio_smoke")
    return client.search_runs([experiment.experiment_id])


def test_sweep_makes_nested_mlflow_runs(smoke_run):
    code, client, _ = smoke_run
    assert code == 0
    runs = _runs(client)
    parents = [r for r in runs if r.data.tags.get("role") == "sweep"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(parents) == 1 and len(children) == 2
    assert all(r.info.status == "FINISHED" for r in runs)
    assert "eval/apfd" in parents[0].data.metrics and "eval/nrpa" in parents[0].data.metrics
    for child in children:
        history = client.get_metric_history(child.info.run_id, "env_runners/num_env_steps_sampled_lifetime")
        assert [m.step for m in history] == [1, 2]


def test_evaluation_table_has_the_agent_and_four_baselines(smoke_run):
    _, client, _ = smoke_run
    parent = next(r for r in _runs(client) if r.data.tags.get("role") == "sweep")
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id, "evaluation")}
    assert {"evaluation/evaluation.csv", "evaluation/evaluation.png"} <= artifacts
    local = client.download_artifacts(parent.info.run_id, "evaluation/evaluation.csv")
    table = pd.read_csv(local, index_col=0)
    assert list(table.index) == ["agent", "learning_to_rank", "recent_failures", "random", "optimal"]
    assert {"apfd", "napfd", "nrpa", "cycles"} <= set(table.columns)
    # The test split of the 80-cycle slice is its last 24 cycles (single-test cycles are not scored).
    assert table["cycles"].nunique() == 1 and 0 < table.loc["agent", "cycles"] <= 24
    assert table.loc["optimal", "apfd"] >= table[["apfd"]].max().max() - 1e-12
    assert table.loc["optimal", "nrpa"] == pytest.approx(1.0)
