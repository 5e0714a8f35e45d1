"""The feature store: computed feature matrices cached by content, shared by every trial and env runner of a sweep.

A matrix is named by a digest of what determines it: the bars file's bytes, the feature list (with every
other file it reads named by its bytes' digest, not its path), the timeframe and the code version (this
package's source, TA-Lib's, numpy's and pandas' versions). It is stored unnormalized, so each fold fits
its own normalization on its own train rows, in Arrow's IPC file format (read memory-mapped, no parsing: a hit
costs less than reading the bars' parquet). The store is a folder under the run's storage root
(`runs/features/`, or `s3://BUCKET/PREFIX/features/`); a matrix is written whole (a temporary file renamed
locally, one PUT on S3), so a reader never sees half of one. In one process a matrix is computed or read
once (vectorized envs, env runners and the scorer share it).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.fs as pafs
from pyarrow import ipc

from envs.datasets import digest_of, is_uri, read_bytes
from envs.trading.features.matrix import RawFeatures, build_raw
from envs.trading.features.spec import Block, Item, TransformFeature, file_sources
from envs.trading.features.talib_functions import TaFeature

_memory: dict[str, RawFeatures] = {}
_stored: set[tuple[str, str]] = set()  # (store, key) known to be in a store: no need to look again in this process


@functools.cache
def code_version() -> str:
    """What else decides the numbers: this package's source and the libraries that compute them."""
    import talib

    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.read_bytes())
    digest.update(f"talib {talib.__version__} numpy {np.__version__} pandas {pd.__version__}".encode())
    digest.update(f"numpy SIMD {'baseline' if numpy_simd_pinned() else 'native'}".encode())
    return digest.hexdigest()[:16]


def numpy_simd_pinned() -> bool:
    """Whether numpy runs its baseline loops only (experiments.run --cross-cpu): a matrix computed that way is
    the same on every CPU, one computed with this CPU's AVX2/AVX-512 loops may differ in the last bits, so the
    two are stored apart."""
    from numpy._core import _multiarray_umath

    disabled = set(os.environ.get("NPY_DISABLE_CPU_FEATURES", "").replace(",", " ").split())
    return set(_multiarray_umath.__cpu_dispatch__) <= disabled


def _canonical(items: tuple[Item, ...], digests: dict[str, str]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if isinstance(item, TransformFeature):
            out.append(["transform", item.name, [list(p) for p in item.params]])
        elif isinstance(item, TaFeature):
            out.append(["ta", item.name, [list(p) for p in item.params], list(item.outputs)])
        elif isinstance(item, Block):
            source = item.source if item.kind == "resample" else digests[item.source]
            out.append([item.kind, source, [list(o) for o in item.options], _canonical(item.children, digests)])
    return out


def feature_key(items: tuple[Item, ...], bars_digest: str, timeframe: str, digests: dict[str, str]) -> str:
    text = json.dumps({"bars": bars_digest, "timeframe": timeframe, "features": _canonical(items, digests),
                       "code": code_version()}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class FeatureStore:
    """A folder of feature matrices: a local path, or an s3:// URI (with its ?endpoint_override=)."""

    def __init__(self, uri: str) -> None:
        self.uri = uri

    def _location(self, key: str) -> str:
        if not is_uri(self.uri):
            return str(Path(self.uri) / f"{key}.arrow")
        parts = urlsplit(self.uri)
        return urlunsplit(parts._replace(path=f"{parts.path.rstrip('/')}/{key}.arrow"))

    def display(self, key: str) -> str:
        return self._location(key).split("?")[0]

    def has(self, key: str) -> bool:
        location = self._location(key)
        if not is_uri(location):
            return Path(location).exists()
        filesystem, inner = pafs.FileSystem.from_uri(location)
        return filesystem.get_file_info(inner).type != pafs.FileType.NotFound

    def get(self, key: str) -> RawFeatures | None:
        location = self._location(key)
        try:
            if is_uri(location):
                reader = ipc.open_file(pa.BufferReader(read_bytes(location, "feature matrix")))
            else:
                if not Path(location).exists():
                    return None
                reader = ipc.open_file(pa.memory_map(location))
            table = reader.read_all()
        except Exception:  # not there (S3), or unreadable: compute it again
            return None
        meta = json.loads(table.schema.metadata[b"features"])
        values = np.empty((table.num_rows, table.num_columns))
        for index, column in enumerate(table.columns):
            values[:, index] = column.to_numpy()
        return RawFeatures(values, tuple(meta["names"]), tuple(meta["groups"]),
                           np.array(meta["first_valid"], dtype=np.int64), tuple(meta["notes"]))

    def put(self, key: str, raw: RawFeatures) -> None:
        meta = {"names": list(raw.names), "groups": list(raw.groups), "first_valid": raw.first_valid.tolist(),
                "notes": list(raw.notes)}
        table = pa.table({f"c{i}": raw.values[:, i] for i in range(raw.values.shape[1])})
        table = table.replace_schema_metadata({"features": json.dumps(meta)})
        sink = pa.BufferOutputStream()
        with ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        data = sink.getvalue().to_pybytes()
        location = self._location(key)
        if is_uri(location):
            filesystem, inner = pafs.FileSystem.from_uri(location)
            with filesystem.open_output_stream(inner) as stream:  # one PUT: atomic on S3
                stream.write(data)
            return
        target = Path(location)
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=target.parent, delete=False, suffix=".tmp") as tmp:
            tmp.write(data)
        os.replace(tmp.name, target)


def market_features(items: tuple[Item, ...], bars: pd.DataFrame, timeframe: str, store_uri: str | None,
                    where: str, check: Any = None) -> tuple[RawFeatures, str, str]:
    """The feature matrix of `items` on `bars`: from this process's memory, the store, or computed (then stored).
    `check(raw)` runs before anything is stored, so a refused matrix is never written. Returns the matrix, where
    it came from (memory, cache, computed) and its key."""
    what = (f"file of an asset: or series: block of {where} "
            "(relative paths resolve against the experiment file's folder)")
    digests = {source: file_digest(source, what) for source in file_sources(items)}
    key = feature_key(items, bars_digest(bars), timeframe, digests)
    store = FeatureStore(store_uri) if store_uri else None
    if key in _memory:
        raw, origin = _memory[key], "memory"
    else:
        raw = store.get(key) if store else None
        origin = "cache"
        if raw is None:
            raw, origin = build_raw(items, bars, timeframe, where), "computed"
    if check is not None:
        check(raw)
    if store and origin != "cache" and (store_uri, key) not in _stored and not store.has(key):
        store.put(key, raw)  # computed here, or known from another store of this process
    if store:
        _stored.add((store_uri, key))
    _memory[key] = raw
    return raw, origin, key


def bars_digest(bars: pd.DataFrame) -> str:
    """What names bars in caches and ledgers: their file's bytes' digest (load_bars keeps it), or for bars that come
    from no file (a synthetic market) a digest of their content."""
    return bars.attrs.get("digest") or digest_of(pd.util.hash_pandas_object(bars, index=True).to_numpy().tobytes())


def file_digest(source: str, what: str) -> str:
    """The digest of a file's bytes; a local file is read once per process while its size and time stay the same."""
    if is_uri(source):
        return digest_of(read_bytes(source, what))
    try:
        stat = Path(source).stat()
    except OSError:
        return digest_of(read_bytes(source, what))  # says what is wrong with it
    return _local_digest(source, stat.st_size, stat.st_mtime_ns, what)


@functools.lru_cache(maxsize=64)
def _local_digest(source: str, size: int, mtime_ns: int, what: str) -> str:
    return digest_of(read_bytes(source, what))
