"""The pieces behind "one line and the way back": which part failed, which sweep --resume takes, whether a saved
sweep can be resumed exactly, and the MLflow closures a dead tracking server left pending."""
from __future__ import annotations

import errno
import json
import os
import time
from itertools import pairwise
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from mlflow.tracking import MlflowClient

from envs.errors import InputError, RunFault
from experiments.storage.filesystem import S3Location, bounded_waits, resolve_storage
from experiments.storage.resume_check import check_resumable, checkpoint_damage
from experiments.storage.sweep_state import FINISHED, INTERRUPTED, RUNNING, SweepState, sweep_to_resume
from experiments.sweep.faults import MLFLOW_WAITS, bound_waits, what_failed, write_chain
from experiments.tracking.pending_closures import PendingClosures
from tests.servers import LOOPBACK, free_port


@pytest.fixture
def storage(tmp_path):
    return resolve_storage(None, None, tmp_path / "runs", "f.yaml", {})


def chained(*errors: BaseException) -> BaseException:
    """errors[0] raised while handling errors[1], ... (what a full disk looks like from the top)."""
    for outer, inner in pairwise(errors):
        outer.__context__ = inner
    return errors[0]


def test_a_full_disk_is_named_even_under_another_error(storage, tmp_path):
    error = chained(EOFError("Ran out of input"), OSError(errno.ENOSPC, "No space left on device", "/out/x.pkl"))
    assert what_failed(error, "sqlite:///x.db", storage, tmp_path).startswith("the disk is full: no space left for "
                                                                              "/out/x.pkl")
    assert what_failed(EOFError("Ran out of input"), "sqlite:///x.db", storage, tmp_path) is None  # disk has room
    assert what_failed(ValueError("a bug"), "sqlite:///x.db", storage, tmp_path) is None  # keeps its traceback


def test_a_tracking_server_that_stopped_answering_is_named(storage, tmp_path):
    from mlflow.exceptions import MlflowException

    uri = "http://127.0.0.1:5123"
    error = MlflowException(f"API request to {uri}/api/2.0/mlflow/runs/log-batch failed with exception "
                            "HTTPConnectionPool(host='127.0.0.1', port=5123): Max retries exceeded with url")
    assert what_failed(error, uri, storage, tmp_path) == (f"the MLflow tracking server {uri} stopped answering: start "
                                                          "it again (or check the network)")
    assert what_failed(error, "http://10.0.0.9:5000", storage, tmp_path) is None  # another host's error


