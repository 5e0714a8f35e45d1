"""Where a sweep keeps what must outlive one process and one machine: Tune's results and checkpoints, and
the resume file. A local folder (the default: `--output`) or `s3://bucket/prefix` on AWS S3 or an
S3-compatible store (MinIO, Ceph, R2), through pyarrow's filesystems.

On a cluster the storage must be shared: a trial on another node writes its checkpoints there, the driver
scores and registers them from there, and a retried trial restores from there.

Credentials are never part of a URI (it is printed, logged to MLflow and written to the resolved experiment):
pyarrow takes them from the standard AWS chain on every node (AWS_PROFILE and ~/.aws/credentials, the
AWS_* variables, an instance role). The endpoint of an S3-compatible store comes from `?endpoint_override=`
in the URI, else from the AWS SDK's AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL (which pyarrow itself ignores),
and is written into the URI we hand on, so every node talks to the same store.
"""
from __future__ import annotations

import os
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit

import pyarrow.fs as pafs

from envs.errors import InputError

STORAGE_ENV = "RLPLATFORM_STORAGE"
ENDPOINT_ENVS = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
URI_OPTIONS = ("endpoint_override", "region")  # what an s3:// URI may carry after '?'
CREDENTIAL_WORDS = ("key", "secret", "token", "password", "session")
# A reachability check answers within seconds: one attempt, short timeouts (Tune's own filesystem keeps
# pyarrow's defaults, which retry).
CHECK_TIMEOUTS = {"connect_timeout": 3.0, "request_timeout": 10.0}


# How long a sweep waits for its storage before the run ends with one line (experiments/sweep/faults.py): every S3 call
# is tried this many times with these timeouts. The environment variables change them.
S3_ATTEMPTS_ENV, S3_TIMEOUT_ENV = "RLPLATFORM_S3_ATTEMPTS", "RLPLATFORM_S3_TIMEOUT_S"
S3_ATTEMPTS, S3_TIMEOUT_S = 3, 20.0


def bounded_waits(environ: Mapping[str, str]) -> dict[str, Any]:
    """pyarrow's S3 retries and timeouts for a sweep's storage, from the environment or our defaults."""
    try:
        attempts = int(environ.get(S3_ATTEMPTS_ENV, S3_ATTEMPTS))
        timeout = float(environ.get(S3_TIMEOUT_ENV, S3_TIMEOUT_S))
    except ValueError:
        raise InputError(f"{S3_ATTEMPTS_ENV} / {S3_TIMEOUT_ENV}: give a whole number of attempts and seconds, e.g. "
                         f"{S3_ATTEMPTS_ENV}=3 {S3_TIMEOUT_ENV}=20") from None
    return {"connect_timeout": min(timeout, 5.0), "request_timeout": timeout,
            "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=max(attempts, 1))}


# The AWS variables Tune copies into every trial's runtime environment (ray.tune.execution.class_cache), which
# Ray's runtime-env agent then writes in plain text to its session log (runtime_env_agent.log).
CREDENTIAL_ENVS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")


def keep_credentials_out_of_ray(environ: Mapping[str, str], joins_cluster: bool, say: Callable[[str], None]) -> None:
    """Stop Tune from copying AWS credentials into trials' runtime environments, so Ray never logs them.

    A local Ray's workers inherit the driver's environment anyway. The nodes of a cluster we join take theirs
    from their own credential chain (instance role, ~/.aws/credentials); when the credentials are only in this
    shell, say so once."""
    from ray.tune.execution import class_cache

    class_cache.ENV_VARS_TO_PROPAGATE.difference_update(CREDENTIAL_ENVS)
    found = [name for name in CREDENTIAL_ENVS if environ.get(name)]
    if found and joins_cluster:
        say(f"note: {', '.join(found)} from this shell are not sent to the cluster's nodes (Ray would write them "
            "to its logs): nodes use their own credentials (instance role, AWS_PROFILE and ~/.aws/credentials; "
            "docs/storage.md)")


def is_s3(uri: str) -> bool:
    return uri.startswith("s3://")


@dataclass(frozen=True)
class S3Location:
    """An s3:// URI taken apart: bucket, key prefix and the options that choose the store."""

    bucket: str
    key: str
    options: dict[str, str]

    @property
    def uri(self) -> str:
        path = f"s3://{self.bucket}/{self.key}".rstrip("/")
        return f"{path}?{urlencode(self.options, safe=':/')}" if self.options else path

    def filesystem(self, check: bool = False) -> pafs.S3FileSystem:
        kwargs: dict[str, Any] = {}
        endpoint = self.options.get("endpoint_override")
        if endpoint:
            kwargs["endpoint_override"] = endpoint
            kwargs["scheme"] = "http" if endpoint.startswith("http://") else "https"
        if self.options.get("region"):
            kwargs["region"] = self.options["region"]
        if check:
            kwargs.update(CHECK_TIMEOUTS, retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=1))
        else:
            kwargs.update(bounded_waits(os.environ))
        return pafs.S3FileSystem(**kwargs)


