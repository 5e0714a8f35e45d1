"""Compare the runs of one MLflow experiment: sweeps, their trials, learning curves, evaluations.

`experiments.run` logs one parent run per invocation (tag `role=sweep`, the `eval/*` metrics and the
`evaluation/evaluation.csv` + `evaluation.png` artifacts) and one child run per Tune trial (tag
`mlflow.parentRunId`, params such as `training.lr`, one metric point per training iteration).
`api.compare` (experiments/api/comparison.py) reads them into tables, as notebooks/compare_runs.ipynb does; this
command prints them.

From a shell, `python -m experiments.compare [--experiment NAME] [--run RUN_ID] [--csv FILE]` prints the
experiment's sweeps, one sweep's trials (the params that differ between them and their latest metrics)
and its out-of-sample evaluation table.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from experiments import api
from experiments.api.comparison import Comparison
from experiments.shell import exit_code


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m experiments.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tracking-uri", help="MLflow store (default: MLFLOW_TRACKING_URI, else ./mlruns)")
    parser.add_argument("--experiment", help="MLflow experiment (default: EXPERIMENT_NAME, else the one with the "
                                             "newest sweep)")
    parser.add_argument("--run", help="the sweep's (parent) run id (default: the newest sweep)")
    parser.add_argument("--csv", type=Path, help="also write the trials table to this CSV file")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    return exit_code(lambda: show(parse_args(argv)))


def show(args: argparse.Namespace) -> int:
    """Print the experiment's sweeps, one sweep's trials and its out-of-sample evaluation (the module docstring)."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # no progress bars in a table
    found = api.compare(args.tracking_uri, args.experiment, args.run)
    print(f"experiment {found.experiment!r} at {found.tracking_uri}: {len(found.sweeps)} sweep(s), newest first")
    print("\n".join(sweep_lines(found)))
    print(f"\nsweep {found.parent_run_id}: {len(found.headline)} trial(s)")
    print(found.as_text(found.headline) if len(found.headline) else "  (no trials logged)")
    if found.evaluation is not None:
        print("\nout-of-sample evaluation (evaluation/evaluation.csv):")
        print(found.as_text(found.evaluation))
    if args.csv:
        found.headline.to_csv(args.csv)
        print(f"\nwrote {args.csv}")
    return 0


def sweep_lines(found: Comparison) -> list[str]:
    return [f"  {run_id}  {sweep.started:%Y-%m-%d %H:%M}  {sweep.status:<9}{' smoke test' if sweep.smoke_test else ''}"
            f"  {sweep.verdict}".rstrip() for run_id, sweep in found.sweeps.iterrows()]


if __name__ == "__main__":
    sys.exit(main())
