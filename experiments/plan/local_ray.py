"""The Ray a run uses: a cluster it joins, or a local Ray that keeps to this machine (loopback sockets, no
metrics page without a login, private logs, no leftovers of a dead run), and its dashboard's address.

Measured with Ray 2.60 on Linux (`ss -ltnp`; docs/faults.md has the table):
- Ray binds gcs, raylet, workers and its agents to the node address it resolves, and it resolves the machine's
  interface address even for `_node_ip_address="127.0.0.1"` (`services.resolve_ip_for_localhost`); gRPC servers
  listen on all interfaces. Off "cluster mode" (`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`, the mode Ray itself uses on
  macOS and Windows) the node address stays 127.0.0.1 and every listener binds loopback.
- Three Prometheus pages answer without the token: the dashboard's (port 44227) and the autoscaler monitor's
  (44217), which Ray starts unconditionally, and the dashboard agent's exporter. Metrics collection off stops the
  exporter; a port that cannot be bound stops the other two (Ray logs the failure to its session log and goes on).
  `--ray-metrics` keeps all three, on loopback.
- Ray's session folder (logs included) is created world-readable under a world-writable /tmp/ray.

A cluster we join is not ours to change: none of this applies to it.
"""
from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, MutableMapping

from rich.markup import escape

from envs.errors import InputError, RunFault
from experiments.plan import numerics
from experiments.plan.cluster import LOCAL, RayTarget
from experiments.plan.ports import port_is_free
from experiments.plan.ray_leftovers import reap_orphans
from experiments.shell import tool_command

DEFAULT_DASHBOARD_PORT = 8265  # Ray's first choice, and the port the docs name

LOOPBACK = "127.0.0.1"
LOOPBACK_ONLY = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
NO_METRICS = {
    "RAY_enable_metrics_collection": "0",  # Ray's system config from the environment: no exporter in the agent
    "DASHBOARD_METRIC_PORT": "-1",          # the dashboard head's Prometheus server fails to start
    "AUTOSCALER_METRIC_PORT": "-1",         # so does the autoscaler monitor's
}


def keep_to_this_machine(environ: MutableMapping[str, str], metrics: bool) -> None:
    """Set what a local Ray reads when it starts (its processes inherit the driver's environment), before
    `ray.init`. Ray's own constant is updated too when Ray was imported before the variable was set."""
    environ.update(LOOPBACK_ONLY)
    if not metrics:
        environ.update(NO_METRICS)
    import ray._private.ray_constants as ray_constants

    ray_constants.ENABLE_RAY_CLUSTER = False


def make_private(session_dir: str | None) -> None:
    """Ray's session folder readable by its owner only: its logs hold the runtime environments of every job."""
    if session_dir and Path(session_dir).is_dir():
        os.chmod(session_dir, stat.S_IRWXU)


@dataclass(frozen=True)
class LocalRay:
    """How a Ray we start here shows itself: its dashboard (on this machine only unless asked) and its metrics."""

    dashboard: bool = True
    dashboard_host: str = LOOPBACK
    dashboard_port: int | None = None
    ray_metrics: bool = False