def parse_s3(uri: str, where: str, environ: Mapping[str, str] = os.environ) -> S3Location:
    """`uri` checked (no credentials, known options) with the endpoint from the environment made explicit."""
    parts = urlsplit(uri)
    if parts.username or parts.password or "@" in parts.netloc:
        raise InputError(f"{where}: {parts.scheme}://…@{parts.hostname}: credentials do not belong in a storage URI "
                         "(it is printed and logged): use ~/.aws/credentials (AWS_PROFILE), an instance role, or "
                         "the AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY variables")
    if not parts.netloc:
        raise InputError(f"{where}: {uri!r} names no bucket: write s3://BUCKET/PREFIX")
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    for name in options:
        if any(word in name.lower() for word in CREDENTIAL_WORDS):
            raise InputError(f"{where}: '{name}' in the URI: credentials do not belong in a storage URI (it is "
                             "printed and logged): use ~/.aws/credentials (AWS_PROFILE) or an instance role")
        if name not in URI_OPTIONS:
            raise InputError(f"{where}: unknown option '{name}' in {parts.scheme}://{parts.netloc}{parts.path}: "
                             f"an s3:// URI takes {', '.join(URI_OPTIONS)}")
    if "endpoint_override" not in options:
        endpoint = next((environ[name] for name in ENDPOINT_ENVS if environ.get(name)), None)
        if endpoint:
            options["endpoint_override"] = endpoint
    return S3Location(parts.netloc, parts.path.strip("/"), options)


def with_explicit_endpoint(uri: str, where: str, environ: Mapping[str, str] = os.environ) -> str:
    """An s3:// URI (e.g. a data file) checked, with the environment's endpoint written in; others unchanged."""
    return parse_s3(uri, where, environ).uri if is_s3(uri) else uri


def explicit_endpoints(env_config: dict[str, Any], where: str, environ: Mapping[str, str] = os.environ) -> None:
    """Every s3:// value of an env config, at any depth (a data_path, an asset: file in a feature list), checked and
    given the environment's endpoint, in place: the env reads it on whatever node its trial runs, where that
    environment may differ."""
    for key, value in env_config.items():
        if isinstance(value, str) and is_s3(value):
            env_config[key] = with_explicit_endpoint(value, f"{where}.{key}", environ)
        for index, child in enumerate(value if isinstance(value, list) else [value]):
            if isinstance(child, dict):
                explicit_endpoints(child, f"{where}.{key}" + (f"[{index}]" if isinstance(value, list) else ""), environ)


@dataclass(frozen=True)
class Storage:
    """A storage root: `root` is a path inside `filesystem` (a local absolute path, or bucket/prefix)."""

    uri: str
    filesystem: pafs.FileSystem
    root: str
    source: str  # which setting chose it, for messages: --storage, the file's storage:, RLPLATFORM_STORAGE, --output
    location: S3Location | None = None

    @property
    def is_local(self) -> bool:
        return self.location is None

    def path(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *parts])

    def uri_of(self, *parts: str) -> str:
        """A folder under the root as a URI any node can open: a local path, or s3://bucket/key?endpoint_override=..."""
        if self.location is None:
            return self.path(*parts)
        key = "/".join([self.location.key.rstrip("/"), *parts]).strip("/")
        return S3Location(self.location.bucket, key, self.location.options).uri

    def display(self, path: str) -> str:
        """How a path inside the storage is shown and tagged: a local path, or s3://bucket/key."""
        return path if self.is_local else f"s3://{path}"

    def tune_filesystem(self) -> pafs.FileSystem | None:
        """What Tune's RunConfig gets as storage_filesystem (None: a local folder, Tune's own default)."""
        return None if self.is_local else self.filesystem

    def write_text(self, path: str, text: str) -> None:
        """Write a small file whole: readers see the old or the new content, never half of it."""
        if self.is_local:
            target = Path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=target.parent, delete=False, suffix=".tmp") as tmp:
                tmp.write(text)
            os.replace(tmp.name, target)
            return
        with self.filesystem.open_output_stream(path) as stream:  # one PUT: atomic on S3
            stream.write(text.encode())

    def read_text(self, path: str) -> str | None:
        if self.filesystem.get_file_info(path).type == pafs.FileType.NotFound:
            return None
        with self.filesystem.open_input_stream(path) as stream:
            return stream.read().decode()

    def list_files(self, folder: str, suffix: str = "") -> list[str]:
        """The paths of the files directly in `folder` whose names end with `suffix` ([] without the folder)."""
        selector = pafs.FileSelector(folder, allow_not_found=True)
        return sorted(info.path for info in self.filesystem.get_file_info(selector)
                      if info.type == pafs.FileType.File and info.path.endswith(suffix))

    def local_copy(self, path: str, cache: Path) -> Path:
        """A folder of the storage as a local folder: itself when local, else downloaded once under `cache`."""
        if self.is_local:
            return Path(path)
        target = cache / path.removeprefix(self.root).strip("/")
        if not target.exists():
            partial = target.with_name(target.name + f".partial-{uuid.uuid4().hex[:8]}")
            partial.mkdir(parents=True)
            pafs.copy_files(path, str(partial), source_filesystem=self.filesystem,
                            destination_filesystem=pafs.LocalFileSystem())
            partial.rename(target)
        return target


