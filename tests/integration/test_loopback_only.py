"""A local run's Ray listens on loopback only, answers nothing over HTTP or gRPC without the token, and keeps its
session folder (logs included) to its owner. docs/faults.md lists what Ray 2.60 opens and why each is safe.
"""
from __future__ import annotations

import http.client
import ipaddress
import os
import stat
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.conftest import REPO

DRIVER = """
import argparse, io, sys
from rich.console import Console
from experiments.plan.cluster import LOCAL, RayTarget
from experiments.plan.local_ray import LocalRay, start_ray
import ray
args = LocalRay()
start_ray(RayTarget(LOCAL), args, Console(file=io.StringIO()).print)
context = ray.get_runtime_context()
info = ray._private.worker.global_worker.node.address_info
print("SESSION", info["session_dir"], "GCS", info["gcs_address"], flush=True)
sys.stdin.readline()  # hold Ray until the test is done
"""
# Paths that return data: none may answer without the token. (The dashboard's "/" is its static login page.)
DATA_PATHS = ("/metrics", "/api/version", "/api/v0/nodes", "/api/jobs/", "/nodes?view=summary", "/get_log_file")


def listening(pids: set[int]) -> list[tuple[str, int, str]]:
    """(address, port, process) of every TCP listener of `pids`, from `ss -ltnp`."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        local = line.split()[3]
        owners = {int(part.split("=")[1]) for part in line.split("users:")[-1].replace(")", ",").split(",")
                  if part.startswith("pid=")} if "users:" in line else set()
        if owners & pids:
            address, port = local.rsplit(":", 1)
            found.append((address.strip("[]"), int(port), line.split('(("')[-1].split('"')[0]))
    return found


def is_loopback(address: str) -> bool:
    if address in ("*", "0.0.0.0", "::"):
        return False
    ip = ipaddress.ip_address(address.removeprefix("::ffff:"))
    return ip.is_loopback


def answers_without_token(port: int, path: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=3) as response:
            return response.status < 400
    except urllib.error.HTTPError:
        return False  # 401, 403, 404...
    except (OSError, ValueError, http.client.HTTPException):  # not HTTP (gRPC), or closed
        return False


def test_a_local_ray_listens_on_loopback_and_asks_everyone_for_the_token():
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], cwd=REPO, text=True, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})
    try:
        line = ""
        while "SESSION" not in line:
            line = driver.stdout.readline()
            assert line or driver.poll() is None, "the driver ended before Ray started"
        _, session, _, gcs = line.split()
        process = psutil.Process(driver.pid)
        pids = {driver.pid, *(child.pid for child in process.children(recursive=True))}
        sockets = listening(pids)
        assert len(sockets) >= 6, sockets  # gcs, raylet (2), workers, agents, dashboard
        assert [s for s in sockets if not is_loopback(s[0])] == []
        answered = [(port, name, path) for _, port, name in sockets for path in DATA_PATHS
                    if answers_without_token(port, path)]
        assert answered == []

        import grpc
        from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

        stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(grpc.insecure_channel(gcs))
        with pytest.raises(grpc.RpcError) as refused:
            stub.GetAllNodeInfo(gcs_service_pb2.GetAllNodeInfoRequest(), timeout=10)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED

        assert stat.S_IMODE(Path(session).stat().st_mode) == 0o700  # its logs: the owner's only
    finally:
        if driver.poll() is None:
            driver.stdin.write("\n")
            driver.stdin.flush()
            driver.wait(timeout=60)
