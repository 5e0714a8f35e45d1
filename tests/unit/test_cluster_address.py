"""Which Ray a run joins: live clusters of this user are joined and said so, dead, silent or foreign ones are one
line, stale files ignored.

A GCS must answer a request, not only accept a TCP connect: `answers` stands in for a GCS that does (the request is
passed in, `ask`), `closing` is a port that accepts and closes at once (the real request must fail there), and one
slow test asks a real `ray start` GCS (tests/integration/test_joined_cluster_killed.py)."""
from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from envs.errors import InputError
from experiments.plan.cluster import LOCAL, NoAnswer, ask_gcs, resolve_ray_target, sends_token

SESSION = "session_2026-01-01_00-00-00_000000_1"


@pytest.fixture
def live():
    """Something listening on a loopback port: it passes the TCP check; whether a GCS answers is `ask`'s to say."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield f"127.0.0.1:{server.getsockname()[1]}"


@pytest.fixture
def closing():
    """A port that accepts a connection and closes it at once: TCP passes, no request is ever answered (a cluster
    that is stopping, or another program on its port)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def accept_and_close() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            connection.close()

    threading.Thread(target=accept_and_close, daemon=True).start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    server.close()


def answers(session: str = SESSION, asked: list | None = None):
    """A GCS request that is answered with `session`, recording what was asked."""
    def ask(address: str, timeout: float, token: bool) -> str:
        if asked is not None:
            asked.append((address, token))
        return session
    return ask


def silent(address: str, timeout: float, token: bool) -> str:
    raise NoAnswer("UNAVAILABLE: Socket closed")


def dead_address() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


def ray_start_file(folder: Path, address: str, session: str | None = SESSION) -> Path:
    """Ray's current-cluster file naming `address`, and (unless None) the session folder beside it."""
    leftover = folder / "ray_current_cluster"
    leftover.write_text(address)
    if session:
        (folder / session).mkdir()
    return leftover


def test_without_an_address_a_local_ray_is_started(tmp_path):
    assert resolve_ray_target(None, {}, tmp_path / "none").address == LOCAL


def test_a_live_ray_start_cluster_of_this_user_is_joined_deliberately(tmp_path, live):
    leftover = ray_start_file(tmp_path, live)
    target = resolve_ray_target(None, {}, leftover, ask=answers())
    assert target.address == live and "--address local" in target.note
    assert resolve_ray_target("local", {}, leftover, ask=answers()).address == LOCAL
    assert resolve_ray_target("auto", {}, leftover, ask=answers()).address == live


def test_a_stale_leftover_is_ignored_and_said(tmp_path):
    leftover = ray_start_file(tmp_path, dead_address())
    target = resolve_ray_target(None, {}, leftover, ask=answers())
    assert target.address == LOCAL and "no longer runs" in target.note


def test_a_port_that_accepts_but_answers_no_request_is_not_joined(tmp_path, closing):
    """The reported hang: the recorded cluster was stopping, its port still accepted, and `ray.init` retried it for
    10 minutes. The real request (no fake) fails within seconds, and a local Ray is started instead."""
    leftover = ray_start_file(tmp_path, closing)
    target = resolve_ray_target(None, {"RAY_AUTH_MODE": "disabled"}, leftover)
    assert target.address == LOCAL
    assert target.note.startswith(f"ignored {leftover}: its GCS at {closing} does not answer a request (")
    assert target.note.endswith("; starting a local Ray")
    with pytest.raises(NoAnswer):
        ask_gcs(closing, 3.0)


def test_another_users_cluster_is_not_joined_nor_asked(tmp_path, live):
    leftover = ray_start_file(tmp_path, live)
    asked: list = []
    other = os.getuid() + 1
    target = resolve_ray_target(None, {}, leftover, ask=answers(asked=asked), uid=other)
    assert target.address == LOCAL
    assert target.note == (f"ignored {leftover}: it belongs to another user (uid {os.getuid()}); "
                           "starting a local Ray")
    assert asked == []  # not even a request, which could carry this user's token


