"""`--resume` continues from whole state or refuses: never a silent restart from scratch.

Tune writes its experiment state in place and, when it cannot read it back, logs "Failed to restore the run
state", starts the whole sweep again and succeeds (measured after a full disk: a truncated state file, then
every trial trained twice into the same MLflow runs). So before restoring, the state is read the way Tune
reads it, and each unfinished trial's checkpoint that it names must be there and whole; and while restoring,
that log line ends the run instead.
"""
from __future__ import annotations

import contextlib
import fnmatch
import json
import logging
from typing import Any, Iterator

import pyarrow.fs as pafs

from envs.errors import RunFault
from experiments.storage.filesystem import Storage

STATE_FILES = "experiment_state-*.json"  # Tune's TuneController.CKPT_FILE_TMPL
CHECKPOINT_MARKER = "rllib_checkpoint.json"  # RLlib writes it with every algorithm checkpoint


def check_resumable(storage: Storage, tune_dir: str, start_over: str) -> int:
    """Refuse (RunFault) when the sweep in `tune_dir` cannot be resumed exactly; `start_over` is the command
    that starts a new sweep instead. Returns how many unfinished trials will continue from a checkpoint."""
    shown = storage.display(tune_dir)
    newest = newest_state_file(storage, tune_dir)
    if newest is None:
        raise RunFault(f"{shown}: the interrupted run saved no Tune state (it ended before its first save): "
                       f"nothing to resume; start over with {start_over}")
    try:
        trials = trial_checkpoints(storage, newest)
    except (ValueError, KeyError, TypeError, EOFError, AttributeError) as error:
        raise RunFault(f"{shown}: Tune's state file {newest.rsplit('/', 1)[-1]} is damaged ({type(error).__name__}: "
                       f"cut short, was the disk full?): it cannot be resumed; start over with {start_over}") from None
    resumed = 0
    for trial_id, status, checkpoint in trials:
        if status == "TERMINATED" or checkpoint is None:
            continue
        where = f"{tune_dir.rstrip('/')}/{'/'.join(checkpoint.rstrip('/').split('/')[-2:])}"
        damage = checkpoint_damage(storage, where)
        if damage:
            raise RunFault(f"{storage.display(where)}: trial {trial_id}'s checkpoint, which the saved state resumes "
                           f"from, {damage}: it cannot continue exactly; start over with {start_over}")
        resumed += 1
    return resumed


def newest_state_file(storage: Storage, tune_dir: str) -> str | None:
    """The state file Tune restores from: the newest `experiment_state-<time>.json` (None before the first)."""
    states = [p for p in storage.list_files(tune_dir, ".json") if fnmatch.fnmatch(p.rsplit("/", 1)[-1], STATE_FILES)]
    return max(states, default=None)


def trial_checkpoints(storage: Storage, path: str) -> list[tuple[str, str, str | None]]:
    """(trial id, status, latest checkpoint path) of every trial in a Tune state file, read as Tune reads it."""
    from ray.tune.experiment.trial import _TrainingRunMetadata
    from ray.tune.utils.serialization import _loads_with_cloudpickle

    state = _loads_with_cloudpickle(storage.read_text(path) or "")
    trials = []
    for json_state, run_metadata in state["trial_data"]:
        trial = json.loads(json_state)
        latest = _TrainingRunMetadata.from_json_state(run_metadata).checkpoint_manager.latest_checkpoint_result
        trials.append((trial["trial_id"], trial["status"], latest.checkpoint.path if latest else None))
    return trials


def checkpoint_damage(storage: Storage, folder: str) -> str:
    """What is wrong with a checkpoint folder ("" when whole): missing, no RLlib marker, or empty files (a
    write cut short)."""
    infos = storage.filesystem.get_file_info(pafs.FileSelector(folder, recursive=True, allow_not_found=True))
    files = {info.path.removeprefix(folder).strip("/"): info.size for info in infos
             if info.type == pafs.FileType.File}
    if not files:
        return "is missing (pruned, or never written whole)"
    if CHECKPOINT_MARKER not in files:
        return f"has no {CHECKPOINT_MARKER} (written part way)"
    empty = sorted(name for name, size in files.items() if not size)
    if empty:
        return f"has {len(empty)} empty file(s), e.g. {empty[0]} (a write cut short)"
    return ""


class _RefuseRestart(logging.Handler):
    """Turns Tune's "Failed to restore the run state" (after which it would start over) into an error."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("Failed to restore the run state"):
            cause = record.exc_info[1] if record.exc_info else None
            raise RunFault(f"Tune could not read the interrupted sweep back ({type(cause).__name__}: "
                           f"{str(cause).splitlines()[0][:160] if cause else 'no detail'})")


@contextlib.contextmanager
def no_silent_restart() -> Iterator[Any]:
    logger = logging.getLogger("ray.tune.execution.tune_controller")
    handler = _RefuseRestart(logging.ERROR)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
