"""An MLflow experiment's runs as tables and figures: sweeps (parent runs, tag `role=sweep`, their `eval/*` metrics and
`evaluation/evaluation.csv`), a sweep's trials (child runs, tag `mlflow.parentRunId`, their params and one metric point
per training iteration), learning curves. Only MLflow, pandas and matplotlib; every function takes the client, so
tests pass a client on a temporary store. `python -m experiments.compare`, `api.compare` and
notebooks/compare_runs.ipynb read experiments through these.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd
from mlflow.entities import Run
from mlflow.tracking import MlflowClient

import envs
from envs.errors import InputError

DEFAULT_TRACKING_URI = "sqlite:///mlruns/mlflow.db"
TRAIN_RETURN = "env_runners/episode_return_mean"
EVAL_RETURN = "evaluation/env_runners/episode_return_mean"
LEARNING_CURVE_METRICS = (TRAIN_RETURN, EVAL_RETURN)
PARENT_TAG = "mlflow.parentRunId"


# Significant digits, not decimals: learning rates 0.00028 and 0.00033 must not both read 0.0003.
DISPLAY_OPTIONS = ("display.float_format", "{:.4g}".format, "display.max_columns", 50)


def settings(tracking_uri: str | None = None, experiment_name: str | None = None) -> tuple[str, str | None]:
    """The tracking URI and experiment name to use: the arguments, else the environment variables
    `MLFLOW_TRACKING_URI` / `EXPERIMENT_NAME`, else `sqlite:///mlruns/mlflow.db` and no name (`newest_experiment`)."""
    return (tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI,
            experiment_name or os.environ.get("EXPERIMENT_NAME"))


def newest_experiment(client: MlflowClient) -> str:
    """The name of the experiment whose newest sweep started last: what a user who just ran one means."""
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()], "tags.role = 'sweep'",
                              max_results=1, order_by=["attributes.start_time DESC"])
    if not runs:
        raise InputError(f"{client.tracking_uri}: no sweep runs yet: run `python -m experiments.run "
                         "conf/<name>.yaml` first, or pass --tracking-uri")
    return client.get_experiment(runs[0].info.experiment_id).name


def open_client(tracking_uri: str) -> MlflowClient:
    """An MLflow client; for a `sqlite:///` store the file must exist (MLflow would silently create an
    empty one). Relative sqlite paths are relative to the working directory."""
    if tracking_uri.startswith("sqlite:///"):
        path = Path(tracking_uri.removeprefix("sqlite:///"))
        if not path.is_file():
            raise InputError(f"no MLflow store at {path.resolve()}: run `python -m experiments.run "
                                    "conf/<name>.yaml` first, or set MLFLOW_TRACKING_URI")
    return MlflowClient(tracking_uri=tracking_uri)


def experiment_id(client: MlflowClient, name: str) -> str:
    """The id of experiment `name`; a clear error listing the known experiments if it is missing."""
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        known = sorted(e.name for e in client.search_experiments())
        raise InputError(f"no MLflow experiment named {name!r} at {client.tracking_uri}; known: {known}")
    return experiment.experiment_id


def _all_runs(client: MlflowClient, exp_id: str, filter_string: str = "") -> list[Run]:
    runs, token = [], None
    while True:
        page = client.search_runs([exp_id], filter_string=filter_string, max_results=1000,
                                  order_by=["attributes.start_time DESC"], page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def parent_runs(client: MlflowClient, exp_id: str) -> list[Run]:
    """The sweep (parent) runs of the experiment, newest first."""
    return _all_runs(client, exp_id, "tags.role = 'sweep'")


def child_runs(client: MlflowClient, exp_id: str, parent_run_id: str) -> list[Run]:
    """The trial (child) runs of one sweep, oldest first (Tune's trial order)."""
    runs = _all_runs(client, exp_id, f"tags.`{PARENT_TAG}` = '{parent_run_id}'")
    return sorted(runs, key=lambda r: (r.info.start_time or 0, r.info.run_name or ""))


def pick_parent(parents: Sequence[Run], run_id: str | None = None) -> Run:
    """The parent run with id `run_id`, or the newest one (`parents` is newest first)."""
    if not parents:
        raise InputError("the experiment has no sweep runs (tag role=sweep): run it with `python -m experiments.run`")
    if run_id is None:
        return max(parents, key=lambda r: r.info.start_time or 0)
    for run in parents:
        if run.info.run_id == run_id:
            return run
    raise InputError(f"--run {run_id}: no such sweep run; known: {[r.info.run_id for r in parents]}")


def symbol(run: Run) -> str:
    """The coin of a run, or generally the tag its env family groups runs by (the first of
    `envs.EnvFamily.tag_keys`; each trial of a sweep over coins has its own), else ''."""
    keys = envs.family(run.data.tags.get("env", "")).tag_keys
    return run.data.tags.get(keys[0], "") if keys else ""


def trial_label(run: Run) -> str:
    """A short name for a trial run: its run name (e.g. `DQN_trading_Spot-v0_1a2b3_00000`)."""
    return run.info.run_name or run.info.run_id[:8]


def _number(value: str | None) -> object:
    """A param value as a float when it parses as one, else unchanged (None stays None)."""
    try:
        return float(value) if value is not None else None
    except ValueError:
        return value


def runs_table(runs: Iterable[Run], params: Sequence[str] = ("training.lr", "training.gamma"),
               metric_prefixes: Sequence[str] = ("eval/",),
               metrics: Sequence[str] = LEARNING_CURVE_METRICS) -> pd.DataFrame:
    """One row per run: name, symbol, status, the given params, the latest value of `metrics`, and
    every metric whose key starts with one of `metric_prefixes`. Params are converted to numbers
    when they look like numbers. Indexed by run id."""
    rows = []
    for run in runs:
        row: dict[str, object] = {"run_id": run.info.run_id, "run_name": trial_label(run),
                                  "symbol": symbol(run), "status": run.info.status}
        for key in params:
            row[key] = _number(run.data.params.get(key))
        for key, value in sorted(run.data.metrics.items()):
            if key in metrics or key.startswith(tuple(metric_prefixes)):
                row[key] = value
        rows.append(row)
    if not rows:
        return pd.DataFrame(columns=["run_name", "symbol", "status", *params]).rename_axis("run_id")
    return pd.DataFrame(rows).set_index("run_id")


def metric_histories(client: MlflowClient, runs: Iterable[Run],
                     metrics: Sequence[str] = LEARNING_CURVE_METRICS) -> pd.DataFrame:
    """Long table of metric histories: columns run_id, run_name, symbol, metric, step, value.
    `step` is the training iteration (the tracking callback logs `training_iteration` as step)."""
    rows = []
    for run in runs:
        for key in metrics:
            for point in client.get_metric_history(run.info.run_id, key):
                rows.append({"run_id": run.info.run_id, "run_name": trial_label(run),
                             "symbol": symbol(run), "metric": key,
                             "step": point.step, "value": point.value})
    columns = ["run_id", "run_name", "symbol", "metric", "step", "value"]
    return pd.DataFrame(rows, columns=columns).sort_values(["metric", "run_name", "step"], ignore_index=True)


def by_symbol(table: pd.DataFrame, value_columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Mean, max and count of the numeric columns of a `runs_table` per coin (its `symbol` column);
    `value_columns` picks columns (absent ones are left out)."""
    numeric = table.select_dtypes("number")
    if value_columns is not None:
        numeric = numeric[[c for c in value_columns if c in numeric.columns]]
    return numeric.groupby(table["symbol"]).agg(["mean", "max", "count"])


def evaluation_table(client: MlflowClient, run_id: str,
                     path: str = "evaluation/evaluation.csv") -> pd.DataFrame | None:
    """The out-of-sample table a sweep logged (one row per strategy), or None if it has none."""
    folder = path.rsplit("/", 1)[0] if "/" in path else ""
    if path not in {a.path for a in client.list_artifacts(run_id, folder or None)}:
        return None
    return pd.read_csv(client.download_artifacts(run_id, path), index_col=0)


def plot_learning_curves(history: pd.DataFrame, metrics: Sequence[str] = LEARNING_CURVE_METRICS,
                         title: str = ""):
    """One panel per metric, one line per trial (value vs training iteration). Several symbols
    get one colour per trial and the symbol in the label. Returns the matplotlib figure."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(1, len(metrics), figsize=(6 * len(metrics), 4), squeeze=False)
    several_symbols = history["symbol"].nunique() > 1
    for ax, key in zip(axes[0], metrics, strict=True):
        part = history[history["metric"] == key]
        for (coin, name), curve in part.groupby(["symbol", "run_name"], sort=True):
            label = f"{coin}: {name}" if several_symbols else name
            ax.plot(curve["step"], curve["value"], marker="o", markersize=3, label=label)
        ax.set_title(key, fontsize=9)
        ax.set_xlabel("training iteration")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        if part.empty:
            ax.text(0.5, 0.5, "not logged", ha="center", va="center", transform=ax.transAxes)
        else:
            ax.legend(fontsize=7)
    axes[0][0].set_ylabel("episode return (mean)")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_final_metric(table: pd.DataFrame, metric: str = EVAL_RETURN):
    """Bar chart of one metric's latest value per trial, grouped (coloured) by symbol."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6, 0.8 * len(table) + 2), 4))
    if metric in table.columns and table[metric].notna().any():
        data = table.dropna(subset=[metric]).sort_values(["symbol", "run_name"])
        symbols = list(dict.fromkeys(data["symbol"]))
        colours = {s: f"C{i}" for i, s in enumerate(symbols)}
        ax.bar(range(len(data)), data[metric], color=[colours[s] for s in data["symbol"]])
        ax.set_xticks(range(len(data)), data["run_name"], rotation=30, ha="right", fontsize=7)
        for coin, colour in colours.items():
            ax.bar([], [], color=colour, label=coin or "(no symbol)")
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, f"{metric} not logged", ha="center", va="center", transform=ax.transAxes)
    ax.set_title(f"last {metric} per trial", fontsize=9)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return fig


def varying_params(runs: Sequence[Run]) -> list[str]:
    """The params whose value differs between the runs that logged them (what a sweep searched: lr, fold, seed,
    ...). A param only some runs have with one value (the registered model's config on the chosen trial, e.g.
    greedy_argmax, observation_shape) did not vary."""
    keys = sorted({key for run in runs for key in run.data.params})
    return [key for key in keys if len({run.data.params[key] for run in runs if key in run.data.params}) > 1]
