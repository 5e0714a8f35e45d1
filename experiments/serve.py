"""`python -m experiments.serve "models:/NAME@champion"`: serve a registered policy over HTTP on 127.0.0.1.

It is `mlflow models serve -m URI --env-manager local -h 127.0.0.1`, made to work from a plain shell: the
model is looked up first (an unknown alias or version is refused in one line), the venv's bin folder goes on PATH
(MLflow starts `uvicorn` by name) and the tracking URI is passed on. The model needs no torch and no Ray
(experiments.results.registry), so any environment with its pinned CPU requirements serves it. POST the last bars:

    curl -s http://127.0.0.1:5001/invocations -H 'Content-Type: application/json' \\
         -d '{"dataframe_split": {"columns": ["timestamp", "open", "high", "low", "close", "volume"], "data": [...]}}'

and it answers `{"predictions": [{"action": 1, "target_position": 1.0, "bar_time": ..., "applies_from": ...}]}`;
a request that does not fit the model gets a 400 whose message ends with the one line that says why.

A thin shell over `experiments.api.serve` (experiments/api/serving.py): it prints where the model is served, then
hands this process to the MLflow server.
"""
from __future__ import annotations

import argparse
import sys

from experiments import api
from experiments.api.serving import LOOPBACK, ServeOptions
from experiments.shell import exit_code


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m experiments.serve", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help='a registered model, e.g. "models:/dqn_btc@champion" or models:/dqn_btc/3')
    parser.add_argument("--port", type=int, default=ServeOptions.port,
                        help=f"default {ServeOptions.port}; 0 picks a free port and prints it")
    parser.add_argument("--host", default=LOOPBACK, help="interface (default 127.0.0.1: this machine only)")
    parser.add_argument("--tracking-uri", default=None, help="default MLFLOW_TRACKING_URI, else ./mlruns")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return exit_code(lambda: serve(args))


def serve(args: argparse.Namespace) -> int:
    """Say where the model is served and how to start the same from a plain shell, then become the server."""
    server = api.serve(args.model, ServeOptions(port=args.port, host=args.host, tracking_uri=args.tracking_uri))
    for line in server.warnings:
        print(line, flush=True)
    print(f"serving {server.name} version {server.version} ({server.inputs}) on {server.url}", flush=True)
    print(f"the same from a plain shell: {server.shell_line()}", flush=True)
    server.exec()


if __name__ == "__main__":
    sys.exit(main())
