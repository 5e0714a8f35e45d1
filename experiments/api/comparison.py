"""`api.compare(...)`: an MLflow experiment's sweeps and one sweep's trials and out-of-sample table, as data.

The same reading as `python -m experiments.compare` (which prints it) and notebooks/compare_runs.ipynb
(experiments/tracking/comparison.py holds the table functions), returned rather than printed."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd


@dataclass
class Comparison:
    tracking_uri: str
    experiment: str
    sweeps: pd.DataFrame            # one row per sweep (parent run), newest first: started, status, smoke_test,
    #                                 verdict and its eval/* metrics
    parent_run_id: str              # the sweep whose trials follow (the newest unless one was asked for)
    trials: pd.DataFrame            # one row per trial of that sweep: its params and latest metrics
    evaluation: pd.DataFrame | None  # that sweep's out-of-sample table (None when it did not finish)
    headline: pd.DataFrame          # the trials by name: the params that differ between them, the training and
    #                                 validation return and the env family's headline test metrics (what the
    #                                 command prints and --csv writes)

    @staticmethod
    def as_text(table: pd.DataFrame) -> str:
        """One of these tables as the command prints it: significant digits, not rounded decimals (the notebook's
        display options), on up to 250 columns."""
        from experiments.tracking.comparison import DISPLAY_OPTIONS

        with pd.option_context(*DISPLAY_OPTIONS, "display.width", 250, "display.max_colwidth", 40):
            return table.to_string()


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
    return Comparison(uri, name, _sweeps(parents), parent.info.run_id, tables.runs_table(children),
                      tables.evaluation_table(client, parent.info.run_id), _headline(parent, children))


def _sweeps(parents: list) -> pd.DataFrame:
    from experiments.tracking import comparison as tables

    return tables.runs_table(parents, params=(), metrics=()).assign(
        started=[pd.Timestamp(run.info.start_time or 0, unit="ms") for run in parents],
        smoke_test=[run.data.tags.get("smoke_test") == "True" for run in parents],
        verdict=[run.data.tags.get("verdict", "") for run in parents])


def _headline(parent, children: list) -> pd.DataFrame:
    """The trials' table the command shows: what a sweep varied, and how each trial did on the family's headline
    metrics (`envs.EnvFamily.comparison_columns`); the symbol column only when a trial has one."""
    import envs
    from experiments.tracking import comparison as tables

    family = envs.family(parent.data.tags.get("env", ""))
    metrics = (tables.TRAIN_RETURN, tables.EVAL_RETURN, *family.comparison_columns)
    table = tables.runs_table(children, params=tables.varying_params(children), metric_prefixes=(), metrics=metrics)
    return table.reset_index().set_index("run_name").drop(columns=["symbol"] if not table["symbol"].any() else [])
