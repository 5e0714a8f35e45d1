"""Create or upgrade a local sqlite MLflow store under an inter-process file lock.

When two `python -m experiments.run ...` start at the same moment on a sqlite store that does not exist
yet, both find its tables missing and both run MLflow's alembic migrations at once; all but one die
with e.g. `sqlite3.OperationalError: duplicate column name: step`. MLflow 3.17 locks that step for its
jobs and workspace stores (`mlflow.store.db.utils._safe_initialize_tables`) but not for the tracking and
model registry stores. `prepare_store` builds both stores once while holding an exclusive `flock` on
`PATH.lock` next to the database, so only one process creates the tables; the others wait and then find
them there. MLflow caches the stores it builds per process, so the client made afterwards reuses them.

MLflow is imported where a store is prepared: every experiment file's validation reads `default_tracking_uri`, and
`--dry-run` should not pay MLflow's import (about 15% of it) for a path.
"""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

SQLITE_PREFIX = "sqlite:///"


def default_tracking_uri() -> str:
    """MLFLOW_TRACKING_URI, else the project's sqlite store in ./mlruns (what experiments.run uses by default)."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"{SQLITE_PREFIX}{Path('mlruns').resolve() / 'mlflow.db'}"


def sqlite_path(tracking_uri: str) -> Path | None:
    """The database file of a `sqlite:///PATH` URI (None for other URIs and in-memory databases)."""
    if not tracking_uri.startswith(SQLITE_PREFIX):
        return None
    path = tracking_uri.removeprefix(SQLITE_PREFIX).split("?", 1)[0]
    if not path or path == ":memory:":
        return None
    return Path(path)


def prepare_store(tracking_uri: str) -> None:
    """Make a `sqlite:///PATH` store's folder and create or upgrade its tables, one process at a time.

    Other URIs (a tracking server, a file store) are left alone. On a store that already exists this
    costs the lock and one opening of the store, which the client made afterwards reuses."""
    path = sqlite_path(tracking_uri)
    if path is None:
        return
    from mlflow.tracking import MlflowClient

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{path}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            # Building the tracking store creates the tables, runs the migrations and adds the default
            # experiment; the model registry store is built separately (lazily) and checks its own tables.
            client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
            client.search_registered_models(max_results=1)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
