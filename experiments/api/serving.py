"""`api.serve(model_uri, ServeOptions())`: a registered policy's HTTP server, checked and ready to start.

It is `mlflow models serve -m URI --env-manager local -h 127.0.0.1`, made to work from a plain shell: the port is
checked free first (a taken one is refused in one line, before the tracking store is touched), the model is looked up
(an unknown alias or version is refused in one line), the venv's bin folder goes on PATH (MLflow starts `uvicorn` by
name) and the tracking URI is passed on. The model needs no torch and no Ray (experiments.results.registry), so any
environment with its pinned CPU requirements serves it. `Server.exec()` hands this process to the server;
`Server.command` and `Server.environment` start it any other way (subprocess.Popen).
"""
from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from envs.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class ServeOptions:
    port: int = 5001                 # 0 picks a free port
    host: str = LOOPBACK             # the interface: this machine only unless asked otherwise
    tracking_uri: str | None = None  # default MLFLOW_TRACKING_URI, else ./mlruns


@dataclass(frozen=True)
class Server:
    """The server of one registered model version, not started yet."""

    name: str
    version: str
    inputs: str                      # what it takes: the family's raw inputs, or observations
    url: str                         # where it answers: http://HOST:PORT/invocations
    tracking_uri: str
    command: list[str]               # `python -m mlflow models serve ...` with this interpreter
    environment: dict[str, str] = field(repr=False)  # this one, the venv's bin folder first on PATH
    warnings: list[str] = field(default_factory=list)  # to say before serving (the registry's guard, a wide host)

    def shell_line(self) -> str:
        """The same server started from a plain shell, as one line to paste."""
        return (f"PATH={shlex.quote(str(Path(sys.executable).parent))}:$PATH "
                f"MLFLOW_TRACKING_URI={shlex.quote(self.tracking_uri)} {shlex.join(self.command)}")

    def exec(self) -> NoReturn:
        """Replace this process with the server (it runs until stopped)."""
        os.execvpe(self.command[0], self.command, self.environment)


def serve(model_uri: str, options: ServeOptions = ServeOptions()) -> Server:
    """Check the port and the model; the server that would serve it (nothing started, nothing printed)."""
    port = serving_port(options.host, options.port)  # before the tracking store is touched
    from experiments.results.promotion import resolve_version
    from experiments.tracking.runs import make_client
    from experiments.tracking.store import default_tracking_uri

    tracking_uri = options.tracking_uri or default_tracking_uri()
    version = resolve_version(make_client(tracking_uri), model_uri)
    warnings = model_warnings(version)
    if options.host != LOOPBACK:
        warnings.append(f"warning: serving on {options.host}: anyone who can reach this machine can query the model")
    return Server(version.name, str(version.version), version.tags.get("inputs", "observations"),
                  f"http://{options.host}:{port}/invocations", tracking_uri,
                  serve_command(model_uri, options.host, port), serving_environment(tracking_uri), warnings)


def serve_command(model_uri: str, host: str, port: int) -> list[str]:
    """The `mlflow models serve` command line, with this interpreter's mlflow."""
    return [sys.executable, "-m", "mlflow", "models", "serve", "-m", model_uri, "--env-manager", "local",
            "-h", host, "-p", str(port)]


def invocation_body(bars: pd.DataFrame) -> dict[str, Any]:
    """The JSON body of a POST /invocations with these bars (a DataFrame indexed by `timestamp`), as every client
    here sends it (paper trading, the operations benchmark, the tests): MLflow's `dataframe_split`, times in ISO
    8601 and 15 significant digits, so the served model reads the floats the in-process one does."""
    frame = bars.reset_index()
    frame["timestamp"] = frame["timestamp"].map(lambda t: t.isoformat())
    return {"dataframe_split": json.loads(frame.to_json(orient="split", index=False, double_precision=15))}


def serving_environment(tracking_uri: str) -> dict[str, str]:
    """This environment with the venv's bin folder first on PATH and the tracking URI set."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "MLFLOW_TRACKING_URI": tracking_uri, "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}


def model_warnings(version: Any) -> list[str]:
    """The registry's guard on what a model version was judged (a `warning` tag, from the family's
    EvaluationReport.model_tags, e.g. an execution agent that finds failures later than the heuristic), as lines to
    say before serving it."""
    warning = version.tags.get("warning")
    return [f"warning: {version.name} version {version.version}: {warning}"] if warning else []


def serving_port(host: str, port: int) -> int:
    """The port the server will listen on: `port`, checked free before anything else (the server would otherwise
    fail after its start line, with a traceback); 0 picks a free one."""
    from experiments.plan.ports import pick_free_port, port_is_free

    if port == 0:
        return pick_free_port(host)
    if not 0 < port < 65536:
        raise InputError(f"--port {port}: not a TCP port: pick one in 1..65535, or 0 for a free one")
    if not port_is_free(host, port):
        raise InputError(f"--port {port}: another process listens on {host}:{port}: pick another port "
                         "(--port 0 takes a free one)")
    return port
