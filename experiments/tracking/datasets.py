"""The data a run used, as MLflow dataset inputs: one per part (`BTC-USD_1h[train]`), with its digest, source and
fold, so the runs table's Dataset column says what each run saw and runs on other data look different.

Runs here are made with `MlflowClient`, which has no `mlflow.log_input`: the inputs are built as entities and
logged with `log_inputs`. MLflow keeps one input per (name, digest) on a run, so a sweep's parent run holds each
fold's parts once, and logging them again (a resumed sweep) adds nothing.
"""
from __future__ import annotations

import json
from typing import Iterable

from mlflow.entities import Dataset, DatasetInput, InputTag
from mlflow.tracking import MlflowClient

from envs.datasets import DataPart

# The input tag MLflow's UI shows next to a dataset's name (it calls it the context: train, validation, test).
CONTEXT_TAG = "mlflow.data.context"


def dataset_input(part: DataPart) -> DatasetInput:
    """One part as an MLflow dataset input: rows and time span in the profile, the part and fold as tags."""
    source_type = part.source.split("://", 1)[0] if "://" in part.source else (
        "code" if part.source.startswith("synthetic") else "local")
    profile = {"rows": part.rows, "first": part.first, "last": part.last}
    dataset = Dataset(name=part.name, digest=part.digest, source_type=source_type,
                      source=json.dumps({"uri": part.source}), profile=json.dumps(profile))
    return DatasetInput(dataset, tags=[InputTag(CONTEXT_TAG, part.part), InputTag("fold", str(part.fold))])


def log_data_parts(client: MlflowClient, run_id: str, parts: Iterable[DataPart]) -> None:
    """Attach `parts` to the run (each (name, digest) once)."""
    unique = {(part.name, part.digest): part for part in parts}
    if unique:
        client.log_inputs(run_id, datasets=[dataset_input(part) for part in unique.values()])
