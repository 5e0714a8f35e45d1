"""`api.compare(...)`: an MLflow experiment's sweeps and one sweep's trials and out-of-sample table, as data.

The same reading as `python -m experiments.compare` and notebooks/compare_runs.ipynb (experiments/tracking/comparison.py
holds the table functions), returned rather than printed."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd


@dataclass
class Comparison:
    tracking_uri: str
    experiment: str
    sweeps: pd.DataFrame            # one row per sweep (parent run), newest first, with its eval/* metrics
    parent_run_id: str              # the sweep whose trials follow (the newest unless one was asked for)
    trials: pd.DataFrame            # one row per trial of that sweep: its params and latest metrics
    evaluation: pd.DataFrame | None  # that sweep's out-of-sample table (None when it did not finish)


def compare(tracking_uri: str | None = None, experiment: str | None = None,
            parent_run_id: str | None = None) -> Comparison:
    """Read the experiment (default: MLFLOW_TRACKING_URI / EXPERIMENT_NAME, else ./mlruns and the newest)."""
    from experiments.tracking import comparison as tables

    uri, name = tables.settings(tracking_uri, experiment)
    client = tables.open_client(uri)
    name = name or tables.newest_experiment(client)
    experiment_id = tables.experiment_id(client, name)
    parents = tables.parent_runs(client, experiment_id)
    parent = tables.pick_parent(parents, parent_run_id)
    children = tables.child_runs(client, experiment_id, parent.info.run_id)
    return Comparison(uri, name, tables.runs_table(parents, params=(), metrics=()), parent.info.run_id,
                      tables.runs_table(children), tables.evaluation_table(client, parent.info.run_id))
