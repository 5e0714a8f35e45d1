"""Faults outside the run (a tracking server gone, storage unreachable, a full disk) end it in one line.

Such a fault surfaces as the last exception of a long chain (Tune wraps it; the next thing that touches the
broken part fails again; on a full disk the visible error is an `EOFError` from reading a truncated pickle).
`what_failed` walks the chain for the part that broke and names it; the run prints that line and the resume
command, and writes the whole chain to a log file beside its outputs.

Waits are bounded first: MLflow's HTTP client retries 7 times with a backoff factor of 2 and a 120 s timeout
(about 4 minutes per call against a dead server, measured 8 min 22 s before the first error), so the run
sets tighter defaults unless the user set their own.

A joined Ray cluster that goes away mid-run is watched for (`ClusterWatch`): Ray's driver retries the GCS for
60 s (`gcs_rpc_server_reconnect_timeout_s`), then ends the process from C++ with exit 1 and Ray's log line, and
no cleanup of the run's (measured with Ray 2.60: a smoke run whose cluster was killed after its first trial
started ended 60.5 s later, exit 1, its MLflow runs left RUNNING).
"""
from __future__ import annotations

import errno
import os
import shutil
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Callable, Iterator, MutableMapping

from experiments.plan.cluster import REQUEST_TIMEOUT_S, Ask, NoAnswer, RayTarget, ask_gcs
from experiments.records.exits import ExitCode
from experiments.storage.filesystem import Storage, describe_s3_error

# MLflow's HTTP retries, bounded: against a dead server a call fails after about 7 s (backoff 1, 2, 4 s),
# against one that accepts and hangs after 4 attempts x 12 s: either way under a minute.
MLFLOW_WAITS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "3",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0.5",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "12",
    # MLflow prints each run's URL when a run on a server is closed, asking the server once more to do it; the run
    # prints its own links.
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
}


def bound_waits(environ: MutableMapping[str, str]) -> None:
    """MLflow's HTTP waits in seconds, not minutes, unless the user set them."""
    for name, value in MLFLOW_WAITS.items():
        environ.setdefault(name, value)


def chain(error: BaseException) -> Iterator[BaseException]:
    """`error` and every exception it was raised from or while handling, each once."""
    seen: set[int] = set()
    todo = [error]
    while todo:
        current = todo.pop(0)
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        todo += [current.__cause__, current.__context__]
        todo += [getattr(current, "cause", None)]  # Ray's RayTaskError keeps the remote error here


def is_disk_full(error: BaseException) -> bool:
    return (isinstance(error, OSError) and error.errno == errno.ENOSPC) or "No space left on device" in str(error)


def what_failed(error: BaseException, tracking_uri: str, storage: Storage, output: Path) -> str | None:
    """One line naming the part outside the run that broke, or None when nothing outside broke (a bug: the
    traceback is then the right thing to show)."""
    errors = list(chain(error))
    full = next((e for e in errors if is_disk_full(e)), None)
    if full is not None or any(isinstance(e, EOFError) for e in errors) and _nearly_full(output, storage):
        where = getattr(full, "filename", None) or (storage.root if storage.is_local else output)
        return f"the disk is full: no space left for {where} ({_free(Path(str(where)))} free): free some space"
    if tracking_unreachable(error, tracking_uri):
        return (f"the MLflow tracking server {tracking_uri} stopped answering: start it again (or check the "
                "network)")
    if storage.location is not None:
        s3 = next((e for e in errors if isinstance(e, OSError) and "AWS Error" in str(e)), None)
        if s3 is not None:
            return f"storage {storage.uri}: {describe_s3_error(s3, storage.location)}"
    return None


_UNREACHABLE = ("Max retries exceeded", "Connection refused", "timed out", "Connection aborted", "RemoteDisconnected")


def tracking_unreachable(error: BaseException, tracking_uri: str) -> bool:
    """Whether `error` is a tracking server that stopped answering (then the run does not ask it again)."""
    return tracking_uri.startswith(("http://", "https://")) and any(
        _is_unreachable(e, tracking_uri) for e in chain(error))


def _is_unreachable(error: BaseException, tracking_uri: str) -> bool:
    """A failed request to the tracking server's host (MLflow's message names the URL it called)."""
    host = tracking_uri.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[0]
    text = str(error)
    return host in text and any(marker in text for marker in _UNREACHABLE)