def test_an_unreachable_s3_endpoint_is_named_from_pyarrows_own_error(tmp_path):
    endpoint = f"http://{LOOPBACK}:{free_port()}"  # nothing listens there
    storage = resolve_storage(f"s3://team/runs?endpoint_override={endpoint}", None, tmp_path, "f.yaml",
                              {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y"})
    fs = S3Location("team", "runs", {"endpoint_override": endpoint}).filesystem(check=True)
    # The check is one attempt with short timeouts, so an unreachable store is refused within seconds by
    # configuration (the refusal's own test, tests/integration/test_storage_and_cluster_errors.py, times nothing).
    settings = fs.__reduce__()[1][0]
    assert (settings["connect_timeout"], settings["request_timeout"]) == (3.0, 10.0)
    with pytest.raises(OSError) as raised:
        fs.get_file_info("team/runs/x")
    assert what_failed(raised.value, "sqlite:///x.db", storage, tmp_path) == (
        f"storage {storage.uri}: cannot reach {endpoint}: check the endpoint (?endpoint_override= or "
        "AWS_ENDPOINT_URL_S3) and that the store is running")


def test_waits_are_bounded_unless_the_user_chose_their_own():
    environ = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "300"}
    bound_waits(environ)
    assert environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "300"
    assert environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == MLFLOW_WAITS["MLFLOW_HTTP_REQUEST_MAX_RETRIES"]
    s3 = bounded_waits({"RLPLATFORM_S3_ATTEMPTS": "2", "RLPLATFORM_S3_TIMEOUT_S": "7"})
    assert s3["request_timeout"] == 7.0 and s3["connect_timeout"] == 5.0
    with pytest.raises(InputError, match="RLPLATFORM_S3_ATTEMPTS"):
        bounded_waits({"RLPLATFORM_S3_ATTEMPTS": "a few"})


def test_the_whole_chain_goes_to_a_log_file_and_never_an_empty_one(tmp_path):
    try:
        raise chained(RuntimeError("outer"), OSError(errno.ENOSPC, "No space left on device"))
    except RuntimeError as error:
        log = write_chain(error, tmp_path / "exp")
    text = log.read_text()
    assert log.parent == tmp_path / "exp" and "No space left on device" in text and "outer" in text


def sweep(storage, name: str, status: str, started: float, pid: int = 999_999_999) -> SweepState:
    """A sweep state file; its driver is `pid` (this process when it is ours, else a pid that runs nothing)."""
    import psutil

    driver_started = psutil.Process().create_time() if pid == os.getpid() else 0.0
    state = SweepState(storage.path("exp", "tune", name), f"run-{name}", "1", "sqlite:///x.db", status, pid,
                       started=started, driver_started=driver_started)
    state.save(storage, "exp")
    return state


def test_resume_takes_the_newest_resumable_sweep_and_names_the_newer_ones(storage):
    sweep(storage, "a", INTERRUPTED, 1.0)
    sweep(storage, "b", FINISHED, 2.0)
    sweep(storage, "c", RUNNING, time.time(), pid=os.getpid())  # another run, still alive
    chosen, note = sweep_to_resume(storage, "exp")
    assert chosen.sweep == "a"
    assert note == "resuming sweep a (interrupted); newer sweeps of 'exp' not resumed: b (finished), c (running)"


def test_a_sweep_whose_driver_died_is_resumable_but_a_live_one_is_not(storage):
    sweep(storage, "dead", RUNNING, 1.0)  # pid 999999999 runs nothing
    assert sweep_to_resume(storage, "exp")[0].sweep == "dead"
    os.remove(storage.path("exp", "sweeps", "dead.json"))
    # A resumed sweep keeps when it first started; its driver is the process resuming it now.
    sweep(storage, "live", RUNNING, 1.0, pid=os.getpid())
    with pytest.raises(InputError, match="sweep live of 'exp' is still running"):
        sweep_to_resume(storage, "exp")
    os.remove(storage.path("exp", "sweeps", "live.json"))
    reused = SweepState(storage.path("exp", "tune", "reused"), "r", "1", "sqlite:///x.db", RUNNING, os.getpid(),
                        started=1.0, driver_started=2.0)  # this pid, but another process long ago
    reused.save(storage, "exp")
    assert sweep_to_resume(storage, "exp")[0].sweep == "reused"


def test_a_resume_file_from_before_sweeps_had_a_status_is_resumable(storage):
    old = {"tune_dir": storage.path("exp", "tune", "old"), "parent_run_id": "p", "experiment_id": "1",
           "tracking_uri": "sqlite:///x.db"}
    storage.write_text(storage.path("exp", "latest_sweep.json"), json.dumps(old))
    chosen, note = sweep_to_resume(storage, "exp")
    assert (chosen.sweep, chosen.status, note) == ("old", INTERRUPTED, "")


def test_nothing_to_resume_says_why(storage):
    with pytest.raises(InputError, match="no sweep of 'exp' to resume"):
        sweep_to_resume(storage, "exp")
    sweep(storage, "done", FINISHED, 1.0)
    with pytest.raises(InputError, match="finished: nothing to resume"):
        sweep_to_resume(storage, "exp")


def write_checkpoint(folder: Path, empty: str | None = None) -> None:
    folder.mkdir(parents=True)
    (folder / "rllib_checkpoint.json").write_text("{}")
    (folder / "algorithm_state.pkl").write_bytes(b"x" * 10)
    if empty:
        (folder / empty).write_bytes(b"")


def test_a_checkpoint_is_whole_missing_cut_short_or_without_its_marker(storage, tmp_path):
    root = tmp_path / "ckpts"
    write_checkpoint(root / "whole")
    write_checkpoint(root / "cut", empty="learner_group/state.pkl".replace("/", "_"))
    (root / "nomarker").mkdir()
    (root / "nomarker" / "algorithm_state.pkl").write_bytes(b"x")
    assert checkpoint_damage(storage, str(root / "whole")) == ""
    assert "empty file" in checkpoint_damage(storage, str(root / "cut"))
    assert "no rllib_checkpoint.json" in checkpoint_damage(storage, str(root / "nomarker"))
    assert "missing" in checkpoint_damage(storage, str(root / "gone"))


def test_a_cut_short_tune_state_is_refused_not_restarted(storage, tmp_path):
    tune_dir = tmp_path / "runs" / "exp" / "tune" / "s"
    tune_dir.mkdir(parents=True)
    with pytest.raises(RunFault, match="saved no Tune state"):
        check_resumable(storage, str(tune_dir), "python -m experiments.run f.yaml")
    (tune_dir / "experiment_state-2026-01-01_00-00-00.json").write_text('{"trial_data": [["{\\"trial')
    with pytest.raises(RunFault, match=r"is damaged \(JSONDecodeError.*start over with python -m experiments.run"):
        check_resumable(storage, str(tune_dir), "python -m experiments.run f.yaml")


def test_closures_a_dead_server_left_are_applied_by_the_next_run(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("exp")
    parent = client.create_run(experiment).info.run_id
    child = client.create_run(experiment, tags={"mlflow.parentRunId": parent}).info.run_id
    closures = PendingClosures(tmp_path / "out" / "exp")
    assert closures.record(uri, experiment, parent, "FAILED")
    assert closures.record("http://elsewhere:5000", "2", "other", "FAILED")
    assert json.loads(closures.path.read_text())[0]["parent_run_id"] == parent
    lines = closures.apply(client, uri)
    assert len(lines) == 1 and parent in lines[0]
    assert {client.get_run(r).info.status for r in (parent, child)} == {"FAILED"}
    assert [e["parent_run_id"] for e in json.loads(closures.path.read_text())] == ["other"]  # not this store's
    assert closures.apply(client, uri) == []


def test_a_local_storage_lists_its_sweep_files_in_order(storage):
    assert storage.list_files(storage.path("exp", "sweeps"), ".json") == []
    sweep(storage, "b", FINISHED, 2.0)
    sweep(storage, "a", FINISHED, 1.0)
    names = [p.rsplit("/", 1)[-1] for p in storage.list_files(storage.path("exp", "sweeps"), ".json")]
    assert names == ["a.json", "b.json"] and isinstance(storage.filesystem, pafs.LocalFileSystem)


def test_the_verdict_names_the_planned_folds_and_seeds_it_lacks():
    from experiments.config.load import load_experiment
    from experiments.config.protocol import fold_indices
    from experiments.results.trials import Trial, missing_trials
    from tests.conftest import REPO

    exp = load_experiment(REPO / "conf" / "dqn_btc.yaml", ["tune.seeds=[0, 1]"])
    folds = fold_indices(exp)
    have = [Trial(None, None, "all", fold, seed, "default") for fold in folds for seed in (0, 1)
            if (fold, seed) not in {(folds[-1], 0), (folds[-1], 1), (folds[0], 1)}]
    assert missing_trials(have, exp) == f"fold {folds[0]} seed 1; fold {folds[-1]} missing"
    assert missing_trials([*have, Trial(None, None, "all", folds[0], 1, "d"), Trial(None, None, "all", folds[-1], 0,
                                                                                  "d"),
                           Trial(None, None, "all", folds[-1], 1, "d")], exp) == ""


def fake_trial(trial_id: str, scores: list[float]):
    from types import SimpleNamespace

    results = [SimpleNamespace(checkpoint=SimpleNamespace(path=f"/t/{trial_id}/checkpoint_{i:06d}"),
                               metrics={"selection_score": score}) for i, score in enumerate(scores)]
    manager = SimpleNamespace(best_checkpoint_results=results)
    return SimpleNamespace(trial_id=trial_id, run_metadata=SimpleNamespace(checkpoint_manager=manager))


def test_a_checkpoint_goes_only_when_no_saved_state_can_name_it(storage):
    from algos.rllib.config import SELECTION_SCORE
    from experiments.storage.checkpoint_pruning import CheckpointPruner

    assert SELECTION_SCORE == "selection_score"
    pruner = CheckpointPruner(storage, "unused", keep=1, mode="max")
    trial = fake_trial("a", [5.0, 1.0, 9.0, 2.0, 3.0, 0.5])  # best: 2, newest: 5
    assert pruner.removable(trial, None) == []  # no state saved yet: it may name any of them
    # The saved state resumes from checkpoint 3: 0 and 1 are older and not the best; 4 and 5 may be named next.
    assert [p[-1] for p in pruner.removable(trial, "checkpoint_000003")] == ["0", "1"]
    assert [p[-1] for p in pruner.removable(trial, "~")] == ["0", "1", "3", "4"]  # an unfinished trial's end
    assert [p[-1] for p in pruner.removable(trial, "~", keep_newest=False)] == ["0", "1", "3", "4", "5"]
    assert [p[-1] for p in CheckpointPruner(storage, "unused", keep=1, mode="min").removable(trial, "~")] == [
        "0", "1", "2", "3", "4"]  # lower is better: 5 (0.5) is both the best and the newest


def test_tunes_silent_restart_ends_a_resume_instead():
    """Tune logs this line, then starts the whole sweep again; while resuming, the line raises."""
    import logging

    from experiments.storage.resume_check import no_silent_restart

    logger = logging.getLogger("ray.tune.execution.tune_controller")
    with no_silent_restart(), pytest.raises(RunFault, match="could not read the interrupted sweep back"):
        try:
            raise ValueError("Expecting value: line 1 column 1")
        except ValueError:
            logger.exception("Failed to restore the run state.")
    logger.error("Failed to restore the run state.")  # outside a resume: Tune's business
