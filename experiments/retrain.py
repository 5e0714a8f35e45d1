"""`python -m experiments.retrain CONF`: a challenger from fresh bars, a forward test against the champion, a gate.

A thin shell over `experiments.api.retrain` (experiments/api/retraining.py says what a retrain does): its flags
become one typed `RetrainOptions`, and its exit code is the challenger run's (experiments/records/exits.py): 0, 2
bad input (one line), 3 partial, 1 failed or no challenger registered, 4 a fault, 130 interrupted.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from experiments import api
from experiments.api.options import RunOptions
from experiments.api.retraining import RetrainOptions
from experiments.api.retraining import __doc__ as RETRAIN_DOC
from experiments.shell import exit_code, terminal_console


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m experiments.retrain", description=RETRAIN_DOC,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("conf", type=Path, help="experiment YAML with a retrain: section, e.g. conf/dqn_btc.yaml")
    parser.add_argument("--mode", choices=("incremental", "full"), help="override retrain.mode")
    parser.add_argument("--promote", action="store_true",
                        help="give the challenger the champion alias whatever the gate says (recorded on the version)")
    parser.add_argument("--refit", action=argparse.BooleanOptionalAction, default=None,
                        help="after the gate, train the champion's configuration through the newest bar and register "
                             "it under the refit alias, which serves (default: retrain.refit)")
    parser.add_argument("--refit-only", action="store_true",
                        help="no challenger: refit the champion through the newest bar (after a refit that failed, or "
                             "a retrain without --refit)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a setting by dotted path (repeatable), as with experiments.run")
    parser.add_argument("--smoke-test", action="store_true", help="the challenger's sweep on the smoke budget")
    parser.add_argument("--dry-run", action="store_true", help="check the file, the champion and the forward window")
    parser.add_argument("--output", type=Path, default=Path("runs"), help="as experiments.run (default ./runs)")
    for flag in ("--storage", "--hardware", "--address"):
        parser.add_argument(flag, help=f"as experiments.run's {flag}")
    parser.add_argument("--no-dashboard", action="store_true", help="do not start the Ray dashboard")
    return parser.parse_args(argv)


def options_from(args: argparse.Namespace) -> RetrainOptions:
    run = RunOptions(smoke_test=args.smoke_test, hardware=args.hardware, address=args.address, storage=args.storage,
                     output=args.output, dashboard=not args.no_dashboard)
    return RetrainOptions(mode=args.mode, promote=args.promote, check_only=args.dry_run, refit=args.refit,
                          refit_only=args.refit_only, run=run)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    console = terminal_console()

    def retrain() -> int:
        args = parse_args(argv)
        return int(api.retrain(args.conf, args.overrides, options_from(args), console).exit_code)

    return exit_code(retrain)


if __name__ == "__main__":
    sys.exit(main())
