"""A verdict on the terminal and in MLflow: tables, the verdict lines, per-fold equity curves, PBO plot.

Artifacts (under `verdict/`, or `verdict/<group>/` per coin): `per_fold.csv`, `summary.csv`,
`verdict.txt` (the printed lines), `oos_returns.parquet` (every trial's out-of-sample returns on one
time axis: the input of PBO), `folds.png` and `pbo.png`. Metrics: `verdict/*` on the parent run.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from mlflow.entities import RunTag
from mlflow.tracking import MlflowClient
from rich.console import Console
from rich.markup import escape

from envs.report import EvaluationReport
from experiments.plan.provenance import machine_line
from experiments.results.evaluate import print_frame
from experiments.results.trials import Trial
from experiments.results.verdict import AGENT, TABLE_METRICS, Verdict
from experiments.tracking.runs import log_metrics, sanitize_key

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the headless backend)


def fold_table(verdict: Verdict) -> pd.DataFrame:
    """The per-fold table for printing: one row per fold and strategy, the test window in the first row."""
    frame = verdict.per_fold.reset_index()
    first = ~frame["fold"].duplicated()
    label = [f"{row.fold}: {row.test_start:%Y-%m-%d}..{row.test_end:%Y-%m-%d}" if is_first else ""
             for row, is_first in zip(frame.itertuples(), first)]
    shown = frame[[m for m in TABLE_METRICS if m in frame]].copy()
    shown.insert(0, "strategy", frame["strategy"])
    shown.insert(0, "fold: test window", label)
    return shown.set_index("fold: test window")


def print_verdict(console: Console, verdict: Verdict, title: str) -> None:
    print_frame(console, fold_table(verdict), first_column="fold: test window",
                title=f"{title}: each fold's test part (agent: the configuration chosen on that fold's validation "
                      "part, mean over its seeds)")
    print_frame(console, verdict.summary, first_column="strategy",
                title="Across folds (agent: folds x seeds); agent_wins: folds where its Sharpe is higher; "
                      "dsr_of_excess: deflated Sharpe ratio of its returns in excess of the baseline")
    for fold, point in verdict.selected.items():
        if point != "default":
            console.print(escape(f"fold {fold}: chosen on validation: {point}"))
    console.print(escape(f"verdict over {verdict.scope()}:"))  # caveats are in [...]: not markup
    for line in verdict.lines():
        console.print(f"  [bold]{escape(line)}[/bold]")
    for edge in verdict.edges:
        if np.isfinite(edge.sharpe_star):
            console.print(f"  vs {edge.baseline}: excess Sharpe {edge.sharpe:.2f} (annualized) against "
                          f"{edge.sharpe_star:.2f} that luck reaches over {verdict.n_tried} configuration(s)")
    console.print(escape(f"  {machine_line()}"))


def plot_folds(verdict: Verdict, scored: list[tuple[Trial, EvaluationReport]], path: Path) -> Path:
    """Each fold's test equity: the chosen configuration's seeds and the baselines."""
    folds = sorted(verdict.selected)
    fig, axes = plt.subplots(len(folds), 1, figsize=(10, 2.6 * len(folds)), squeeze=False)
    for ax, fold in zip(axes[:, 0], folds):
        members = [(t, r) for t, r in scored if t.fold == fold and t.point == verdict.selected[fold]]
        for trial, report in members:
            ax.plot(report.series.index, report.series[AGENT], linewidth=1.6, label=f"agent seed {trial.seed}")
        baselines = members[0][1].series.drop(columns=[AGENT])
        for column in baselines:
            ax.plot(baselines.index, baselines[column], linewidth=0.9, label=column)
        ax.set_title(f"fold {fold}: {verdict.selected[fold]}", fontsize=9)
        ax.set_ylabel("equity")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_pbo(verdict: Verdict, path: Path) -> Path | None:
    """The distribution of the logit of the in-sample winner's out-of-sample rank over CSCV splits."""
    if verdict.pbo is None:
        return None
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.hist(verdict.pbo.logits, bins=30, color="steelblue", alpha=0.8)
    ax.axvline(0.0, color="black", linewidth=1)
    ax.set_xlabel("logit of the in-sample best trial's out-of-sample rank (< 0: below the median)")
    ax.set_ylabel("CSCV splits")
    ax.set_title(f"PBO {verdict.pbo.pbo:.2f} over {verdict.pbo.n_combos} splits, {verdict.returns.shape[1]} trials",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def log_verdict(client: MlflowClient, run_id: str, verdict: Verdict, scored: list[tuple[Trial, EvaluationReport]],
                out_dir: Path, group: str | None) -> None:
    """Write the verdict's files once and attach them and its metrics to `run_id` (the sweep's parent)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    verdict.per_fold.to_csv(out_dir / "per_fold.csv")
    verdict.summary.to_csv(out_dir / "summary.csv")
    lines = [f"verdict over {verdict.scope()}", *verdict.lines(), machine_line()]
    (out_dir / "verdict.txt").write_text("\n".join(lines) + "\n")
    verdict.returns.to_parquet(out_dir / "oos_returns.parquet")
    files = [out_dir / name for name in ("per_fold.csv", "summary.csv", "verdict.txt", "oos_returns.parquet")]
    files.append(plot_folds(verdict, scored, out_dir / "folds.png"))
    pbo_plot = plot_pbo(verdict, out_dir / "pbo.png")
    files += [pbo_plot] if pbo_plot else []
    artifact_path = "verdict" if group is None else f"verdict/{group}"
    for path in files:
        client.log_artifact(run_id, str(path), artifact_path)
    prefix = "" if group is None else f"{group}/"
    metrics = {sanitize_key(k.replace("verdict/", f"verdict/{prefix}", 1)): v for k, v in verdict.metrics().items()}
    log_metrics(client, run_id, metrics, step=0)
    client.set_tag(run_id, f"verdict{'' if group is None else '/' + group}", " | ".join(verdict.lines()[:1]))
    client.log_batch(run_id, tags=[RunTag(tag if group is None else tag.replace(".", f".{group}.", 1), value)
                                   for tag, value in verdict.tags().items()])  # per coin: verdict.SOL-USD.flat


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
