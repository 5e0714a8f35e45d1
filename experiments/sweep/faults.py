"""Faults outside the run (a tracking server gone, storage unreachable, a full disk) end it in one line.

Such a fault surfaces as the last exception of a long chain (Tune wraps it; the next thing that touches the
broken part fails again; on a full disk the visible error is an `EOFError` from reading a truncated pickle).
`what_failed` walks the chain for the part that broke and names it; the run prints that line and the resume
command, and writes the whole chain to a log file beside its outputs.

Waits are bounded first: MLflow's HTTP client retries 7 times with a backoff factor of 2 and a 120 s timeout
(about 4 minutes per call against a dead server, measured 8 min 22 s before the first error), so the run
sets tighter defaults unless the user set their own.
"""
from __future__ import annotations

import errno
import shutil
import tempfile
import time
import traceback
from pathlib import Path
from typing import Iterator, MutableMapping

from experiments.storage.filesystem import Storage, describe_s3_error

EXIT_FAULT = 4  # a fault outside the run ended it (docs/faults.md); 1 failed sweep, 2 bad input, 3 partial

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