def test_a_cluster_whose_session_folder_is_missing_is_not_joined(tmp_path, live):
    """The file is ours and the port answers, but the session the GCS names is not in the file's folder: that GCS
    is not the cluster `ray start` recorded here (another machine's, or a reused port)."""
    leftover = ray_start_file(tmp_path, live, session=None)
    target = resolve_ray_target(None, {}, leftover, ask=answers())
    assert target.address == LOCAL and f"names a session that is not here ({tmp_path / SESSION})" in target.note
    target = resolve_ray_target(None, {}, leftover, ask=answers("../elsewhere"))
    assert target.address == LOCAL and "names no session folder" in target.note


@pytest.mark.skipif(os.getuid() != 0, reason="giving a folder to another user needs root")
def test_a_cluster_whose_session_folder_is_another_users_is_not_joined(tmp_path, live):
    leftover = ray_start_file(tmp_path, live)
    os.chown(tmp_path / SESSION, 4242, 4242)
    target = resolve_ray_target(None, {}, leftover, ask=answers())
    assert target.address == LOCAL and "belongs to another user (uid 4242)" in target.note


def test_a_silent_gcs_is_ignored_and_said(tmp_path, live):
    leftover = ray_start_file(tmp_path, live)
    target = resolve_ray_target(None, {}, leftover, ask=silent)
    assert target.address == LOCAL
    assert f"its GCS at {live} does not answer a request (UNAVAILABLE: Socket closed)" in target.note


def test_explicit_addresses_must_answer(tmp_path, live):
    assert resolve_ray_target(live, {}, tmp_path / "none", ask=answers()).address == live
    assert resolve_ray_target(None, {"RAY_ADDRESS": live}, tmp_path / "none", ask=answers()).address == live
    dead = dead_address()
    with pytest.raises(InputError, match="RAY_ADDRESS .*no Ray cluster answers"):
        resolve_ray_target(None, {"RAY_ADDRESS": dead}, tmp_path / "none")
    with pytest.raises(InputError, match="no Ray cluster was started on this machine"):
        resolve_ray_target("auto", {}, tmp_path / "none")
    with pytest.raises(InputError, match="dashboard or job-submission URL"):
        resolve_ray_target("http://127.0.0.1:8265", {}, tmp_path / "none")
    with pytest.raises(InputError, match="HOST:PORT"):
        resolve_ray_target("headnode", {}, tmp_path / "none")


def test_explicit_and_auto_addresses_must_answer_a_request_not_only_a_connect(tmp_path, closing):
    with pytest.raises(InputError, match=f"--address {closing}: no Ray cluster answers there .*no Ray GCS answers a "
                                         "request"):
        resolve_ray_target(closing, {"RAY_AUTH_MODE": "disabled"}, tmp_path / "none")
    leftover = ray_start_file(tmp_path, closing)
    with pytest.raises(InputError, match="--address auto: .* does not answer a request .*no Ray GCS answers a request"):
        resolve_ray_target("auto", {"RAY_AUTH_MODE": "disabled"}, leftover)


def test_a_ray_client_address_keeps_the_tcp_check_only(tmp_path, live):
    target = resolve_ray_target(f"ray://{live}", {}, tmp_path / "none", ask=silent)
    assert target.address == f"ray://{live}" and not target.joins_gcs


def test_the_token_goes_only_where_ray_init_sends_it(tmp_path, live):
    """Ray sends this user's token to an address it was given only under RAY_AUTH_MODE=token; the check asks the
    same way, so it neither leaks the token nor passes where `ray.init` would be refused."""
    asked: list = []
    resolve_ray_target(live, {}, tmp_path / "none", ask=answers(asked=asked))
    resolve_ray_target(live, {"RAY_AUTH_MODE": "token"}, tmp_path / "none", ask=answers(asked=asked))
    assert asked == [(live, False), (live, True)]
    assert not sends_token({"RAY_AUTH_MODE": "disabled"}, found=True)
    assert sends_token({"RAY_AUTH_MODE": "TOKEN"}, found=False)
