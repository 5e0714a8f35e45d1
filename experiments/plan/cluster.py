"""Which Ray a run uses, decided before `ray.init`, so a dead or foreign cluster is one line instead of a hang.

`ray.init()` without an address joins the cluster named in Ray's "current cluster" file, which `ray start`
writes and only `ray stop` removes. After a cluster was stopped any other way, `ray.init()` retries that
dead address with GCS timeout warnings for minutes; on a shared machine the file (under /tmp/ray, world-writable)
may also be another user's. A TCP connect is not enough to tell a live GCS: the port of a cluster that is
stopping still accepts, and `ray.init` against a port that accepts and closes retried for over 150 s (Ray 2.60).
So a GCS must answer a request: the session name, what `ray.init` asks it first, with the token `ray.init`
would send (this user's Ray token only where Ray sends it: RAY_AUTH_MODE=token, or a cluster found on this
machine; Ray never sends it unasked to an address someone typed).
- no --address and no RAY_ADDRESS: a `ray start` cluster on this machine is joined only when the file and the
  session folder its GCS names belong to this OS user and the GCS answers; otherwise a local Ray is started
  (`address="local"`), and we say why;
- --address / RAY_ADDRESS (`host:port`, `ray://host:port`, `auto`, or `local`): the cluster must answer a
  TCP connect within seconds, and a GCS address (not a `ray://` client one) a request too, else one line and
  exit 2.
"""
from __future__ import annotations

import os
import socket
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from envs.errors import InputError

LOCAL = "local"
AUTO = "auto"
CONNECT_TIMEOUT_S = 3.0
REQUEST_TIMEOUT_S = 3.0  # a live GCS answers in milliseconds (25 ms measured on a loaded 2-core machine)
START_HINT = "start it with `ray start --head`, or drop --address (and unset RAY_ADDRESS) to run on a local Ray"
SESSION_KEY, SESSION_NAMESPACE = b"session_name", b"session"  # where Ray's GCS keeps its session's name


class NoAnswer(Exception):
    """A GCS did not answer a request; the message says how, for the user's line."""


Ask = Callable[[str, float, bool], str]  # (GCS address, timeout in s, send this user's token) -> its session name


@dataclass(frozen=True)
class RayTarget:
    """`address` for ray.init ("local": start our own Ray) and what to tell the user about the choice."""

    address: str
    note: str | None = None
    token: bool = False  # the driver sends this user's Ray token (Ray's rule; `ray.init` gets an explicit address)

    @property
    def starts_local(self) -> bool:
        return self.address == LOCAL

    @property
    def joins_gcs(self) -> bool:
        """Whether the run joins a cluster's GCS directly (not our own Ray, not through a `ray://` client)."""
        return not self.starts_local and not self.address.startswith("ray://")


def leftover_address_file() -> Path:
    """Where `ray start` records the cluster it started (Ray's own helper, so RAY_TMPDIR is honoured)."""
    from ray._common.utils import get_ray_address_file

    return Path(get_ray_address_file(None))


def recorded_address(leftover: Path) -> str:
    """The address `ray start` recorded in `leftover`, or "" when there is none."""
    return leftover.read_text().strip() if leftover.exists() else ""


def unreachable(address: str, timeout: float = CONNECT_TIMEOUT_S) -> str | None:
    """Why nothing answers at `host:port` (a GCS or Ray Client port), or None when something does."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return "not an address of the form HOST:PORT"
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return None
    except socket.timeout:
        return f"no answer within {timeout:g} s"
    except OSError as error:
        return error.strerror or type(error).__name__


def ask_gcs(address: str, timeout: float = REQUEST_TIMEOUT_S, token: bool = False) -> str:
    """The session name the GCS at `address` answers within `timeout` s, over Ray's own gRPC service, with this
    user's Ray token when `token`; raises NoAnswer. The call has a deadline, so it cannot hang the way
    `ray.init`'s connect loop does."""
    import grpc
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    request = gcs_service_pb2.InternalKVGetRequest(key=SESSION_KEY, namespace=SESSION_NAMESPACE)
    with grpc.insecure_channel(address) as channel:
        try:
            reply = gcs_service_pb2_grpc.InternalKVGcsServiceStub(channel).InternalKVGet(
                request, timeout=timeout, metadata=_token_metadata() if token else ())
        except grpc.RpcError as error:
            raise NoAnswer(_rpc_failure(error, timeout, token)) from None
    if reply.status.code != 0 or not reply.value:
        raise NoAnswer(f"it answered without a session name: {reply.status.message or 'empty'}")
    return reply.value.decode(errors="replace")


