"""`python -m experiments.serve "models:/NAME@champion"`: serve a registered policy over HTTP on 127.0.0.1.

It is `mlflow models serve -m URI --env-manager local -h 127.0.0.1`, made to work from a plain shell: the
model is looked up first (an unknown alias or version is refused in one line), the venv's bin folder goes on PATH
(MLflow starts `uvicorn` by name) and the tracking URI is passed on. The model needs no torch and no Ray
(experiments.results.registry), so any environment with its pinned CPU requirements serves it. POST the last bars:

    curl -s http://127.0.0.1:5001/invocations -H 'Content-Type: application/json' \\
         -d '{"dataframe_split": {"columns": ["timestamp", "open", "high", "low", "close", "volume"], "data": [...]}}'

and it answers `{"predictions": [{"action": 1, "target_position": 1.0, "bar_time": ..., "applies_from": ...}]}`;
a request that does not fit the model gets a 400 whose message ends with the one line that says why.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envs.errors import InputError
from experiments.plan.ports import pick_free_port, port_is_free
from experiments.results.promotion import resolve_version
from experiments.shell import exit_code
from experiments.tracking.store import default_tracking_uri

if TYPE_CHECKING:
    import pandas as pd

LOOPBACK = "127.0.0.1"


def serve_command(model_uri: str, host: str, port: int) -> list[str]:
    """The `mlflow models serve` command line, with this interpreter's mlflow."""
    return [sys.executable, "-m", "mlflow", "models", "serve", "-m", model_uri, "--env-manager", "local",
            "-h", host, "-p", str(port)]


def invocation_body(bars: pd.DataFrame) -> dict[str, Any]:
    """The JSON body of a POST /invocations with these bars (a DataFrame indexed by `timestamp`), as every client
    here sends it (the paper trader, the operations benchmark, the tests): MLflow's `dataframe_split`, times in ISO
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
    print before serving it."""
    warning = version.tags.get("warning")
    return [f"warning: {version.name} version {version.version}: {warning}"] if warning else []


def serving_port(host: str, port: int) -> int:
    """The port the server will listen on: `port`, checked free before anything is printed (the server would
    otherwise fail after its start line, with a traceback); 0 picks a free one."""
    if port == 0:
        return pick_free_port(host)
    if not 0 < port < 65536:
        raise InputError(f"--port {port}: not a TCP port: pick one in 1..65535, or 0 for a free one")
    if not port_is_free(host, port):
        raise InputError(f"--port {port}: another process listens on {host}:{port}: pick another port "
                         "(--port 0 takes a free one)")
    return port


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.serve", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help='a registered model, e.g. "models:/dqn_btc@champion" or models:/dqn_btc/3')
    parser.add_argument("--port", type=int, default=5001, help="default 5001; 0 picks a free port and prints it")
    parser.add_argument("--host", default=LOOPBACK, help="interface (default 127.0.0.1: this machine only)")
    parser.add_argument("--tracking-uri", default=None, help="default MLFLOW_TRACKING_URI, else ./mlruns")
    args = parser.parse_args(argv)
    return exit_code(lambda: serve(args))


def serve(args: argparse.Namespace) -> int:
    """Check the port and the model, say where it is served, then hand this process to the MLflow server."""
    port = serving_port(args.host, args.port)
    tracking_uri = args.tracking_uri or default_tracking_uri()
    from experiments.tracking.runs import make_client

    version = resolve_version(make_client(tracking_uri), args.model)
    for line in model_warnings(version):
        print(line, flush=True)
    if args.host != LOOPBACK:
        print(f"warning: serving on {args.host}: anyone who can reach this machine can query the model", flush=True)
    command = serve_command(args.model, args.host, port)
    print(f"serving {version.name} version {version.version} ({version.tags.get('inputs', 'observations')}) on "
          f"http://{args.host}:{port}/invocations", flush=True)
    print(f"the same from a plain shell: PATH={shlex.quote(str(Path(sys.executable).parent))}:$PATH "
          f"MLFLOW_TRACKING_URI={shlex.quote(tracking_uri)} {shlex.join(command)}", flush=True)
    os.execvpe(command[0], command, serving_environment(tracking_uri))
    return 0  # not reached: the server replaces this process


if __name__ == "__main__":
    sys.exit(main())
