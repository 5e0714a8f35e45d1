"""Two experiments started at once on one machine: the second takes the next free dashboard port and says so.

Each driver is its own process that starts its own local Ray through `experiments.plan.local_ray.start_ray`, as two
terminals running `python -m experiments.run` would; the first holds its Ray until the second has started.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import REPO

DRIVER = """
import argparse, io, sys, time
from pathlib import Path
from rich.console import Console
from envs.errors import InputError
from experiments.plan.cluster import LOCAL, RayTarget
from experiments.plan.local_ray import LocalRay, start_ray
out = io.StringIO()
args = LocalRay(dashboard=sys.argv[1] != "off", dashboard_port=int(sys.argv[2]) if sys.argv[2] != "-" else None)
try:
    start_ray(RayTarget(LOCAL), args, Console(file=out, width=300).print)
except InputError as error:
    print("REFUSED", error, flush=True)
    sys.exit(2)
print(out.getvalue(), "STARTED", flush=True)
hold = Path(sys.argv[3])
while hold.exists():
    time.sleep(0.2)
"""


def start(mode: str, port: str, hold: Path) -> subprocess.Popen:
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    return subprocess.Popen([sys.executable, "-c", DRIVER, mode, port, str(hold)], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def wait_for(process: subprocess.Popen, text: str, timeout: float = 120) -> str:
    lines, deadline = [], time.time() + timeout
    while time.time() < deadline:
        line = process.stdout.readline()
        if not line and process.poll() is not None:
            break
        lines.append(line)
        if text in line:
            return "".join(lines)
    raise AssertionError(f"no '{text}' in:\n{''.join(lines)}")


def test_a_second_run_starts_beside_the_first_and_a_taken_port_is_refused(tmp_path: Path):
    """The issue's case: the first run has the dashboard on 8265, the second (--no-dashboard) must start anyway
    (Ray checked its dashboard port even without a dashboard)."""
    hold = tmp_path / "hold"
    hold.touch()
    first = start("on", "-", hold)
    second = None
    try:
        first_out = wait_for(first, "STARTED")
        first_port = int(first_out.split("Ray dashboard: http://127.0.0.1:")[1].split()[0])
        second = start("off", "-", hold)  # while the first is still running
        wait_for(second, "STARTED")
        refused = subprocess.run([sys.executable, "-c", DRIVER, "on", str(first_port), str(hold)], cwd=REPO,
                                 capture_output=True, text=True, timeout=120)
        assert refused.returncode == 2
        assert f"--dashboard-port {first_port}: another process listens" in refused.stdout
        assert "Traceback" not in refused.stdout + refused.stderr
    finally:
        hold.unlink()
        for process in (first, second):
            if process is not None:
                process.wait(timeout=60)
