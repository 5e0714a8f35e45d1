"""Which Ray a run joins: live clusters are joined and said so, dead ones are one line, stale files ignored."""
from __future__ import annotations

import socket

import pytest

from envs.errors import InputError
from experiments.plan.cluster import LOCAL, resolve_ray_target


@pytest.fixture
def live():
    """Something listening on a loopback port (a stand-in for a GCS: only reachability is checked)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield f"127.0.0.1:{server.getsockname()[1]}"


def dead_address() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


def test_without_an_address_a_local_ray_is_started(tmp_path):
    assert resolve_ray_target(None, {}, tmp_path / "none").address == LOCAL


def test_a_live_ray_start_cluster_is_joined_deliberately(tmp_path, live):
    leftover = tmp_path / "ray_current_cluster"
    leftover.write_text(live)
    target = resolve_ray_target(None, {}, leftover)
    assert target.address == live and "--address local" in target.note
    assert resolve_ray_target("local", {}, leftover).address == LOCAL
    assert resolve_ray_target("auto", {}, leftover).address == live


def test_a_stale_leftover_is_ignored_and_said(tmp_path):
    leftover = tmp_path / "ray_current_cluster"
    leftover.write_text(dead_address())
    target = resolve_ray_target(None, {}, leftover)
    assert target.address == LOCAL and "no longer runs" in target.note


def test_explicit_addresses_must_answer(tmp_path, live):
    assert resolve_ray_target(live, {}, tmp_path / "none").address == live
    assert resolve_ray_target(None, {"RAY_ADDRESS": live}, tmp_path / "none").address == live
    dead = dead_address()
    with pytest.raises(InputError, match="RAY_ADDRESS .*no Ray cluster answers"):
        resolve_ray_target(None, {"RAY_ADDRESS": dead}, tmp_path / "none")
    with pytest.raises(InputError, match="no Ray cluster was started on this machine"):
        resolve_ray_target("auto", {}, tmp_path / "none")
    with pytest.raises(InputError, match="dashboard or job-submission URL"):
        resolve_ray_target("http://127.0.0.1:8265", {}, tmp_path / "none")
    with pytest.raises(InputError, match="HOST:PORT"):
        resolve_ray_target("headnode", {}, tmp_path / "none")
