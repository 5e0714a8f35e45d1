"""Which Ray a run uses, decided before `ray.init`, so a dead cluster is one line instead of a hang.

`ray.init()` without an address joins the cluster named in Ray's "current cluster" file, which `ray start`
writes and only `ray stop` removes. After a cluster was stopped any other way, `ray.init()` retries that
dead address with GCS timeout warnings for minutes. So:
- no --address and no RAY_ADDRESS: a live `ray start` cluster on this machine is joined, and we say so;
  a stale address is ignored, and we say so; otherwise a local Ray is started (`address="local"`);
- --address / RAY_ADDRESS (`host:port`, `ray://host:port`, `auto`, or `local`): the cluster must answer a
  TCP connect within seconds, else one line and exit 2.
"""
from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from envs.errors import InputError

LOCAL = "local"
AUTO = "auto"
CONNECT_TIMEOUT_S = 3.0
START_HINT = "start it with `ray start --head`, or drop --address (and unset RAY_ADDRESS) to run on a local Ray"


@dataclass(frozen=True)
class RayTarget:
    """`address` for ray.init ("local": start our own Ray) and what to tell the user about the choice."""

    address: str
    note: str | None = None

    @property
    def starts_local(self) -> bool:
        return self.address == LOCAL


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


def resolve_ray_target(cli_address: str | None, environ: Mapping[str, str], leftover: Path) -> RayTarget:
    """The Ray to use for --address `cli_address` (else RAY_ADDRESS), checked to be alive."""
    if cli_address:
        address, source = cli_address, "--address"
    elif environ.get("RAY_ADDRESS"):
        address, source = environ["RAY_ADDRESS"], "RAY_ADDRESS"
    else:
        return _default_target(leftover)
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
        reason = unreachable(recorded)
        if reason:
            raise InputError(f"{source} auto: the Ray cluster at {recorded} (recorded in {leftover}) does not answer "
                             f"({reason}); it was stopped without `ray stop`: {START_HINT}")
        return RayTarget(recorded, f"joined the Ray cluster at {recorded} (--address auto)")
    reason = unreachable(address)
    if reason:
        raise InputError(f"{source} {address}: no Ray cluster answers there ({reason}): {START_HINT}")
    return RayTarget(address, f"joined the Ray cluster at {address} ({source})")


def _default_target(leftover: Path) -> RayTarget:
    recorded = recorded_address(leftover)
    if not recorded:
        return RayTarget(LOCAL)
    if unreachable(recorded, timeout=1.0):
        return RayTarget(LOCAL, f"ignored {leftover}: it names {recorded}, a Ray cluster that no longer runs "
                                "(`ray stop` removes the file); starting a local Ray")
    return RayTarget(recorded, f"joined the Ray cluster started with `ray start` at {recorded} (found in "
                               f"{leftover}); pass --address local to start a separate local Ray instead")