def _token_metadata() -> tuple[tuple[str, str], ...]:
    """This user's Ray token as gRPC metadata when there is one (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or
    ~/.ray/auth_token), as `ray.init` sends it; a GCS without token auth ignores the header. Ray's loader caches
    what it read; the cache is cleared, so a local Ray started next sees the token it may create."""
    from ray._raylet import AuthenticationTokenLoader
    from ray.exceptions import AuthenticationError

    loader = AuthenticationTokenLoader.instance()
    try:
        return tuple(loader.get_token_for_http_header(ignore_auth_mode=True).items())
    except AuthenticationError:
        return ()  # an unreadable token: the request goes without one, and a token-protected GCS says so
    finally:
        loader.reset_cache()


def _rpc_failure(error: Exception, timeout: float, token: bool) -> str:
    """A failed gRPC call in a few words: a deadline, a token refused or missing, or gRPC's code and details."""
    import grpc

    code = error.code() if isinstance(error, grpc.Call) else None
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return f"no answer within {timeout:g} s"
    if code == grpc.StatusCode.UNAUTHENTICATED and token:
        return ("it refused this user's Ray token (UNAUTHENTICATED): set RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH to "
                "the cluster's")
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return "it asks for a Ray token (UNAUTHENTICATED): set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN to the cluster's"
    details = " ".join(str(error.details() if isinstance(error, grpc.Call) else error).split())
    return f"{code.name if code else type(error).__name__}: {details}"


def sends_token(environ: Mapping[str, str], found: bool) -> bool:
    """Whether `ray.init` sends this user's Ray token: with RAY_AUTH_MODE=token, or, for a cluster found on this
    machine (`ray.init()` without an address), when RAY_AUTH_MODE is unset and there is a token."""
    mode = environ.get("RAY_AUTH_MODE", "").lower()
    return mode == "token" or (found and not mode and _has_token())


def _has_token() -> bool:
    """Whether this user has a Ray token (Ray's loader, its cache cleared after, as in `_token_metadata`)."""
    from ray._raylet import AuthenticationTokenLoader
    from ray.exceptions import AuthenticationError

    loader = AuthenticationTokenLoader.instance()
    try:
        return bool(loader.has_token(ignore_auth_mode=True))
    except AuthenticationError:
        return False
    finally:
        loader.reset_cache()


def gcs_silent(address: str, token: bool, ask: Ask = ask_gcs) -> str | None:
    """Why the GCS at `address`, whose port accepts a connection, does not answer a request (sent with this
    user's token when `token`), or None when it does."""
    try:
        ask(address, REQUEST_TIMEOUT_S, token)
    except NoAnswer as silent:
        return f"the port accepts a connection, but no Ray GCS answers a request there: {silent}"
    return None


