"""The runs table a sweep's printed link opens: its verdict, its searched parameters and its data as columns.

MLflow 3.17's UI keeps the columns a user picks in the browser's localStorage, not in the URL. What it does read
from the tracking store is a saved view: an experiment tag `mlflow.sharedViewState.<key>` holding the runs page's
state (its `selectedColumns`, ...), opened with `?viewStateShareKey=<key>` and listed by name in the page's
"Views" menu. Every sweep writes one, so the first page a user sees can already sort and compare sweeps by their
verdicts and trials by their searched values, whatever browser opens it. A later sweep in the same experiment
adds its own columns to the view (another search space, another baseline) and removes none.
"""
from __future__ import annotations

import json
import time
from typing import Iterable

from mlflow.tracking import MlflowClient

VIEW_KEY = "comparison"
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_KEY}"
VIEW_NAME = "Sweeps and trials"
# Of the columns MLflow shows by default, the one that matters here: the data each run read.
DEFAULT_COLUMNS = ("attributes.`Dataset`",)


def column(group: str, name: str) -> str:
    """The runs page's key of a column, e.g. column("metrics", "verdict/pbo") == "metrics.`verdict/pbo`"."""
    return f"{group}.`{name}`"


def comparison_columns(baselines: Iterable[str], headline_metrics: Iterable[str], selection_metric: str,
                       searched: Iterable[str], verdict: bool) -> list[str]:
    """The verdict where the family has one (mean Sharpe, DSR and folds won per baseline, PBO, the ledger's attempt,
    supported or not per baseline), else the family's headline test metrics (one split's: the verdict is the
    comparison where there is one); the validation metric trials are selected on; and the searched parameters."""
    baselines = list(baselines)
    metrics = (["verdict/agent_sharpe_mean", *(f"verdict/dsr/{b}" for b in baselines), "verdict/pbo",
                *(f"verdict/wins/{b}" for b in baselines), "verdict/attempt"] if verdict else list(headline_metrics))
    metrics.append(selection_metric)
    tags = [f"verdict.{b}" for b in baselines] if verdict else []
    return [*DEFAULT_COLUMNS, *(column("metrics", m) for m in metrics), *(column("tags", t) for t in tags),
            *(column("params", p) for p in searched)]


def save_view(client: MlflowClient, experiment_id: str, columns: list[str]) -> None:
    """Write (or widen) the experiment's saved view with `columns`, in the envelope the UI's "Views" menu reads."""
    experiment = client.get_experiment(experiment_id)
    previous = _columns(experiment.tags.get(VIEW_TAG))
    merged = list(dict.fromkeys([*previous, *columns]))
    now = int(time.time() * 1000)
    state = json.dumps({"selectedColumns": merged})
    client.set_experiment_tag(experiment_id, VIEW_TAG, json.dumps({"name": VIEW_NAME, "createdAt": now,
                                                                   "updatedAt": now, "state": state}))


def _columns(value: str | None) -> list[str]:
    """The columns of a saved view's tag value (a view the user changed in the UI included), [] if unreadable."""
    try:
        envelope = json.loads(value or "{}")
        state = json.loads(envelope["state"]) if "state" in envelope else envelope
        return [str(c) for c in state.get("selectedColumns", [])]
    except (ValueError, TypeError, AttributeError, KeyError):
        return []
