"""A verdict's tables as data, for the printer, the MLflow log and `RunResult` alike: each fold's test part per
strategy, and one row per group (coin). Printing is experiments/results/printing.py; the files and plots logged to
MLflow (`verdict/per_fold.csv`, `summary.csv`, `verdict.txt`, `oos_returns.parquet`, `folds.png`, `pbo.png`) are
experiments/results/mlflow_logging.py.
"""
from __future__ import annotations

import pandas as pd

from experiments.results.verdict import AGENT, TABLE_METRICS, Verdict


def fold_table(verdict: Verdict) -> pd.DataFrame:
    """The per-fold table for printing: one row per fold and strategy, the test window in the first row."""
    frame = verdict.per_fold.reset_index()
    first = ~frame["fold"].duplicated()
    label = [f"{row.fold}: {row.test_start:%Y-%m-%d}..{row.test_end:%Y-%m-%d}" if is_first else ""
             for row, is_first in zip(frame.itertuples(), first, strict=True)]
    shown = frame[[m for m in TABLE_METRICS if m in frame]].copy()
    shown.insert(0, "strategy", frame["strategy"])
    shown.insert(0, "fold: test window", label)
    return shown.set_index("fold: test window")


def group_table(outcomes: dict[str, Verdict]) -> pd.DataFrame:
    """One row per group (e.g. coin): the agent against the family's headline baseline (the first its report lists)
    and the verdict."""
    rows = {}
    for group, verdict in outcomes.items():
        summary = verdict.summary
        edge = verdict.edges[0]
        rows[group] = {"agent_sharpe": summary.loc[AGENT, "sharpe_mean"],
                       "agent_sharpe_std": summary.loc[AGENT, "sharpe_std"],
                       f"{edge.baseline}_sharpe": summary.loc[edge.baseline, "sharpe_mean"],
                       "agent_trades": summary.loc[AGENT, "trades_median"],
                       "wins": f"{edge.wins}/{edge.folds}", "dsr": edge.dsr,
                       "pbo": verdict.pbo.pbo if verdict.pbo is not None else float("nan"),
                       "edge": "supported" if edge.supported else "not supported"}
    return pd.DataFrame.from_dict(rows, orient="index")