def _nearly_full(output: Path, storage: Storage) -> bool:
    """An EOFError reading a pickle back is how a truncated file shows; it means a full disk when one is."""
    paths = [output, *([Path(storage.root)] if storage.is_local else [])]
    return any(_free_bytes(path) < 1 << 20 for path in paths)


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _free_bytes(path: Path) -> int:
    try:
        return shutil.disk_usage(_existing(path)).free
    except OSError:
        return 1 << 62


def _free(path: Path) -> str:
    free = _free_bytes(path)
    return f"{free / 1e6:.1f} MB" if free < 1 << 30 else f"{free / 1e9:.1f} GB"


def write_chain(error: BaseException, folder: Path) -> Path:
    """The whole exception chain in `folder`/fault-<time>.log, else in the temp folder (the disk may be the
    fault); returns where it went."""
    text = "".join(traceback.format_exception(error))
    name = f"fault-{time.strftime('%Y%m%d-%H%M%S')}.log"
    for target in (folder, Path(tempfile.gettempdir())):
        try:
            target.mkdir(parents=True, exist_ok=True)
            (target / name).write_text(text)
            return target / name
        except OSError:
            (target / name).unlink(missing_ok=True)  # no empty log left on a full disk
            continue
    return Path("(nowhere: no disk would take it)")


# A joined cluster's GCS is asked every WATCH_EVERY_S; after LOST_AFTER_S without an answer it is gone: well inside
# the 60 s after which Ray's driver ends the process itself, and long enough for a GCS that restarts quickly.
WATCH_EVERY_S = 2.0
LOST_AFTER_S = 10.0


class ClusterWatch:
    """Asks the GCS of the cluster the run joined, from a thread, whether it is still there, so that a cluster that
    goes away ends the run in one line with exit 4 instead of a hang or Ray's own exit 1.

    When the GCS has not answered for `lost_after` s, the watch says so through `last_words` (the run's line, its
    MLflow runs and sweep state closed) and ends the process with ExitCode.FAULT. It does not unwind the main thread:
    by then that thread is inside Ray's C++, where no Python exception reaches it (measured: in Tune's
    `remove_placement_group` for a trial whose actor died with the cluster; `ray.init`'s connect loop is another).
    A local Ray or a `ray://` client is not watched."""

    def __init__(self, target: RayTarget, last_words: Callable[[str], None], ask: Ask = ask_gcs,
                 every: float = WATCH_EVERY_S, lost_after: float = LOST_AFTER_S,
                 end: Callable[[int], object] = os._exit) -> None:
        self.address, self.token = (target.address, target.token) if target.joins_gcs else (None, False)
        self.last_words, self.ask, self.end = last_words, ask, end
        self.every, self.lost_after = every, lost_after
        self._stopped = threading.Event()
        self._ending = threading.Lock()  # the run's own end and the watch's: whichever comes first, alone
        self.thread = threading.Thread(target=self._watch, name="ray-cluster-watch", daemon=True)

    def start(self) -> None:
        """Watch from now on (before `ray.init`, which itself hangs on a GCS that goes away while it connects)."""
        if self.address is not None:
            self.thread.start()

    def stop(self) -> None:
        """Stop watching: the run ends on its own. Once the watch has found the cluster gone, this waits for it to
        end the process."""
        with self._ending:
            self._stopped.set()

    def _watch(self) -> None:
        """Ask until stopped; when the GCS stays silent for `lost_after` s, end the run as the fault it is."""
        silent_since: float | None = None
        while not self._stopped.wait(self.every):
            try:
                self.ask(self.address, min(self.every, REQUEST_TIMEOUT_S), self.token)
                silent_since = None
                continue
            except NoAnswer as silent:
                reason = str(silent)
            now = time.monotonic()
            silent_since = now if silent_since is None else silent_since
            if now - silent_since >= self.lost_after:
                self._end(f"its GCS has not answered for {now - silent_since:.0f} s: {reason}")
                return

    def _end(self, why: str) -> None:
        """The run's last words and ExitCode.FAULT, unless the run ended on its own first."""
        with self._ending:
            if self._stopped.is_set():
                return
            self.last_words(f"the Ray cluster at {self.address} went away mid-run ({why}): start it again, or drop "
                            "--address (and unset RAY_ADDRESS) to run on a local Ray")
            sys.stdout.flush()
            sys.stderr.flush()
            self.end(ExitCode.FAULT)
