"""Runs that start at the same moment on a new sqlite MLflow store: without a lock MLflow's migrations run
in several processes at once and all but one die (`duplicate column name: step`); `make_client` creates
the store under a file lock (experiments.tracking.store), so all of them get a working store."""
from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

from experiments.tracking.runs import make_client
from experiments.tracking.store import prepare_store, sqlite_path

PROCESSES = 4
ROUNDS = 3


def _open_store(uri: str, barrier: mp.synchronize.Barrier, results: mp.Queue) -> None:
    try:
        barrier.wait(timeout=60)
        make_client(uri).search_experiments()
        results.put("")
    except BaseException as exc:  # noqa: BLE001 - every failure is reported to the test
        results.put(f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")


def open_at_once(uri: str, processes: int = PROCESSES) -> list[str]:
    """Errors of `processes` processes that open the store at `uri` at the same moment (forked, so
    that they start within milliseconds of each other rather than after each one's imports)."""
    ctx = mp.get_context("fork")
    barrier, results = ctx.Barrier(processes), ctx.Queue()
    procs = [ctx.Process(target=_open_store, args=(uri, barrier, results)) for _ in range(processes)]
    for proc in procs:
        proc.start()
    try:
        errors = [results.get(timeout=120) for _ in procs]
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
    return [error for error in errors if error]


def test_processes_starting_together_on_a_new_sqlite_store_all_succeed(tmp_path: Path) -> None:
    for round_ in range(ROUNDS):
        uri = f"sqlite:///{tmp_path}/round{round_}/mlruns/mlflow.db"  # the folder does not exist yet either
        assert open_at_once(uri) == [], f"round {round_}"

        client = make_client(uri)
        experiment_id = client.create_experiment(f"exp{round_}")
        run_id = client.create_run(experiment_id).info.run_id
        client.log_metric(run_id, "loss", 0.5, step=1)
        client.set_terminated(run_id)
        assert client.get_run(run_id).data.metrics == {"loss": 0.5}
        client.create_registered_model(f"model{round_}")  # the model registry's tables are there too
        assert [m.name for m in client.search_registered_models()] == [f"model{round_}"]


def test_other_uris_are_left_alone(tmp_path: Path) -> None:
    prepare_store("http://127.0.0.1:9")  # no server there: nothing may be contacted
    prepare_store((tmp_path / "mlruns").as_uri())
    prepare_store("sqlite:///:memory:")
    assert list(tmp_path.iterdir()) == []


def test_sqlite_path() -> None:
    assert sqlite_path("sqlite:////tmp/x/mlflow.db") == Path("/tmp/x/mlflow.db")
    assert sqlite_path("sqlite:///mlflow.db?timeout=5") == Path("mlflow.db")
    assert sqlite_path("sqlite:///:memory:") is None
    assert sqlite_path("http://localhost:5000") is None
    assert sqlite_path("file:///tmp/mlruns") is None
