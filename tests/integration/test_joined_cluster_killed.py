"""A joined `ray start` cluster killed mid-run ends the driver in one line with exit 4 (docs/faults.md): a real
cluster on loopback, joined from a subprocess that runs the run's own check, watch and `start_ray`."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from experiments.plan.cluster import ask_gcs
from experiments.records.exits import ExitCode
from tests.conftest import REPO

# The smallest piece of a run that joins a cluster: the address check, the watch with the run's last words, and
# `start_ray`; then it waits on Ray, as Tune's loop does, where the main thread is stuck in Ray's C++.
DRIVER = """
import argparse, os, time
import ray
from rich.console import Console
from experiments.plan.cluster import leftover_address_file, resolve_ray_target
from experiments.plan.local_ray import LocalRay, start_ray
from experiments.sweep.faults import ClusterWatch

target = resolve_ray_target(None, os.environ, leftover_address_file())
watch = ClusterWatch(target, lambda line: print(f"error: {line}", flush=True))
watch.start()
start_ray(target, LocalRay(), Console(soft_wrap=True).print)
print("joined", flush=True)

@ray.remote(num_cpus=0)
def ping():
    return 1

while True:
    ray.get(ping.remote())
    time.sleep(0.2)
"""


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_head(env: dict[str, str], log: Path) -> subprocess.Popen:
    """A `ray start --head --block` on loopback in its own process group (every Ray process of it is in there);
    fixed default ports are replaced by free ones, so it does not clash with another Ray on this machine."""
    ray = Path(sys.executable).with_name("ray")
    return subprocess.Popen(
        [str(ray), "start", "--head", "--block", "--port", "0", "--node-ip-address", "127.0.0.1", "--num-cpus", "1",
         "--include-dashboard", "false", "--disable-usage-stats", "--ray-client-server-port", str(free_port()),
         "--dashboard-agent-listen-port", str(free_port()), "--metrics-export-port", str(free_port())],
        env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)


def wait_for(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.2)


def test_a_real_cluster_killed_mid_run_ends_the_driver_in_one_line_with_exit_4(tmp_path):
    """Measured before the watch: the driver printed Ray's `Failed to connect to GCS within 60 seconds ... The
    program will terminate` and exited 1, 60 s after the cluster was killed."""
    temp = Path(tempfile.mkdtemp(prefix="rq", dir="/tmp"))  # Ray's socket paths must stay under 108 bytes
    env = {**os.environ, "RAY_TMPDIR": str(temp), "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "PYTHONPATH": str(REPO)}
    env.pop("RAY_ADDRESS", None)
    head = start_head(env, tmp_path / "head.log")
    driver = None
    lines: list[str] = []
    try:
        recorded = temp / "ray" / "ray_current_cluster"
        wait_for(lambda: recorded.exists() and recorded.read_text().strip() or head.poll() is not None, 90,
                 "ray start")
        assert head.poll() is None, (tmp_path / "head.log").read_text()[-2000:]
        address = recorded.read_text().strip()
        assert ask_gcs(address, 3.0).startswith("session_")  # a real GCS answers the request
        driver = subprocess.Popen([sys.executable, "-c", DRIVER], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        reader = threading.Thread(target=lambda: lines.extend(driver.stdout), daemon=True)
        reader.start()
        wait_for(lambda: "joined\n" in lines or driver.poll() is not None, 60, "the driver joining")
        assert "joined\n" in lines, "".join(lines)
        os.killpg(head.pid, signal.SIGKILL)
        code = driver.wait(timeout=300)  # generous: the line and the exit code show it was the watch, not Ray
        reader.join(5)
    finally:
        for process in (driver, head):
            if process is not None and process.poll() is None:
                process.kill()
        try:
            os.killpg(head.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        shutil.rmtree(temp, ignore_errors=True)
    output = "".join(lines)
    assert code == ExitCode.FAULT, output
    assert [line for line in lines if line.startswith("error: ")] == [lines[-1]], output
    assert lines[-1].startswith(f"error: the Ray cluster at {address} went away mid-run (its GCS has not answered "
                                "for 1"), output
    assert "Failed to connect to GCS" not in output
    assert lines[0].startswith("joined the Ray cluster started with `ray start`")
