"""The data a run used, one part at a time, as the tracking store shows it (e.g. `BTC-USD_1h[train]`).

Each env family that reads data says which parts of which files one env_config trains, selects and is scored on
(`EnvFamily.datasets`); experiments log them as MLflow dataset inputs, so the runs table's Dataset column tells
runs on different data apart. A part's digest names its content: the digest of the file's bytes (or of the
generated data's parameters) and the part's row range, so two runs share a digest only when they read the same
rows of the same data.

A file's bytes are read (`read_bytes`: a local path or an s3:// URI) and digested (`digest_of`) here for every family
and for the platform: the digest `load_bars` stores with the bars and the one `experiments.data update` checks before
it replaces the file (experiments.storage.dataset_versions) must be the same function's.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from envs.errors import InputError

# MLflow keeps one input per (name, digest) on a run and stores digests of at most 36 characters.
DIGEST_CHARS = 32


@dataclass(frozen=True)
class DataPart:
    """One part (train, validation or test) of one fold of one dataset."""

    data: str       # the dataset's short name: a file's stem ("BTC-USD_1h"), or what generated it
    part: str       # "train" | "validation" | "test"
    digest: str     # part_digest(): the content's digest and the part's rows
    source: str     # the file's path or URI; for generated data, how it was generated
    rows: int       # rows of the part (bars, CI cycles)
    first: str      # the part's first and last row, as people read them (a bar's time, a cycle's id)
    last: str
    fold: int = 0

    @property
    def name(self) -> str:
        return f"{self.data}[{self.part}]"


def part_digest(content_digest: str, start: int, end: int) -> str:
    """The digest of rows [start, end) of data whose whole content has `content_digest`."""
    return hashlib.sha256(f"{content_digest}:{start}:{end}".encode()).hexdigest()[:DIGEST_CHARS]


def file_digest(path: str | Path) -> str:
    """The SHA-256 of a local file's bytes."""
    return digest_of(Path(path).read_bytes())


def whole_file(path: str, part: str, rows: int) -> DataPart:
    """All of a local file as one part of `rows` rows (e.g. the cycles of a history a model is scored on after
    training, `part` "transfer"): its digest is the file's."""
    return DataPart(Path(path).stem, part, file_digest(path)[:DIGEST_CHARS], str(Path(path).resolve()), rows, "", "")


def is_uri(path: str | Path) -> bool:
    """A URI such as s3://bucket/raw/BTC-USD_1h.parquet (read through pandas' pyarrow filesystems), not a path."""
    return "://" in str(path)


def read_bytes(path: str | Path, what: str) -> bytes:
    """A user-named file's bytes from a local path or an s3:// URI (`?endpoint_override=` selects an S3-compatible
    store), so every node of a cluster reads the same bytes; InputError naming the file and the fix."""
    if not is_uri(path):
        local = Path(path)
        if not local.exists():
            raise InputError(f"{local}: {what} not found")
        if local.is_dir():
            raise InputError(f"{local}: is a folder, not a {what}")
        try:
            return local.read_bytes()
        except OSError as exc:
            raise InputError(f"{local}: cannot read the {what} ({exc.strerror})") from None
    import pyarrow.fs as pafs

    try:
        filesystem, inner = pafs.FileSystem.from_uri(str(path))
        with filesystem.open_input_stream(inner) as stream:
            return stream.read()
    except FileNotFoundError:
        raise InputError(f"{path}: {what} not found: upload it there") from None
    except (OSError, ValueError) as exc:
        first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise InputError(f"{path}: cannot read it ({first}): check the URI, the endpoint and the credentials "
                         "(AWS_PROFILE, ~/.aws/credentials or an instance role)") from None


def digest_of(data: bytes) -> str:
    """The content digest that names data in caches and ledgers."""
    return hashlib.sha256(data).hexdigest()
