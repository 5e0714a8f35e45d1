"""`experiments.serve` on a taken port: one line and exit 2 before anything is printed (the server used to print
where it serves, then fail with a traceback); `--port 0` takes a free port."""
from __future__ import annotations

import socket

import pytest

from envs.errors import InputError
from experiments import serve
from tests.servers import LOOPBACK


@pytest.fixture
def taken_port():
    """A port some other process listens on."""
    with socket.socket() as server:
        server.bind((LOOPBACK, 0))
        server.listen()
        yield server.getsockname()[1]


def test_a_taken_port_is_refused_in_one_line_before_anything_is_printed(taken_port, capsys, tmp_path):
    code = serve.main(["models:/dqn_btc@champion", "--port", str(taken_port),
                       "--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and f"--port {taken_port}: another process listens on 127.0.0.1:{taken_port}" in err
    assert not (tmp_path / "mlflow.db").exists()  # refused before the tracking store was touched


def test_port_zero_picks_a_port_that_is_free(taken_port):
    port = serve.serving_port(LOOPBACK, 0)
    assert port not in (0, taken_port)
    with socket.socket() as again:  # the picked port can be bound: the server will get it
        again.bind((LOOPBACK, port))


@pytest.mark.parametrize("port", [-1, 70000])
def test_a_port_outside_the_range_is_refused(port):
    with pytest.raises(InputError, match="not a TCP port"):
        serve.serving_port(LOOPBACK, port)
