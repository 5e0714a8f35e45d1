"""A table of hypotheses tried through the trials ledger: each run's attempt number, what the ledger counted, its
validation return (what may choose among hypotheses) and its verdict (what may not).

    .venv/bin/python -m experiments.studies.hypotheses --tracking-uri sqlite:///mlruns/mlflow.db \
        dqn_btc dqn_btc_momentum ...

Each name is an MLflow experiment; every sweep (parent run) in it is a row, oldest first. Validation return: per
trial, the selection score of the checkpoint it kept (the validation return as `tune.checkpoint.select` makes it),
averaged over folds and configurations per seed; the row shows the mean over seeds and the seed spread (half the
range of the per-seed means, which with two seeds is their standard deviation). The verdict columns are one per
baseline of the sweep's env family (`envs.EnvFamily.baseline_table`, headline first), so a family with other baselines
gets its own. The docs/features.md study is this table.
"""
from __future__ import annotations

import argparse
import math
import sys

import numpy as np
import pandas as pd
from mlflow.entities import Run
from mlflow.tracking import MlflowClient

import envs
from experiments.shell import exit_code
from experiments.tracking.comparison import child_runs, experiment_id, parent_runs

# The env of a sweep that has no "env" tag: runs from before the platform tagged it (the algorithm table, issue 13)
# that have a verdict were all this env's, the only family with folds then (a verdict needs folds).
UNTAGGED_ENV = "trading/Spot-v0"


def _kept_score(client: MlflowClient, run_id: str) -> float:
    """The best finite selection score of a trial: the checkpoint it kept."""
    scores = [m.value for m in client.get_metric_history(run_id, "selection_score") if math.isfinite(m.value)]
    return max(scores) if scores else float("nan")


def baselines_of(parent: Run) -> tuple[str, ...]:
    """The baselines a sweep's verdict judged the agent against, headline first: its env family's table, read from
    the env the sweep is tagged with, so the columns follow the family instead of naming one family's baselines."""
    family = envs.family(parent.data.tags.get("env", UNTAGGED_ENV))
    return tuple(baseline.name for baseline in family.baseline_table())


def row(client: MlflowClient, experiment: str, parent: Run) -> dict[str, object]:
    metrics = parent.data.metrics
    per_seed: dict[str, list[float]] = {}
    for child in child_runs(client, experiment_id(client, experiment), parent.info.run_id):
        per_seed.setdefault(child.data.tags.get("seed", "?"), []).append(_kept_score(client, child.info.run_id))
    means = [float(np.nanmean(v)) for v in per_seed.values()]
    out: dict[str, object] = {
        "hypothesis": experiment, "attempt": int(metrics.get("verdict/attempt", 0)),
        "configurations tried": int(metrics.get("verdict/configurations_tried", 0)),
        "effective": round(metrics.get("verdict/effective_trials", float("nan")), 1),
        "validation return": round(float(np.mean(means)), 2),
        "seed spread": round((max(means) - min(means)) / 2, 2),
        "agent test Sharpe": f"{metrics.get('verdict/agent_sharpe_mean', float('nan')):.2f} ± "
                             f"{metrics.get('verdict/agent_sharpe_std', float('nan')):.2f}",
    }
    for baseline in baselines_of(parent):
        dsr = metrics.get(f"verdict/dsr/{baseline}", float("nan"))
        wins = metrics.get(f"verdict/wins/{baseline}", float("nan"))
        supported = "supported" if metrics.get(f"verdict/supported/{baseline}") == 1.0 else "not"
        out[f"vs {baseline}: DSR, wins"] = f"{dsr:.2f}, {wins:.0f}/{metrics.get('verdict/folds', 0):.0f} ({supported})"
    out["PBO"] = round(metrics.get("verdict/pbo", float("nan")), 2)
    return out


def main(argv: list[str] | None = None) -> int:
    return exit_code(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.studies.hypotheses", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiments", nargs="+", help="MLflow experiment names, in the order tried")
    parser.add_argument("--tracking-uri", default="sqlite:///mlruns/mlflow.db")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args(argv)
    client = MlflowClient(args.tracking_uri)
    rows = [row(client, name, parent) for name in args.experiments
            for parent in sorted(parent_runs(client, experiment_id(client, name)), key=lambda r: r.info.start_time)]
    table = pd.DataFrame(rows).sort_values("attempt", kind="stable")
    if args.markdown:
        print("| " + " | ".join(table.columns) + " |")
        print("|" + "---|" * len(table.columns))
        for values in table.itertuples(index=False):
            print("| " + " | ".join(str(v) for v in values) + " |")
    else:
        print(table.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
