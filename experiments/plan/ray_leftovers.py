"""End the Ray processes a dead local Ray left behind, so they stop holding ports and memory.

When a driver that started its own Ray (`ray.init(address="local", include_dashboard=True)`) is SIGKILLed,
gcs_server, the raylet and the workers die with it, but `ray::DashboardAgent` and `ray::RuntimeEnvAgent`
survive, reparented to init, listening on their ports for minutes. Their command line is only that title, so
the Ray session they belong to is read from the files they hold open (`.../session_<date>_<time>_<us>_<pid>/
logs/...`); the other Ray processes name it in their arguments (`--session-dir=`, `--log_dir=`, ...).

A session is dead when neither its gcs_server nor its raylet runs (any user's: a worker node of a multi-node
cluster has a raylet but no gcs_server). Only the current user's processes of dead sessions are ended; a live
`ray start` cluster or another run's live Ray keeps its gcs_server and raylet, and is never touched.
"""
from __future__ import annotations

import os
import re
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import PurePath

import psutil

TERM_WAIT_S = 3.0
KILL_WAIT_S = 1.0
POLL_S = 0.05
SESSION_RE = re.compile(r"(/[^\s=:]*?/session_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_\d+_\d+)(?=/|$)")
HEADS = frozenset({"gcs_server", "raylet"})
TITLE_PREFIXES = ("ray::", "ray-dashboard-")
RAY_SCRIPT_RE = re.compile(r"[/\\]ray[/\\].*\.py$")
GONE = (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess)


def _session_in(texts: Iterable[str]) -> str | None:
    """The name of the first session folder in `texts` (arguments or open file paths).

    Names, not paths: an open file's path is resolved (macOS's /tmp is /private/tmp) while arguments keep the
    path as given, and a session's name (start time and pid) is unique on a machine."""
    for text in texts:
        match = SESSION_RE.search(text)
        if match:
            return PurePath(match.group(1)).name
    return None


def _open_paths(proc: psutil.Process) -> Iterator[str]:
    """What `proc` holds open. On Linux read from /proc, which keeps deleted files (`... (deleted)`): a session
    folder removed with its temp folder still names the session; psutil's open_files leaves them out."""
    fd_dir = f"/proc/{proc.pid}/fd"
    if not os.path.isdir(fd_dir):
        yield from (f.path for f in proc.open_files())
        return
    for fd in os.listdir(fd_dir):
        try:
            yield os.readlink(f"{fd_dir}/{fd}")
        except OSError:  # closed meanwhile
            continue


def _protected_pids() -> set[int]:
    """This process and its ancestors, which are never ended."""
    pids = {os.getpid()}
    try:
        pids.update(parent.pid for parent in psutil.Process().parents())
    except GONE:
        pass
    return pids


def _is_ray_candidate(name: str, cmdline: list[str], session: str | None) -> bool:
    """Ray's own processes: retitled workers and agents, the daemons, and Ray's python helpers of a session."""
    if name in HEADS or (cmdline and cmdline[0].startswith(TITLE_PREFIXES)):
        return True
    return session is not None and any(RAY_SCRIPT_RE.search(arg) for arg in cmdline)


def _scan() -> tuple[set[str], dict[str, list[psutil.Process]], bool]:
    """(live session names, this user's Ray processes by session name, whether every gcs_server/raylet was
    placed in a session)."""
    uid = os.getuid()
    protected = _protected_pids()
    live: set[str] = set()
    by_session: dict[str, list[psutil.Process]] = defaultdict(list)
    heads_placed = True
    for proc in psutil.process_iter(["name", "cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:  # already dead: a zombie gcs_server keeps nothing alive
                continue
            name = proc.info["name"] or ""
            cmdline = proc.info["cmdline"] or []
            session = _session_in(cmdline)
            if not _is_ray_candidate(name, cmdline, session):
                continue
            if name in HEADS:
                if session is None:
                    heads_placed = False
                else:
                    live.add(session)
                continue
            if proc.pid in protected or proc.uids().real != uid:
                continue
            session = session or _session_in(_open_paths(proc))
            if session is not None:
                by_session[session].append(proc)
        except (*GONE, OSError):  # OSError: its /proc folder went away
            continue
    return live, by_session, heads_placed


def _running(proc: psutil.Process) -> bool:
    """Whether `proc` still runs; a zombie has ended (its parent, init in a container, may never reap it)."""
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except GONE:
        return False


def _wait(procs: list[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    """Up to `timeout_s` for `procs` to end; those still running."""
    deadline = time.monotonic() + timeout_s
    alive = [proc for proc in procs if _running(proc)]
    while alive and time.monotonic() < deadline:
        time.sleep(POLL_S)
        alive = [proc for proc in alive if _running(proc)]
    return alive


def _end(procs: list[psutil.Process]) -> None:
    """SIGTERM, up to TERM_WAIT_S for them to end, then SIGKILL whatever is left."""
    for proc in procs:
        try:
            proc.terminate()
        except GONE:
            pass
    for proc in _wait(procs, TERM_WAIT_S):
        try:
            proc.kill()
        except GONE:
            pass
    _wait(procs, KILL_WAIT_S)


def _dead_sessions() -> Iterator[tuple[str, list[psutil.Process]]]:
    """Each dead session with this user's processes left of it."""
    live, by_session, heads_placed = _scan()
    if not heads_placed:  # a gcs_server or raylet of unknown session: any of these sessions may be alive
        return
    for session, procs in by_session.items():
        if session not in live:
            yield session, procs


def reap_orphans() -> list[str]:
    """End the current user's processes of dead local Ray sessions; one line per session reaped. Never raises."""
    try:
        dead = list(_dead_sessions())
        _end([proc for _, procs in dead for proc in procs])
    except Exception:  # noqa: BLE001 - a best-effort cleanup must not fail the run that calls it
        return []
    return [
        f"{len(procs)} Ray process{'es' if len(procs) > 1 else ''} of {session} "
        f"(its gcs_server and raylet are gone)"
        for session, procs in dead
    ]