def resolve_ray_target(cli_address: str | None, environ: Mapping[str, str], leftover: Path, ask: Ask = ask_gcs,
                       uid: int | None = None) -> RayTarget:
    """The Ray to use for --address `cli_address` (else RAY_ADDRESS), checked to be alive. `ask` is the GCS
    request and `uid` the OS user a found `ray start` cluster must belong to (this process's by default)."""
    if cli_address:
        address, source = cli_address, "--address"
    elif environ.get("RAY_ADDRESS"):
        address, source = environ["RAY_ADDRESS"], "RAY_ADDRESS"
    else:
        return _default_target(leftover, ask, os.getuid() if uid is None else uid, environ)
    if address == LOCAL:
        return RayTarget(LOCAL)
    if address.startswith(("http://", "https://")):
        raise InputError(f"{source} {address}: that is a dashboard or job-submission URL: pass the cluster's "
                         "address as HOST:PORT (the GCS port `ray start --head` prints, 6379 by default)")
    if address == AUTO:
        recorded = recorded_address(leftover)
        if not recorded:
            raise InputError(f"{source} auto: no Ray cluster was started on this machine with `ray start` "
                             f"(no {leftover}): {START_HINT}")
        token = sends_token(environ, found=True)
        reason = unreachable(recorded)
        if reason:
            raise InputError(f"{source} auto: the Ray cluster at {recorded} (recorded in {leftover}) does not answer "
                             f"({reason}); it was stopped without `ray stop`: {START_HINT}")
        reason = gcs_silent(recorded, token, ask)
        if reason:
            raise InputError(f"{source} auto: the Ray cluster at {recorded} (recorded in {leftover}) does not answer "
                             f"a request ({reason}): {START_HINT}")
        return RayTarget(recorded, f"joined the Ray cluster at {recorded} (--address auto)", token)
    token = sends_token(environ, found=False)
    reason = unreachable(address) or (None if address.startswith("ray://") else gcs_silent(address, token, ask))
    if reason:
        raise InputError(f"{source} {address}: no Ray cluster answers there ({reason}): {START_HINT}")
    return RayTarget(address, f"joined the Ray cluster at {address} ({source})", token)


def _default_target(leftover: Path, ask: Ask, uid: int, environ: Mapping[str, str]) -> RayTarget:
    """A `ray start` cluster found in `leftover` when it is this user's and alive, else a local Ray and why."""
    try:
        owner = leftover.stat().st_uid
    except FileNotFoundError:
        return RayTarget(LOCAL)
    except OSError as error:
        return _ignored(leftover, f"it cannot be read ({error.strerror})")
    if owner != uid:  # checked first: nothing, this user's token included, is sent to another user's cluster
        return _ignored(leftover, f"it belongs to another user (uid {owner})")
    recorded = recorded_address(leftover)
    if not recorded:
        return RayTarget(LOCAL)
    token = sends_token(environ, found=True)
    reason = _why_not_join(leftover, recorded, ask, uid, token)
    if reason:
        return _ignored(leftover, reason)
    return RayTarget(recorded, f"joined the Ray cluster started with `ray start` at {recorded} (found in "
                               f"{leftover}); pass --address local to start a separate local Ray instead", token)


def _why_not_join(leftover: Path, recorded: str, ask: Ask, uid: int, token: bool) -> str | None:
    """Why this user's current-cluster file names no cluster to join: stopped, silent, or its session folder
    (under the file's folder, named by the GCS itself; `session_latest` is only the newest session anyone
    started there) missing or another user's. None when it is one to join."""
    if unreachable(recorded, timeout=1.0):
        return f"it names {recorded}, a Ray cluster that no longer runs (`ray stop` removes the file)"
    try:
        session = ask(recorded, REQUEST_TIMEOUT_S, token)
    except NoAnswer as silent:
        return f"its GCS at {recorded} does not answer a request ({silent})"
    folder = leftover.parent / session
    if Path(session).name != session or not session.startswith("session_"):
        return f"its GCS at {recorded} names no session folder ({session!r})"
    try:
        info = folder.lstat()
    except OSError:
        return f"its GCS at {recorded} names a session that is not here ({folder}): not the cluster recorded here"
    if info.st_uid != uid:
        return f"the session folder of its GCS at {recorded}, {folder}, belongs to another user (uid {info.st_uid})"
    if not stat.S_ISDIR(info.st_mode):
        return f"the session folder of its GCS at {recorded}, {folder}, is not a folder"
    return None


def _ignored(leftover: Path, reason: str) -> RayTarget:
    """A local Ray, with the one line that says why the cluster in `leftover` is not joined."""
    return RayTarget(LOCAL, f"ignored {leftover}: {reason}; starting a local Ray")
