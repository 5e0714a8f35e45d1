"""reap_orphans ends what a SIGKILLed driver's local Ray left behind, and leaves a live Ray alone.

Two drivers each start their own local Ray with the dashboard, in their own short temp folder (Unix socket
paths are limited to ~107 characters). One is SIGKILLed: its gcs_server and raylet die, its
`ray::DashboardAgent` and `ray::RuntimeEnvAgent` stay. The other keeps running while reap_orphans runs.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from experiments.plan.ray_leftovers import reap_orphans

pytest.importorskip("ray")


AGENTS = {"ray::DashboardAgent", "ray::RuntimeEnvAgent"}
DRIVER = """
import sys, time, ray
ray.init(address="local", num_cpus=1, include_dashboard=True, dashboard_host="127.0.0.1", logging_level="ERROR",
         log_to_driver=False, _temp_dir=sys.argv[1])

@ray.remote
def sleeper():
    time.sleep(600)

ref = sleeper.remote()
print("READY", flush=True)
sys.stdin.read()  # until the test closes stdin; then exit, and atexit shuts Ray down
"""


def _start_driver(temp_dir: str) -> subprocess.Popen[str]:
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    return subprocess.Popen([sys.executable, "-c", DRIVER, temp_dir], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True, env=env)


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _procs_of(temp_dir: str) -> list[psutil.Process]:
    """This user's running processes naming `temp_dir` in their arguments or open files (a Ray it started)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status", "uids"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE or proc.info["uids"].real != os.getuid():
                continue
            if any(temp_dir in arg for arg in proc.info["cmdline"] or []) or any(
                f.path.startswith(temp_dir) for f in proc.open_files()
            ):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def _titles(procs: list[psutil.Process]) -> set[str]:
    """The process titles (`ray::DashboardAgent`) and names (`raylet`) of `procs`."""
    titles = set()
    for proc in procs:
        try:
            titles.update({proc.name(), (proc.cmdline() or [""])[0]})
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return titles


def _wait_for(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.2)


def _session_name(temp_dir: str) -> str:
    return next(path.name for path in Path(temp_dir).glob("session_2*"))


def test_reaps_a_killed_drivers_leftovers_and_spares_a_live_ray() -> None:
    dead_dir = tempfile.mkdtemp(prefix="rl", dir="/tmp")
    live_dir = tempfile.mkdtemp(prefix="rl", dir="/tmp")
    drivers: list[subprocess.Popen[str]] = []
    try:
        drivers.append(doomed := _start_driver(dead_dir))
        drivers.append(live := _start_driver(live_dir))
        _wait_for(lambda: AGENTS <= _titles(_procs_of(dead_dir)) and AGENTS <= _titles(_procs_of(live_dir)), 60,
                  "both Rays' agents")

        doomed.send_signal(signal.SIGKILL)
        doomed.wait(10)
        _wait_for(lambda: not {"gcs_server", "raylet"} & _titles(_procs_of(dead_dir)), 15,
                  "the killed driver's gcs_server and raylet to die")
        leftovers = _procs_of(dead_dir)
        assert AGENTS <= _titles(leftovers), "the killed driver's agents were expected to outlive it"
        live_procs = _procs_of(live_dir)
        assert {"gcs_server", "raylet"} | AGENTS <= _titles(live_procs)

        started = time.monotonic()
        reaped = reap_orphans()
        print(f"reap_orphans: {time.monotonic() - started:.2f} s -> {reaped}")

        assert len([line for line in reaped if _session_name(dead_dir) in line]) == 1, reaped
        assert not [proc for proc in leftovers if _running(proc)]
        assert live.poll() is None
        assert all(_running(proc) for proc in live_procs), "a process of the live Ray was ended"
        assert not [line for line in reaped if _session_name(live_dir) in line]
    finally:
        for driver in drivers:
            driver.stdin.close()  # a live driver exits cleanly: ray.shutdown at exit
        for driver in drivers:
            try:
                driver.wait(20)
            except subprocess.TimeoutExpired:
                driver.kill()
        for temp_dir in (dead_dir, live_dir):
            for proc in _procs_of(temp_dir):
                try:
                    proc.kill()
                except psutil.NoSuchProcess:
                    pass
            shutil.rmtree(temp_dir, ignore_errors=True)
