"""Compare the runs of one MLflow experiment: sweeps, their trials, learning curves, evaluations.

`experiments.run` logs one parent run per invocation (tag `role=sweep`, the `eval/*` metrics and the
`evaluation/evaluation.csv` + `evaluation.png` artifacts) and one child run per Tune trial (tag
`mlflow.parentRunId`, params such as `training.lr`, one metric point per training iteration).
experiments/tracking/comparison.py turns that into pandas tables and matplotlib figures (notebooks/compare_runs.ipynb
and `api.compare` call it); this command prints them.

From a shell, `python -m experiments.compare [--experiment NAME] [--run RUN_ID] [--csv FILE]` prints the
experiment's sweeps, one sweep's trials (the params that differ between them and their latest metrics)
and its out-of-sample evaluation table.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pandas as pd
from mlflow.entities import Run

import envs
from experiments.shell import exit_code
from experiments.tracking.comparison import (
    DEFAULT_TRACKING_URI,
    DISPLAY_OPTIONS,
    EVAL_RETURN,
    TRAIN_RETURN,
    child_runs,
    evaluation_table,
    experiment_id,
    newest_experiment,
    open_client,
    parent_runs,
    pick_parent,
    runs_table,
    settings,
    varying_params,
)


def _sweep_line(run: Run) -> str:
    started = pd.Timestamp(run.info.start_time or 0, unit="ms").strftime("%Y-%m-%d %H:%M")
    smoke = " smoke test" if run.data.tags.get("smoke_test") == "True" else ""
    verdict = run.data.tags.get("verdict", "")
    return f"  {run.info.run_id}  {started}  {run.info.status:<9}{smoke}  {verdict}".rstrip()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m experiments.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tracking-uri", help="MLflow store (default: MLFLOW_TRACKING_URI, else "
                                               f"{DEFAULT_TRACKING_URI})")
    parser.add_argument("--experiment", help="MLflow experiment (default: EXPERIMENT_NAME, else the one with the "
                                             "newest sweep)")
    parser.add_argument("--run", help="the sweep's (parent) run id (default: the newest sweep)")
    parser.add_argument("--csv", type=Path, help="also write the trials table to this CSV file")
    return parser.parse_args(argv)


def cli_metrics(parent: Run) -> tuple[str, ...]:
    """The trial table's metrics in the CLI: training and validation return, and the env family's headline test
    scores (`envs.EnvFamily.comparison_columns`)."""
    return (TRAIN_RETURN, EVAL_RETURN, *envs.family(parent.data.tags.get("env", "")).comparison_columns)


def main(argv: list[str] | None = None) -> int:
    return exit_code(lambda: show(parse_args(argv)))


def show(args: argparse.Namespace) -> int:
    """Print the experiment's sweeps, one sweep's trials and its out-of-sample evaluation (the module docstring)."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # no progress bars in a table
    uri, name = settings(args.tracking_uri, args.experiment)
    client = open_client(uri)
    name = name or newest_experiment(client)
    exp_id = experiment_id(client, name)
    parents = parent_runs(client, exp_id)
    parent = pick_parent(parents, args.run)
    print(f"experiment {name!r} at {uri}: {len(parents)} sweep(s), newest first")
    print("\n".join(_sweep_line(run) for run in parents))
    trials = child_runs(client, exp_id, parent.info.run_id)
    table = runs_table(trials, params=varying_params(trials), metric_prefixes=(), metrics=cli_metrics(parent))
    table = table.reset_index().set_index("run_name").drop(columns=["symbol"] if not table["symbol"].any() else [])
    print(f"\nsweep {parent.info.run_id}: {len(trials)} trial(s)")
    with pd.option_context(*DISPLAY_OPTIONS, "display.width", 250, "display.max_colwidth", 40):
        print(table.to_string() if len(table) else "  (no trials logged)")
        evaluation = evaluation_table(client, parent.info.run_id)
        if evaluation is not None:
            print("\nout-of-sample evaluation (evaluation/evaluation.csv):")
            print(evaluation.to_string())
    if args.csv:
        table.to_csv(args.csv)
        print(f"\nwrote {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
