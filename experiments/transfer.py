"""`python -m experiments.transfer "models:/NAME@champion" HISTORY [HISTORY ...]`: score a registered model on data it
never trained on, without retraining: zero-shot, and online (updated after every cycle, as CI runs).

For the execution agent (`conf/dqn_testprio_cross.yaml`): HISTORY is a CI history in the RETECS or the enriched
format; every cycle is ranked in time order by the model as registered, by the model updated after each cycle's
verdicts, by a cold start updated the same way, by periodic retraining, and by the baselines (recent_failures,
random, optimal, and gradient-boosted learning-to-rank fitted on the model's own training histories). The table
(headline: APFDc over the failing cycles, the paper's protocol, cycles with >= 6 tests) is printed and logged to
MLflow (experiment `<model name>-transfer`, one run per history, the per-cycle scores as an artifact); --output also
writes them as CSV. A model whose env family cannot be scored this way, or a file in an unknown format, is refused
in one line.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from experiments.api.transfers import transfer
from experiments.shell import exit_code


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m experiments.transfer", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model",
                        help='a registered model, e.g. "models:/dqn_testprio_cross/latest" or models:/NAME@ALIAS')
    parser.add_argument("histories", nargs="+", help="data files the model never trained on")
    parser.add_argument("--no-online", dest="online", action="store_false",
                        help="score the registered model and the baselines only (no per-cycle learners)")
    parser.add_argument("--output", type=Path, default=None, help="folder for <history>.table.csv and .cycles.csv")
    parser.add_argument("--tracking-uri", default=None, help="default MLFLOW_TRACKING_URI, else ./mlruns")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    args = parse_args(argv)
    return exit_code(lambda: transfer(args.model, args.histories, args.online, args.output, args.tracking_uri))


if __name__ == "__main__":
    sys.exit(main())