def start_ray(target: RayTarget, local: LocalRay, log: Callable[[str], None]) -> bool:
    """Join the cluster `target` names, or start a local Ray configured by `local`; returns True when we started
    it. What it says goes to `log`, lines of rich markup (the run passes `say(on_event, highlight=False)`)."""
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if target.note:
        log(escape(target.note))
    registry_follows_the_next_job()
    if not target.starts_local:
        if target.token:
            send_token()
        # Workers on a cluster we join do not inherit our environment: --cross-cpu's pins travel with the job.
        pins = {"env_vars": numerics.pinned_environment()} if numerics.is_pinned() else None
        context = ray.init(address=target.address, logging_level="ERROR", log_to_driver=False, runtime_env=pins)
        print_dashboard(context.dashboard_url, log)
        return False
    if local.dashboard_host != LOOPBACK:
        log(f"[yellow]warning: the Ray dashboard listens on {local.dashboard_host}: anyone who can reach "
            "this machine can see and control the cluster[/yellow]")
    port = local.dashboard_port
    if port is not None and not port_is_free(local.dashboard_host, port):
        raise InputError(f"--dashboard-port {port}: another process listens on {local.dashboard_host}:{port}: pick "
                         "another port, or leave --dashboard-port out to take the next free one")
    for line in reap_orphans():
        log(escape(f"stopped {line}"))
    metrics = local.ray_metrics
    keep_to_this_machine(os.environ, metrics)
    if metrics:
        log("[yellow]warning: --ray-metrics: Ray's Prometheus pages on 127.0.0.1 answer without a login: "
            "anyone on this machine can read them[/yellow]")
    # No port: Ray tries 8265 and up to 50 ports after it, so a second run beside the first takes the next free one
    # and prints the URL it really got. An explicit port is checked by Ray even with --no-dashboard (its dashboard
    # process starts for the state API), which is how a second run used to die on the first one's 8265.
    try:
        context = ray.init(address=LOCAL, include_dashboard=local.dashboard, dashboard_host=local.dashboard_host,
                           dashboard_port=port, logging_level="ERROR", log_to_driver=False)
    except Exception as error:  # noqa: BLE001 - Ray raises a bare Exception for this one; others keep theirs
        if not is_startup_timeout(error):
            raise
        ray.shutdown()  # the processes that did start (GCS, dashboard) go with the failed start
        raise RunFault(startup_timeout_line()) from None
    make_private(context.address_info.get("session_dir"))
    print_dashboard(context.dashboard_url, log, moved_note(context.dashboard_url, port))
    return True


def registry_follows_the_next_job() -> None:
    """Tune's registry (where each run registers its env for the trials) keys its entries by the job id it read
    first in this process, and keeps it (Ray 2.60's `ray.tune.registry._Registry.prefix`). A second run in the same
    process on a cluster that outlived the first (a notebook's second `api.run` against a cluster, a test session's
    shared Ray) is a new job: its trials looked under the new id, found no env, and died building `trading/Spot-v0`
    as a bare Gymnasium id. Called before `ray.init`, so the registry reads the id of the job about to start."""
    from ray.tune.registry import _global_registry

    _global_registry._prefix = None


def is_startup_timeout(error: Exception) -> bool:
    """Ray 2.60's local start gives up when its raylet has not registered within 30 s (`ray._private.node`): on
    a machine whose cores are all busy, not a bug of ours or the user's."""
    return "timed out during startup" in str(error)


def startup_timeout_line() -> str:
    """The one line for a local Ray that did not start in time, with the load that explains it when known."""
    busy = ""
    if hasattr(os, "getloadavg"):
        busy = f" (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
    return (f"the local Ray did not start within Ray's 30 s{busy}: its processes did not get the CPU they needed; "
            "run again when the machine is less busy, or join a running Ray with --address")


def send_token() -> None:
    """Token auth on for this driver when this user has a token and RAY_AUTH_MODE is unset, as `ray.init()` does
    for a cluster it finds itself: we pass it the address we checked, for which Ray would not. (Measured: with
    ~/.ray/auth_token present, a `ray start` cluster has token auth, and `ray.init(address=...)` retried
    UNAUTHENTICATED and failed.) Ray's warning that token auth is on is not printed: the cluster chose it."""
    from ray._private.authentication import authentication_token_setup

    logger = logging.getLogger(authentication_token_setup.__name__)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        authentication_token_setup.maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
    finally:
        logger.setLevel(level)


def moved_note(url: str | None, asked_port: int | None) -> str:
    """Why the URL is not the documented :8265: a second run beside the first takes the next free port."""
    if asked_port is not None or not url or url.endswith(f":{DEFAULT_DASHBOARD_PORT}"):
        return ""
    return f" ({DEFAULT_DASHBOARD_PORT} is taken, by another run here)"


def print_dashboard(url: str | None, log: Callable[[str], None], note: str = "") -> None:
    """The dashboard's URL and, when Ray's token authentication is on (the default since 2.59), how to log in.
    The token itself is never printed: it is the cluster's password."""
    if not url:
        return
    from ray._private.authentication.authentication_utils import is_token_auth_enabled

    log(escape(f"Ray dashboard: http://{url}{note}"))
    if is_token_auth_enabled():
        log(escape(f"  it asks for a token: paste what `{tool_command('ray')} get-auth-token` prints"))