def resolve_storage(cli: str | None, in_file: str | None, output: Path, where: str,
                    environ: Mapping[str, str] = os.environ) -> Storage:
    """The storage of a run: --storage, else `storage:` in the experiment file, else RLPLATFORM_STORAGE,
    else the local --output folder."""
    if cli:
        uri, source = cli, "--storage"
    elif in_file:
        uri, source = in_file, f"{where}: storage"
    elif environ.get(STORAGE_ENV):
        uri, source = environ[STORAGE_ENV], STORAGE_ENV
    else:
        uri, source = str(output), "--output"
    if is_s3(uri):
        location = parse_s3(uri, source, environ)
        return Storage(location.uri, location.filesystem(), f"{location.bucket}/{location.key}".rstrip("/"), source,
                       location)
    if "://" in uri and not uri.startswith("file://"):
        raise InputError(f"{source}: {uri.split('://')[0]}:// storage is not supported: use a local folder or "
                         "s3://BUCKET/PREFIX (any S3-compatible store, with ?endpoint_override=http://HOST:PORT)")
    local = Path(uri.removeprefix("file://")).expanduser().resolve()
    return Storage(str(local), pafs.LocalFileSystem(), str(local), source)


def check_storage(storage: Storage) -> None:
    """Fail with one line, before any trial starts, when the storage cannot be written: unreachable
    endpoint, missing bucket, refused credentials. A probe object is written and deleted again."""
    if storage.is_local:
        return
    location = storage.location
    where = f"{storage.source} {storage.uri}"
    filesystem = location.filesystem(check=True)
    probe = storage.path(f".rlplatform-write-check-{uuid.uuid4().hex[:12]}")
    try:
        if filesystem.get_file_info(location.bucket).type == pafs.FileType.NotFound:
            raise InputError(f"{where}: bucket '{location.bucket}' does not exist: create it (aws s3 mb "
                             f"s3://{location.bucket}) or fix the name")
        with filesystem.open_output_stream(probe) as stream:
            stream.write(b"ok")
        filesystem.delete_file(probe)
    except OSError as error:
        raise InputError(f"{where}: {describe_s3_error(error, location)}") from None


def describe_s3_error(error: OSError, location: S3Location) -> str:
    """One line for an S3 failure, with the fix (pyarrow's message names the AWS error code)."""
    text = str(error)
    endpoint = location.options.get("endpoint_override", "AWS S3")
    if "NETWORK_CONNECTION" in text or "curlCode" in text:
        return (f"cannot reach {endpoint}: check the endpoint (?endpoint_override= or AWS_ENDPOINT_URL_S3) and "
                "that the store is running")
    if "ACCESS_DENIED" in text or "INVALID_ACCESS_KEY" in text or "SIGNATURE" in text.upper() or "403" in text:
        return (f"access denied to bucket '{location.bucket}': check the credentials (AWS_PROFILE, "
                "~/.aws/credentials or the instance role) and that they may write there")
    if "NO_SUCH_BUCKET" in text:
        return f"bucket '{location.bucket}' does not exist: create it or fix the name"
    return f"S3 error: {text.splitlines()[0][:200]}"

