"""Replace a data file (a local file or an s3:// object) with a new version, keeping the previous one: what
`python -m experiments.data update` writes through (experiments/api/data.py hands it to the env family, whose
`UpdatesData` ability plans the new bytes).

Runs read the dataset while it is updated, possibly on other nodes, and the trials ledger keys results by the
data's digest: a reader must see the old or the new bytes, never half of them (local: a temp file in the same
folder, then os.replace; S3: one PUT of the whole object), and the bytes earlier runs trained on must stay
reproducible, so they are kept beside the dataset as `<stem>.<UTC %Y%m%dT%H%M%SZ><suffix>`. A dataset that
changed since it was read (another update at the same time) is refused rather than overwritten.
"""
from __future__ import annotations

import contextlib
import os
import posixpath
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import pyarrow.fs as pafs

from envs.datasets import digest_of
from envs.errors import InputError
from experiments.storage.filesystem import S3Location, describe_s3_error, is_s3, parse_s3

STAMP_FORMAT = "%Y%m%dT%H%M%SZ"
T = TypeVar("T")


@dataclass(frozen=True)
class Dataset:
    """Where a dataset lives: `name` as the user wrote it (for messages), `uri` as it is read (an s3:// URI with
    the environment's endpoint made explicit), `path` as it is written (a local path, or bucket/key inside
    `location`'s filesystem; no location: a local file)."""

    name: str
    uri: str
    path: str
    location: S3Location | None = None

    def shown(self, path: str) -> str:
        return path if self.location is None else f"s3://{path}"

    def exists(self, path: str) -> bool:
        if self.location is None:
            return Path(path).exists()
        return self._on_s3(lambda fs: fs.get_file_info(path).type != pafs.FileType.NotFound)

    def read(self) -> bytes:
        """The dataset's bytes as they are now."""
        if self.location is None:
            try:
                return Path(self.path).read_bytes()
            except OSError as error:
                raise InputError(f"{self.path}: cannot read it ({error.strerror}): run the update again") from None

        def get(fs: pafs.FileSystem) -> bytes:
            with fs.open_input_stream(self.path) as stream:
                return stream.read()

        return self._on_s3(get)

    def write(self, path: str, data: bytes) -> None:
        """Write `data` whole: readers see the old or the new file, never part of it."""
        if self.location is not None:
            def put(fs: pafs.FileSystem) -> None:
                with fs.open_output_stream(path) as stream:  # one PUT: atomic on S3
                    stream.write(data)

            self._on_s3(put)
            return
        handle, tmp = tempfile.mkstemp(dir=Path(path).parent, prefix=f".{Path(path).name}.", suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(data)
            os.chmod(tmp, Path(self.path).stat().st_mode & 0o777)  # mkstemp's 0600 would hide it from the team
            os.replace(tmp, path)
        except OSError as error:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise InputError(f"{path}: cannot write it ({error.strerror}): check the folder's permissions and free "
                             "space") from None

    def dated_path(self, now: datetime) -> str:
        """`<stem>.<UTC time><suffix>` beside the dataset (`-2`, `-3`, ... after the time if already taken)."""
        join, split = (os.path.join, os.path.split) if self.location is None else (posixpath.join, posixpath.split)
        folder, name = split(self.path)
        suffix = posixpath.splitext(name)[1]
        stamp = f"{name.removesuffix(suffix)}.{now.astimezone(UTC).strftime(STAMP_FORMAT)}"
        names = (f"{stamp}{f'-{n}' if n > 1 else ''}{suffix}" for n in range(1, 100))
        return next(path for path in (join(folder, name) for name in names) if not self.exists(path))

    def _on_s3(self, call: Callable[[pafs.FileSystem], T]) -> T:
        try:
            return call(self.location.filesystem())
        except OSError as error:
            raise InputError(f"{self.name}: {describe_s3_error(error, self.location)}") from None


def locate(path: str) -> Dataset:
    """Where the dataset at `path` (local or s3://) is read and written; InputError for a malformed s3:// URI."""
    if is_s3(path):
        location = parse_s3(path, "update PATH")
        return Dataset(path, location.uri, f"{location.bucket}/{location.key}", location)
    return Dataset(path, path, path)


def replace_dataset(dataset: Dataset, data: bytes, read_digest: str, now: datetime | None = None) -> str:
    """Keep the current bytes as a dated copy beside the dataset, then write `data` in its place. `read_digest` is
    the digest of the bytes the update was planned on (`envs.datasets.digest_of`, the one `load_bars` stores): if
    the dataset changed since, nothing is written. Returns where the previous version was kept."""
    current = dataset.read()
    if digest_of(current) != read_digest:
        raise InputError(f"{dataset.name}: changed while it was being updated (another update or import at the same "
                         "time?): run the update again")
    copy = dataset.dated_path(now or datetime.now(UTC))
    dataset.write(copy, current)
    dataset.write(dataset.path, data)
    return dataset.shown(copy)
