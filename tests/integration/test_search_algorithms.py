"""Optuna TPE, ASHA early stopping and tune.plateau wired from YAML, on a real (tiny) Tune sweep."""
from __future__ import annotations

from experiments.run import main
from tests.conftest import REPO


def test_optuna_with_asha_and_a_plateau_sweep_runs(tmp_path, joined):
    """ASHA lets the best trial run to tune.stop (3); the plateau, on a metric that never improves after the first
    iteration (training_iteration, mode min, patience 1), stops every trial at 2 at the latest, the best one too."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    code = main([str(REPO / "conf/dqn_btc.yaml"), "--smoke-test", "--no-dashboard", "--output", str(tmp_path),
                 "--set", f"tracking.tracking_uri={uri}", "--set", "tune.search_alg=optuna",
                 "--set", "evaluation.protocol=holdout", "--set", "tune.seeds=[0]",  # optuna: no folds, one seed
                 "--set", "tune.search_space={training.lr: {loguniform: [0.0001, 0.001]}}",
                 "--set", "tune.num_samples=3", "--set", "tune.max_concurrent_trials=1",
                 "--set", "tune.scheduler={type: asha, grace_period: 1, reduction_factor: 2}",
                 "--set", "tune.stop={training_iteration: 3}",
                 "--set", "tune.plateau={patience: 1, metric: training_iteration, mode: min}", *joined])
    assert code == 0
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("dqn_btc").experiment_id])
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(children) == 3
    lrs = {r.data.params["training.lr"] for r in children}
    assert len(lrs) == 3  # optuna proposed three different learning rates
    iterations = sorted(int(r.data.metrics["training_iteration"]) for r in children)
    assert iterations[-1] == 2  # the plateau stopped the best trial at 2 of 3; ASHA may have stopped others at 1
    # Each scored trial's run says whether its curve had flattened: 1 or 2 iterations are too short to tell. Its curve
    # was read from Tune's results: training_iteration (mode min) made its best at iteration 1.
    assert {r.data.tags.get("curve") for r in children} == {"too short to tell"}
    assert {r.data.metrics.get("curve_flattened") for r in children} == {0.0}
    assert all(r.data.metrics["iterations_since_best"] == r.data.metrics["training_iteration"] - 1 for r in children)
