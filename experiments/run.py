"""`python -m experiments.run CONF`: validate, plan resources, sweep with Tune, track in MLflow, score out of sample.

A file that lists experiment files (`experiments:`, e.g. conf/agents.yaml) runs them side by side in one Ray
cluster (experiments/api/side_by_side.py).

A thin shell over `experiments.api` (`api.plan` for --dry-run, `api.run` otherwise): its flags become one typed
`RunOptions`, the API's events are drawn on the terminal (experiments/api/console_view.py), and its exit code is the
run's (experiments/records/exits.py): 0 done; 2 bad input (one readable
message, no traceback); 1 a failed sweep; 3 a partial result; 4 a fault outside the run; 130 interrupted.
docs/faults.md.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from experiments import api
from experiments.api.console_view import ConsoleView, events_to_console
from experiments.api.options import RunOptions
from experiments.api.runs import dry_run
from experiments.plan.numerics import requested, restart_pinned
from experiments.shell import exit_code, leave, terminal_console


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m experiments.run", description=__doc__)
    parser.add_argument("conf", type=Path, help="experiment YAML, e.g. conf/dqn_btc.yaml")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a setting by dotted path, e.g. --set training.lr=1e-4 (repeatable)")
    parser.add_argument("--dry-run", action="store_true", help="validate and print the plan; train nothing")
    parser.add_argument("--smoke-test", action="store_true", help="the same pipeline with 2 trials x 2 iterations")
    parser.add_argument("--resume", action="store_true",
                        help="continue the last interrupted sweep of this experiment (same --output)")
    parser.add_argument("--hardware", help="hardware preset name or YAML path (else GPU_PROFILE, the YAML, detection)")
    parser.add_argument("--address",
                        help="join a Ray cluster: HOST:PORT, ray://HOST:PORT, auto (the one `ray start` started here) "
                             "or local (start our own); default RAY_ADDRESS, else a live `ray start` cluster on this "
                             "machine, else a local Ray")
    parser.add_argument("--storage",
                        help="where Tune results, checkpoints and the resume file go: a folder or s3://BUCKET/PREFIX "
                             "(?endpoint_override=http://HOST:PORT or AWS_ENDPOINT_URL_S3 for S3-compatible stores); "
                             "default: storage: in the file, else RLPLATFORM_STORAGE, else --output")
    parser.add_argument("--fresh-ledger", metavar="REASON",
                        help="start a fresh trials ledger for this data and these test windows: earlier attempts no "
                             "longer deflate the verdict; the reason is recorded "
                             "(experiments/results/trials_ledger.py)")
    parser.add_argument("--cross-cpu", action="store_true",
                        help="the same numbers on any x86-64 CPU: pin MKL's, torch's and numpy's kernels and one "
                             "thread per op (also RLPLATFORM_CROSS_CPU=1); slower, see docs/verdicts.md")
    parser.add_argument("--no-dashboard", action="store_true", help="do not start the Ray dashboard")
    parser.add_argument("--dashboard-host", default=RunOptions.dashboard_host,
                        help="interface for the Ray dashboard (default 127.0.0.1: this machine only)")
    parser.add_argument("--ray-metrics", action="store_true",
                        help="let a local Ray export its Prometheus metrics (on 127.0.0.1, without a login; off by "
                             "default, docs/faults.md)")
    parser.add_argument("--dashboard-port", type=int, metavar="PORT",
                        help="port for the Ray dashboard (default 8265, or the next free one when another run has it)")
    parser.add_argument("--output", type=Path, default=Path("runs"),
                        help="folder for evaluation files, and for Tune results unless --storage says otherwise "
                             "(default ./runs)")
    # Set by a run of several experiments (experiments/api/side_by_side.py) for each experiment it starts.
    parser.add_argument("--run-group", help="tag the MLflow runs with run_group=NAME (runs started together)")
    parser.add_argument("--status-file", type=Path,
                        help="keep the run's phase, MLflow ids and trial rows in this JSON file, for a parent run")
    return parser.parse_args(argv)


def options_from(args: argparse.Namespace) -> RunOptions:
    """The typed options of the run: the command layer's only use of its flags."""
    return RunOptions(smoke_test=args.smoke_test, resume=args.resume, hardware=args.hardware, address=args.address,
                      storage=args.storage, output=args.output, fresh_ledger=args.fresh_ledger,
                      cross_cpu=args.cross_cpu, dashboard=not args.no_dashboard, dashboard_host=args.dashboard_host,
                      dashboard_port=args.dashboard_port, ray_metrics=args.ray_metrics, run_group=args.run_group,
                      status_file=args.status_file)


def main(argv: list[str] | None = None) -> int:
    view = events_to_console(terminal_console())
    try:
        return exit_code(lambda: _run(argv, view))
    finally:
        view.close()  # a live table an interrupted run left running


def _run(argv: list[str] | None, view: ConsoleView) -> int:
    """Dry-run the experiment (or a listing), or run it through the API; the exit code is the run's."""
    clock = api.RunClock()  # the run's wall time is checked against the plan's estimate, with the machine's load
    args = parse_args(argv)
    if requested(args.cross_cpu):  # before numpy, torch or MKL pick their kernels in any process
        restart_pinned("experiments.run", sys.argv[1:] if argv is None else argv)
    options = options_from(args)
    if args.dry_run:
        return int(dry_run(args.conf, args.overrides, options, on_event=view))
    return int(api.run(args.conf, args.overrides, options, on_event=view, clock=clock).exit_code)


if __name__ == "__main__":
    code = main()
    if parse_args(None).dry_run:  # a dry run starts nothing: skip unloading torch and RLlib (experiments.shell.leave)
        leave(code)
    sys.exit(code)
