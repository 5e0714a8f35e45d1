"""`experiments.serve` (`api.serve`) on a taken port: one line and exit 2 before anything is printed (the server used
to print where it serves, then fail with a traceback); `--port 0` takes a free port."""
from __future__ import annotations

import socket

import pytest

from envs.errors import InputError
from experiments import serve
from experiments.api.serving import serving_port
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
    port = serving_port(LOOPBACK, 0)
    assert port not in (0, taken_port)
    with socket.socket() as again:  # the picked port can be bound: the server will get it
        again.bind((LOOPBACK, port))


@pytest.mark.parametrize("port", [-1, 70000])
def test_a_port_outside_the_range_is_refused(port):
    with pytest.raises(InputError, match="not a TCP port"):
        serving_port(LOOPBACK, port)


def test_api_serve_checks_the_model_and_port_and_starts_nothing(tmp_path, capsys):
    """`api.serve` returns the server the command execs: the version found, where it listens, the command from a plain
    shell, and the warnings the command prints first (the registry's guard, a host beyond this machine)."""
    from mlflow.tracking import MlflowClient

    from experiments.api.serving import ServeOptions, serve

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    client.create_registered_model("m")
    client.create_model_version("m", source=str(tmp_path), tags={"warning": "finds failures later than the heuristic"})
    client.set_registered_model_alias("m", "champion", "1")
    server = serve("models:/m@champion", ServeOptions(port=0, host="0.0.0.0", tracking_uri=uri))
    port = int(server.url.removesuffix("/invocations").rpartition(":")[2])
    assert (server.name, server.version, server.url) == ("m", "1", f"http://0.0.0.0:{port}/invocations")
    assert server.command[-4:] == ["-h", "0.0.0.0", "-p", str(port)]
    assert server.environment["MLFLOW_TRACKING_URI"] == uri
    assert server.warnings == ["warning: m version 1: finds failures later than the heuristic",
                               "warning: serving on 0.0.0.0: anyone who can reach this machine can query the model"]
    assert server.shell_line().endswith(" ".join(server.command[1:])) and capsys.readouterr().out == ""
