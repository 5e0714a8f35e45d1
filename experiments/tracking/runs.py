"""MLflow tracking: one parent run per invocation, one nested child run per Tune trial.

Tune's stock `MLflowLoggerCallback` neither nests runs nor batches: it makes one HTTP/DB
call per metric key (about 1.7 s per RLlib result here). This callback writes every
numeric result key of every trial with one `log_batch` call per result, and closes every
run it opened, whatever way the sweep ends.
"""
from __future__ import annotations

import logging
import math
import re
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from mlflow.entities import Metric, Param, RunStatus
from mlflow.tracking import MlflowClient
from ray.tune import Callback

from algos.rllib.system_metrics import NOTE_KEY as SYSTEM_NOTE_KEY
from envs.datasets import DataPart
from experiments.shell import tool_command
from experiments.tracking.comparison_view import VIEW_KEY
from experiments.tracking.datasets import log_data_parts
from experiments.tracking.store import prepare_store

_BAD_KEY_CHARS = re.compile(r"[\[\]=,@]")
_MAX_PARAM_CHARS = 6000
_BATCH = 1000  # MLflow's limit of metrics per log_batch call
SECRET_MARKERS = ("password", "secret", "token", "api_key", "apikey", "credential")
# MLflow 3 tells model-training experiments from GenAI ones (traces, tokens) by this tag; its UI also
# has a global switch between the two (see ui_url).
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
MODEL_TRAINING_KIND = "custom_model_development"
# Loggers whose INFO lines describe MLflow's own bookkeeping (creating the sqlite tables, validating the
# input example): a user of the platform does not act on them. Warnings still show.
QUIET_LOGGERS = ("mlflow.store.db.utils", "mlflow.store.db", "alembic", "mlflow.pyfunc", "mlflow.models")
# Trial params that become tags of every trial's run (so runs can be filtered by them in the UI), besides
# those the env family names (envs.EnvFamily.tag_keys, e.g. each trial's coin in a sweep over coins).
TRIAL_TAGS = {"environment.env_config.fold": "fold", "seed": "seed"}


def trial_tags(tag_keys: tuple[str, ...]) -> dict[str, str]:
    """Trial param -> tag name: the env family's env_config keys, the fold and the seed."""
    return {**{f"environment.env_config.{key}": key for key in tag_keys}, **TRIAL_TAGS}


def sanitize_key(key: str) -> str:
    """MLflow rejects `[ ] = , @` and `//` in keys; keep the rest of the name readable."""
    key = _BAD_KEY_CHARS.sub("_", key)
    while "//" in key:
        key = key.replace("//", "/")
    return key


