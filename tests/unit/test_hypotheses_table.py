"""The hypotheses table (experiments/studies/hypotheses.py) has a verdict column per baseline of the sweep's env
family, read from the family's table: trading's three as before, another family's its own."""
from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

import envs
from experiments.studies.hypotheses import UNTAGGED_ENV, baselines_of, row


@pytest.fixture(scope="module")
def client(tmp_path_factory) -> MlflowClient:
    return MlflowClient(f"sqlite:///{tmp_path_factory.mktemp('mlruns') / 'mlflow.db'}")


def _sweep(client: MlflowClient, experiment: str, env: str | None, baselines: tuple[str, ...]):
    """A sweep (parent run) with one trial and a verdict against `baselines`, tagged with `env` (None: untagged)."""
    experiment_id = client.create_experiment(experiment)
    parent = client.create_run(experiment_id, tags={"role": "sweep", **({"env": env} if env else {})})
    metrics = {"verdict/attempt": 2, "verdict/folds": 4, "verdict/pbo": 0.25}
    for number, name in enumerate(baselines):
        metrics.update({f"verdict/dsr/{name}": 0.5 + number / 10, f"verdict/wins/{name}": number,
                        f"verdict/supported/{name}": float(number == 0)})
    for key, value in metrics.items():
        client.log_metric(parent.info.run_id, key, value)
    child = client.create_run(experiment_id, tags={"mlflow.parentRunId": parent.info.run_id, "seed": "0"})
    client.log_metric(child.info.run_id, "selection_score", 1.25)
    return client.get_run(parent.info.run_id)


@pytest.mark.parametrize("env", ["trading/Spot-v0", None])
def test_a_trading_sweep_keeps_its_verdict_columns(client, env):
    """Trading's columns (buy_and_hold, flat, sma_24_96 when the table named them), now read from its family's table,
    headline first; an untagged sweep (from before the env tag) is trading's."""
    baselines = tuple(baseline.name for baseline in envs.family("trading/Spot-v0").baseline_table())
    assert baselines[0] == "buy_and_hold" and {"flat", "sma_24_96"} <= set(baselines)
    parent = _sweep(client, f"trading-{env}", env, baselines)
    assert UNTAGGED_ENV == "trading/Spot-v0" and baselines_of(parent) == baselines
    out = row(client, f"trading-{env}", parent)
    assert [key for key in out if key.startswith("vs ")] == [f"vs {name}: DSR, wins" for name in baselines]
    assert out["vs buy_and_hold: DSR, wins"] == "0.50, 0/4 (supported)"
    assert out[f"vs {baselines[2]}: DSR, wins"] == "0.70, 2/4 (not)"
    assert out["validation return"] == 1.25 and out["PBO"] == 0.25


def test_another_family_gets_its_own_baselines(client):
    env = "trading/Portfolio-v0"
    baselines = tuple(baseline.name for baseline in envs.family(env).baseline_table())
    assert "buy_and_hold" not in baselines
    parent = _sweep(client, "portfolio", env, baselines)
    out = row(client, "portfolio", parent)
    assert [key for key in out if key.startswith("vs ")] == [f"vs {name}: DSR, wins" for name in baselines]
    assert out[f"vs {baselines[0]}: DSR, wins"] == "0.50, 0/4 (supported)"
