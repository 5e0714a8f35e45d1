"""What `--resume` needs to find an interrupted sweep again, kept in the sweep's storage (so a resume from
another machine finds it too), one file per sweep.

Each sweep writes `<name>/sweeps/<sweep>.json` when it starts and again when it ends, with its status and the
process that drives it; `<name>/latest_sweep.json` is a copy of the newest. `--resume` takes the newest sweep
that can be resumed (interrupted, failed, partial, or running under a driver that is gone) and says which when
others are newer, so two runs of one experiment never make it pick up the other's sweep silently; it refuses
while the only candidate's driver is still alive.
"""
from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import asdict, dataclass, field, replace

import psutil

from envs.errors import InputError
from experiments.records.exits import (
    SWEEP_FAILED,
    SWEEP_FINISHED,
    SWEEP_INTERRUPTED,
    SWEEP_PARTIAL,
    SWEEP_RUNNING,
)
from experiments.storage.filesystem import Storage

RUNNING, INTERRUPTED, FAILED, PARTIAL, FINISHED = (SWEEP_RUNNING, SWEEP_INTERRUPTED, SWEEP_FAILED, SWEEP_PARTIAL,
                                                   SWEEP_FINISHED)
RESUMABLE = (INTERRUPTED, FAILED, PARTIAL)


@dataclass(frozen=True)
class SweepState:
    tune_dir: str  # the Tune experiment folder, a path inside the storage
    parent_run_id: str
    experiment_id: str
    tracking_uri: str
    status: str = RUNNING
    pid: int = field(default_factory=os.getpid)
    host: str = field(default_factory=socket.gethostname)
    started: float = field(default_factory=time.time)  # when the sweep first started (a resume keeps it)
    driver_started: float = field(default_factory=lambda: psutil.Process().create_time())  # tells pid reuse apart

    @property
    def sweep(self) -> str:
        """The sweep's name: its Tune folder's (`<experiment>-<time>-<parent run id prefix>`)."""
        return self.tune_dir.rstrip("/").rsplit("/", 1)[-1]

    def save(self, storage: Storage, name: str) -> None:
        text = json.dumps(asdict(self), indent=2)
        storage.write_text(storage.path(name, "sweeps", f"{self.sweep}.json"), text)
        storage.write_text(storage.path(name, "latest_sweep.json"), text)

    def ended(self, storage: Storage, name: str, status: str) -> None:
        replace(self, status=status).save(storage, name)

    def driver_alive(self) -> bool:
        """Whether the process that drives this sweep still runs (only knowable on the same machine)."""
        if self.host != socket.gethostname():
            return False
        try:
            return abs(psutil.Process(self.pid).create_time() - self.driver_started) < 1
        except psutil.Error:
            return False


def all_sweeps(storage: Storage, name: str) -> list[SweepState]:
    """Every sweep of `name` in the storage, oldest first; a state file written before this layout counts too."""
    texts = [storage.read_text(path) for path in storage.list_files(storage.path(name, "sweeps"), ".json")]
    if not texts:
        texts = [storage.read_text(storage.path(name, "latest_sweep.json"))]
    states = []
    for text in filter(None, texts):
        try:
            # A file from before sweeps had a status (an interrupted sweep's) names no live driver.
            states.append(SweepState(**{"status": INTERRUPTED, "pid": 0, "driver_started": 0.0, **json.loads(text)}))
        except (ValueError, TypeError):
            continue  # a damaged state file names no sweep we could resume
    return sorted(states, key=lambda state: state.started)


def sweep_to_resume(storage: Storage, name: str) -> tuple[SweepState, str]:
    """The newest sweep of `name` that can be resumed, and a note when others are newer; else InputError."""
    where = storage.display(storage.path(name))
    sweeps = all_sweeps(storage, name)
    candidates = [s for s in sweeps if s.status in RESUMABLE or (s.status == RUNNING and not s.driver_alive())]
    if not candidates:
        running = [s for s in sweeps if s.status == RUNNING]
        if running:
            raise InputError(f"{where}: sweep {running[-1].sweep} of '{name}' is still running (pid "
                             f"{running[-1].pid}): wait for it to end, or stop it (Ctrl-C) and resume then")
        if sweeps:
            raise InputError(f"{where}: the last sweep of '{name}' ({sweeps[-1].sweep}) finished: nothing to resume; "
                             "run without --resume for a new sweep")
        raise InputError(f"{where}: no sweep of '{name}' to resume there: run without --resume (or pass the same "
                         "--storage or --output as the interrupted run)")
    chosen = candidates[-1]
    newer = [s for s in sweeps if s.started > chosen.started]
    note = (f"resuming sweep {chosen.sweep} ({chosen.status}); newer sweeps of '{name}' not resumed: "
            + ", ".join(f"{s.sweep} ({'running' if s.status == RUNNING else s.status})"
                        for s in newer)) if newer else ""
    return chosen, note
