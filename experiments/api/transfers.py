"""`api.transfer` (and `python -m experiments.transfer`): score a registered model on data it never trained on,
without retraining: zero-shot, and online (updated after every cycle, as CI runs). Each history's table is printed
and logged to MLflow (experiment `<model name>-transfer`, one run per history); `output` also gets them as CSV.
`api.score` is the same scoring, zero-shot only, returned and written nowhere.
"""
from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from envs.abilities import Transfers, able
from envs.errors import InputError
from experiments.shell import terminal_console
from experiments.tracking.store import default_tracking_uri


def transfer(model_uri: str, histories: list[str], online: bool = True, output: Path | None = None,
             tracking_uri: str | None = None) -> int:
    """Score the registered model on each history, print each table and log it to MLflow (and --output)."""
    import mlflow

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

    import envs
    from algos.families.testprio_online import online_learners
    from experiments.results.promotion import resolve_version
    from experiments.tracking.runs import make_client

    missing = [path for path in histories if not Path(path).is_file()]
    if missing:
        raise InputError(f"{missing[0]}: no such file; give a CI history in the RETECS or enriched format")
    tracking_uri = tracking_uri or default_tracking_uri()
    client = make_client(tracking_uri)
    mlflow.set_tracking_uri(tracking_uri)  # where models:/ URIs resolve
    version = resolve_version(client, model_uri)
    family = envs.family(version.tags.get("env", ""))
    if not isinstance(family, Transfers):
        raise InputError(f"{model_uri}: its env ({family.env_id or 'unknown'}) has no scoring on other data "
                         f"(envs.abilities.Transfers): only models of {', '.join(able(Transfers, envs.FAMILIES))} "
                         "can be scored this way")
    model = mlflow.pyfunc.load_model(f"models:/{version.name}/{version.version}").unwrap_python_model()
    learners = online_learners(model.policy) if online else {}
    console = terminal_console()
    for path in histories:
        report = family.transfer(model.policy, model.inputs, path, learners)
        console.print(f"\n{version.name} version {version.version} on {path}", markup=False)
        console.print(report.table.to_string(float_format=lambda x: f"{x:.4f}"), markup=False)
        for note in report.notes:
            console.print(f"  {note}", markup=False)
        _log(client, version, path, report, output)
    return 0


def _log(client: Any, version: Any, path: str, report: Any, output: Path | None) -> None:
    """One MLflow run per scored history: the headline numbers as metrics, both tables as artifacts. Through the
    client, not mlflow's active-experiment state, so a caller's own runs (e.g. a sweep in the same process) are
    not moved to this experiment."""
    from mlflow.entities import Metric, RunTag

    from envs.datasets import whole_file
    from experiments.tracking.datasets import log_data_parts
    from experiments.tracking.runs import log_metric_entities

    stem = Path(path).stem
    name = f"{version.name}-transfer"
    experiment = client.get_experiment_by_name(name)
    experiment_id = experiment.experiment_id if experiment else client.create_experiment(name)
    run_id = client.create_run(experiment_id, run_name=f"{stem} v{version.version}").info.run_id
    now = int(time.time() * 1000)
    metrics = [Metric(f"{_metric_name(strategy)}/{column}", float(row[column]), now, 0)
               for strategy, row in report.table.iterrows()
               for column in ("paper_apfdc", "paper_ttff", "paper_apfd", "paper_nrpa")
               if row[column] == row[column]]  # not NaN
    # Each strategy's APFDc (failing cycles) and NRPA per cycle, step = the cycle's position: the chart view overlays
    # the strategies.
    metrics += [Metric(f"{_metric_name(row.strategy)}/cycle_{column}", float(getattr(row, column)), now,
                       int(row.position))
                for row in report.per_cycle.itertuples() for column in ("apfdc", "nrpa")
                if getattr(row, column) == getattr(row, column)]
    log_metric_entities(client, run_id, metrics)
    client.log_batch(run_id, tags=[RunTag("model", f"models:/{version.name}/{version.version}"),
                                   RunTag("history", str(Path(path).resolve()))])
    log_data_parts(client, run_id, [whole_file(path, "transfer", int(report.per_cycle["position"].max()))])
    with tempfile.TemporaryDirectory() as folder:
        target = output or Path(folder)
        target.mkdir(parents=True, exist_ok=True)
        report.table.to_csv(target / f"{stem}.table.csv")
        report.per_cycle.to_csv(target / f"{stem}.cycles.csv", index=False)
        client.log_artifact(run_id, str(target / f"{stem}.table.csv"))
        client.log_artifact(run_id, str(target / f"{stem}.cycles.csv"))
    client.set_terminated(run_id)


def _metric_name(strategy: str) -> str:
    """A strategy's name as an MLflow metric prefix (letters, digits, _ - . / only)."""
    return re.sub(r"[^\w\-./]+", "_", strategy).strip("_")
