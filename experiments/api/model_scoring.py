"""`api.score(model_uri, data)`: a registered model on data of the user's choosing, through its env family's
scorer, returning the family's `EvaluationReport` and writing nothing (no MLflow run, no file).

A family that scores registered models on other data (`EnvFamily.transfer`: the execution agent on another CI
history) is asked zero-shot; any other family gets its held-out backtest: the model's own experiment (the resolved
file its sweep logged) with `data_path` set to `data`, scored on the test part of the fold the model was chosen on.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

import envs
from envs.abilities import Backtests, Transfers
from envs.errors import InputError
from envs.report import EvaluationReport
from experiments.tracking.store import default_tracking_uri


def score(model_uri: str, data: str | Path, tracking_uri: str | None = None) -> EvaluationReport:
    import mlflow

    from experiments.results.evaluate import evaluate_checkpoint
    from experiments.results.promotion import resolve_version
    from experiments.tracking.runs import make_client

    if not Path(data).is_file():
        raise InputError(f"{data}: no such file: give a data file the model's env family reads")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    tracking_uri = tracking_uri or default_tracking_uri()
    client = make_client(tracking_uri)
    mlflow.set_tracking_uri(tracking_uri)  # where models:/ URIs resolve
    version = resolve_version(client, model_uri)
    family = envs.family(version.tags.get("env", ""))
    model = mlflow.pyfunc.load_model(f"models:/{version.name}/{version.version}").unwrap_python_model()
    if isinstance(family, Transfers):
        return _as_evaluation(family.transfer(model.policy, model.inputs, str(data), {}), model_uri, data)
    env_config = {**_training_env_config(client, version), "data_path": str(Path(data).resolve()), "split": "test"}
    fold = version.tags.get("fold")
    # the fold was searched, so not in the file's env_config
    if isinstance(family, Backtests) and fold not in (None, "", "None"):
        env_config["fold"] = int(fold)
    family.check_config(env_config, f"{model_uri} on {data}")
    return evaluate_checkpoint(model.policy, family, env_config)


def _training_env_config(client: Any, version: Any) -> dict[str, Any]:
    """The env_config of the sweep that registered `version` (its parent run's resolved experiment file)."""
    parent = version.tags.get("parent_run_id")
    if not parent:
        raise InputError(f"models:/{version.name}/{version.version} has no parent_run_id tag: it was not registered "
                         "by experiments.run, so its env_config is unknown")
    with tempfile.TemporaryDirectory() as folder:
        path = client.download_artifacts(parent, "experiment.yaml", folder)
        experiment = yaml.safe_load(Path(path).read_text())
    return dict((experiment.get("environment") or {}).get("env_config") or {})


def _as_evaluation(report: Any, model_uri: str, data: str | Path) -> EvaluationReport:
    """A transfer report (per strategy, per cycle) as the family's EvaluationReport: the table, the agent's headline
    metrics, APFDc per cycle as the series."""
    table = report.table
    agent = table.index[0]
    metrics = {f"eval/{column}": float(table.loc[agent, column]) for column in table.columns
               if isinstance(table.loc[agent, column], (int, float)) and not isinstance(table.loc[agent, column], bool)}
    per_cycle = report.per_cycle
    series = (per_cycle.pivot_table(index="position", columns="strategy", values="apfdc")
              if {"position", "strategy", "apfdc"} <= set(per_cycle.columns) else pd.DataFrame())
    return EvaluationReport(title=f"{model_uri} on {data} (zero-shot)", table=table, agent_metrics=metrics,
                            series=series, series_label="APFDc per failing cycle", notes=list(report.notes))