def flatten(tree: Mapping[str, Any], prefix: str = "", sep: str = ".") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{sep}{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            flat.update(flatten(value, name, sep))
        else:
            flat[name] = value
    return flat


def without_secrets(params: Mapping[str, Any]) -> dict[str, Any]:
    """Never log credentials (e.g. an exchange API key in env_config)."""
    return {k: v for k, v in params.items() if not any(m in k.lower() for m in SECRET_MARKERS)}


def numeric_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    """Every finite number of a Tune result, as a metric name; not the trial's `config` that Tune puts in each
    result (it is the run's params already; as ~80 flat metric lines it buried the learning curves in the UI's
    chart view)."""
    metrics = {}
    for key, value in flatten({k: v for k, v in result.items() if k != "config"}, sep="/").items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if math.isfinite(value):
            metrics[sanitize_key(key)] = float(value)
    return metrics


def open_experiment(client: MlflowClient, name: str, tracking_uri: str) -> str:
    """The MLflow experiment id for `name`, created next to a local store if needed, and marked as an
    experiment of model training runs (also when it already existed)."""
    existing = client.get_experiment_by_name(name)
    if existing is not None:
        if existing.tags.get(EXPERIMENT_KIND_TAG) != MODEL_TRAINING_KIND:
            client.set_experiment_tag(existing.experiment_id, EXPERIMENT_KIND_TAG, MODEL_TRAINING_KIND)
        return existing.experiment_id
    artifact_location = None
    if tracking_uri.startswith("sqlite:///"):
        artifact_location = (Path(tracking_uri.removeprefix("sqlite:///")).parent / "artifacts").as_uri()
    return client.create_experiment(name, artifact_location=artifact_location,
                                    tags={EXPERIMENT_KIND_TAG: MODEL_TRAINING_KIND})


def ui_url(server: str, experiment_id: str) -> str:
    """The experiment's runs table in the MLflow UI, on the sweep's saved view (its verdict and searched values as
    columns, experiments/tracking/comparison_view.py). MLflow 3.17's UI ignores the experiment-kind tag while its
    global GenAI / Model training switch is shown, and that switch starts on GenAI; the `workflowType` parameter
    sets it."""
    return (f"{server.rstrip('/')}/#/experiments/{experiment_id}/runs?viewStateShareKey={VIEW_KEY}"
            "&workflowType=machine_learning")


def ui_lines(tracking_uri: str, runs: list[tuple[str, str]]) -> list[str]:
    """How to look at `runs` ((what, experiment id)) in the MLflow UI: a server's own pages, or the command that
    serves a local store and the page of each experiment."""
    if tracking_uri.startswith(("http://", "https://")):  # a tracking server is its own UI
        return [f"{what}: {ui_url(tracking_uri, experiment_id)}" for what, experiment_id in runs]
    lines = [f"{', '.join(what for what, _ in runs)}. Open the UI with:",
             f"  {tool_command('mlflow')} ui --backend-store-uri {tracking_uri} --host 127.0.0.1 --port 5000"]
    for experiment_id in dict.fromkeys(experiment_id for _, experiment_id in runs):
        lines.append(f"  then {ui_url('http://127.0.0.1:5000', experiment_id)}")
    return lines


def quiet_mlflow_bookkeeping() -> None:
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def make_client(tracking_uri: str) -> MlflowClient:
    quiet_mlflow_bookkeeping()
    prepare_store(tracking_uri)
    return MlflowClient(tracking_uri=tracking_uri)


def as_logged(params: Mapping[str, Any]) -> dict[str, str]:
    """Params as a run keeps them: secrets left out, keys MLflow accepts, values cut to what it stores. What a logged
    run's params are compared with (a refit's settings against its champion's)."""
    return {sanitize_key(k): str(v)[:_MAX_PARAM_CHARS] for k, v in without_secrets(params).items()}


def log_params(client: MlflowClient, run_id: str, params: Mapping[str, Any]) -> None:
    items = [Param(key, value) for key, value in as_logged(params).items()]
    for start in range(0, len(items), 100):
        client.log_batch(run_id, params=items[start:start + 100])


def log_metrics(client: MlflowClient, run_id: str, metrics: Mapping[str, float], step: int) -> None:
    stamp = int(time.time() * 1000)
    log_metric_entities(client, run_id, [Metric(k, v, stamp, step) for k, v in metrics.items()])


def log_metric_entities(client: MlflowClient, run_id: str, items: list[Metric]) -> None:
    """Metrics of any steps, in as few calls as MLflow's batch limit allows."""
    for start in range(0, len(items), _BATCH):
        client.log_batch(run_id, metrics=items[start:start + _BATCH])


class MlflowTrialCallback(Callback):
    """Mirror every Tune trial into a child run of `parent_run_id`."""

    def __init__(self, tracking_uri: str, experiment_id: str, parent_run_id: str,
                 trial_params: Callable[[Any], dict[str, Any]], tags: Mapping[str, str],
                 tagged_params: Mapping[str, str] = TRIAL_TAGS,
                 trial_data: Callable[[Any], list[DataPart]] | None = None) -> None:
        self.tracking_uri = tracking_uri
        self._client: MlflowClient | None = None
        self.experiment_id = experiment_id
        self.parent_run_id = parent_run_id
        self.trial_params = trial_params  # trial -> dict of params to log
        self.tags = dict(tags)
        self.tagged_params = dict(tagged_params)  # trial param -> tag name (trial_tags)
        self.trial_data = trial_data  # trial -> the parts of the data it reads (dataset inputs)
        self.run_ids_by_trial: dict[str, str] = {}
        self.last_step: dict[str, int] = {}  # run id -> the last training iteration logged there

    @property
    def client(self) -> MlflowClient:
        if self._client is None:
            self._client = make_client(self.tracking_uri)
        return self._client

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles callbacks into its experiment state; a live client holds locks. A restored copy asks the
        store which runs its trials have and what they logged (the pickled copy may be older than both)."""
        return {**self.__dict__, "_client": None, "run_ids_by_trial": {}, "last_step": {}}

    def _run_for(self, trial: Any) -> str:
        if trial.trial_id not in self.run_ids_by_trial:
            run_id = run_of_trial(self.client, self.experiment_id, self.parent_run_id, trial.trial_id)
            if run_id:  # resumed or retried trial: keep writing into its run, after the steps it has
                self.client.update_run(run_id, status="RUNNING")
                history = self.client.get_metric_history(run_id, "training_iteration")
                self.last_step[run_id] = max((int(m.step) for m in history), default=0)
            else:
                params = self.trial_params(trial)
                tags = {**self.tags, "mlflow.parentRunId": self.parent_run_id, "ray.trial_id": trial.trial_id,
                        "trial_name": str(trial)}
                for param, tag in self.tagged_params.items():  # e.g. a sweep over coins: each trial's own coin
                    if params.get(param) is not None:
                        tags[tag] = str(params[param])
                run = self.client.create_run(self.experiment_id, run_name=str(trial), tags=tags)
                run_id = run.info.run_id
                log_params(self.client, run_id, params)
                parts = self.trial_data(trial) if self.trial_data else []
                for target in (run_id, self.parent_run_id):  # the parent holds every trial's parts, each once
                    log_data_parts(self.client, target, parts)
            self.run_ids_by_trial[trial.trial_id] = run_id
        return self.run_ids_by_trial[trial.trial_id]

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._run_for(trial)

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        """A trial restored from a checkpoint repeats the iterations after it; the run's history keeps the
        steps it already has, so it never holds one step twice."""
        run_id, step = self._run_for(trial), int(result.get("training_iteration", 0))
        if step <= self.last_step.get(run_id, 0):
            return
        log_metrics(self.client, run_id, numeric_metrics(result), step=step)  # system/* too (algos/rllib/)
        if result.get(SYSTEM_NOTE_KEY):
            self.client.set_tag(run_id, "system_metrics", str(result[SYSTEM_NOTE_KEY]))
        self.last_step[run_id] = step

    def _finish(self, trial: Any, status: str) -> None:
        run_id = self.run_ids_by_trial.pop(trial.trial_id, None)
        if run_id:
            self.client.set_terminated(run_id, status=status)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._finish(trial, RunStatus.to_string(RunStatus.FINISHED))

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._finish(trial, RunStatus.to_string(RunStatus.FAILED))



def child_runs(client: MlflowClient, experiment_id: str, parent_run_id: str) -> list[Any]:
    return client.search_runs([experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{parent_run_id}'",
                              max_results=10_000)


def run_of_trial(client: MlflowClient, experiment_id: str, parent_run_id: str, trial_id: str) -> str | None:
    runs = client.search_runs([experiment_id], filter_string=f"tags.`ray.trial_id` = '{trial_id}' and "
                                                             f"tags.`mlflow.parentRunId` = '{parent_run_id}'")
    return runs[0].info.run_id if runs else None


def close_open_children(client: MlflowClient, experiment_id: str, parent_run_id: str, status: str) -> None:
    """When a sweep ends or is interrupted no child run may stay RUNNING (the callback may be a
    copy restored by Tune, so the driver asks the store rather than the callback)."""
    for run in child_runs(client, experiment_id, parent_run_id):
        if run.info.status == "RUNNING":
            client.set_terminated(run.info.run_id, status=status)

