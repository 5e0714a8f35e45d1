"""Everything a finished run logs to MLflow: each trial's test scores on its child run, the chosen trial's
out-of-sample report, the verdict's files and metrics, what features mattered, the table per group, and the attempt
in the trials ledger. It reads what scoring returned and prints nothing (experiments/results/printing.py prints).
Plots are drawn on `matplotlib.figure.Figure`s, not pyplot: a run in a notebook (`api.run`) leaves the notebook's
plotting backend as it was.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from mlflow.entities import RunTag
from mlflow.tracking import MlflowClient

from envs.report import EvaluationReport
from experiments.plan.provenance import machine_line
from experiments.records.learning_curves import CurveJudgement
from experiments.results.importance import MEAN
from experiments.results.report import group_table
from experiments.results.scoring import Judgement
from experiments.results.trials import ALL, Trial
from experiments.results.trials_ledger import LedgerRun
from experiments.results.verdict import AGENT, Verdict
from experiments.tracking.runs import log_metrics, run_of_trial, sanitize_key

if TYPE_CHECKING:
    from experiments.storage.sweep_state import SweepState



def log_judgement(client: MlflowClient, state: "SweepState", judgement: Judgement, out_dir: Path,
                  ledger: LedgerRun | None) -> dict[str, str | None]:
    """Log every group's scores, report, verdict and importance to the sweep's runs (the files also land in
    `out_dir`), and record each verdict's attempt in the trials ledger. Returns each group's chosen trial's run id
    (None when Tune's callback made none), which registration attaches the model to."""
    chosen_runs: dict[str, str | None] = {}
    for group, outcome in judgement.groups.items():
        named = None if group == ALL else group
        suffix = "" if named is None else f"/{named}"
        for trial, report in outcome.scored:  # each child run gets its own test-part scores and its curve's judgement
            run_id = run_of_trial(client, state.experiment_id, state.parent_run_id, trial.trial_id)
            if run_id:
                log_metrics(client, run_id, {**report.agent_metrics, **curve_metrics(trial.curve)}, step=0)
                if trial.curve is not None:
                    client.set_tag(run_id, "curve", trial.curve.word())
        chosen_run = run_of_trial(client, state.experiment_id, state.parent_run_id, outcome.chosen.trial_id)
        chosen_runs[group] = chosen_run
        if outcome.verdict is not None:
            log_verdict(client, state.parent_run_id, outcome.verdict, outcome.scored, out_dir / f"verdict{suffix}",
                        named)
            if ledger is not None and outcome.ledger_key is not None:
                ledger.record(outcome.ledger_key, outcome.points, outcome.verdict.returns)
        if outcome.importance is not None:
            log_importance(client, state.parent_run_id, outcome.importance, out_dir / f"importance{suffix}", named)
        log_report(client, [r for r in (state.parent_run_id, chosen_run) if r], outcome.report,
                   out_dir / f"evaluation{suffix}", artifact_path=f"evaluation{suffix}",
                   parent_prefix=f"eval{suffix}", parent_run_id=state.parent_run_id)
    verdicts = judgement.verdicts()
    if len(verdicts) > 1:
        path = out_dir / "per_group.csv"
        group_table(verdicts).to_csv(path)
        client.log_artifact(state.parent_run_id, str(path), "verdict")
    return chosen_runs


def curve_metrics(curve: CurveJudgement | None) -> dict[str, float]:
    """A trial's learning-curve judgement as metrics of its run: curve_flattened 1/0 (a curve too short to tell is 0)
    and iterations_since_best (absent when no iteration was scored)."""
    if curve is None:
        return {}
    metrics = {"curve_flattened": float(curve.flattened)}
    if curve.since_best is not None:
        metrics["iterations_since_best"] = float(curve.since_best)
    return metrics


def plot_series(report: EvaluationReport, path: Path) -> Path:
    fig = Figure(figsize=(10, 4.5))
    ax = fig.subplots()
    for column in report.series.columns:
        ax.plot(report.series.index, report.series[column], label=str(column),
                linewidth=2.0 if column == "agent" else 1.0)
    ax.set_title(report.title, fontsize=9)
    ax.set_ylabel(report.series_label)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def log_report(client: MlflowClient, run_ids: list[str], report: EvaluationReport, out_dir: Path,
               artifact_path: str = "evaluation", parent_prefix: str = "eval", parent_run_id: str | None = None
               ) -> None:
    """Write the table (CSV), per-step series (CSV) and plot (PNG) once; attach them and the metrics to
    each run. On `parent_run_id` the metric prefix `eval` becomes `parent_prefix` (e.g. eval/SOL-USD),
    so one parent run can hold the scores of several groups."""
    out_dir.mkdir(parents=True, exist_ok=True)
    table_path = out_dir / "evaluation.csv"
    report.table.to_csv(table_path)
    series_path = out_dir / "series.csv"
    report.series.to_csv(series_path)
    plot_path = plot_series(report, out_dir / "evaluation.png")
    # Undefined scores (e.g. APFD of a dataset whose test cycles have no failure) are NaN: not logged.
    metrics = {sanitize_key(k): float(v) for k, v in report.agent_metrics.items() if np.isfinite(v)}
    for run_id in run_ids:
        keys = metrics
        if run_id == parent_run_id:
            keys = {parent_prefix + k.removeprefix("eval"): v for k, v in metrics.items()}
        log_metrics(client, run_id, keys, step=0)
        for path in (table_path, series_path, plot_path):
            client.log_artifact(run_id, str(path), artifact_path)


def plot_folds(verdict: Verdict, scored: list[tuple[Trial, EvaluationReport]], path: Path) -> Path:
    """Each fold's test equity: the chosen configuration's seeds and the baselines."""
    folds = sorted(verdict.selected)
    fig = Figure(figsize=(10, 2.6 * len(folds)))
    axes = fig.subplots(len(folds), 1, squeeze=False)
    for ax, fold in zip(axes[:, 0], folds, strict=True):
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
    return path


def plot_pbo(verdict: Verdict, path: Path) -> Path | None:
    """The distribution of the logit of the in-sample winner's out-of-sample rank over CSCV splits."""
    if verdict.pbo is None:
        return None
    fig = Figure(figsize=(7, 3.5))
    ax = fig.subplots()
    ax.hist(verdict.pbo.logits, bins=30, color="steelblue", alpha=0.8)
    ax.axvline(0.0, color="black", linewidth=1)
    ax.set_xlabel("logit of the in-sample best trial's out-of-sample rank (< 0: below the median)")
    ax.set_ylabel("CSCV splits")
    ax.set_title(f"PBO {verdict.pbo.pbo:.2f} over {verdict.pbo.n_combos} splits, {verdict.returns.shape[1]} trials",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def log_verdict(client: MlflowClient, run_id: str, verdict: Verdict, scored: list[tuple[Trial, EvaluationReport]],
                out_dir: Path, group: str | None) -> None:
    """Write the verdict's files once and attach them and its metrics to `run_id` (the sweep's parent)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    verdict.per_fold.to_csv(out_dir / "per_fold.csv")
    verdict.summary.to_csv(out_dir / "summary.csv")
    lines = [f"verdict over {verdict.scope()}", *verdict.lines(), *(f"note: {n}" for n in verdict.notes()),
             machine_line()]
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


def plot_importance(table: pd.DataFrame, path: Path) -> Path:
    fig = Figure(figsize=(8, 0.35 * len(table) + 1.5))
    ax = fig.subplots()
    names = list(table.index)[::-1]
    ax.barh(names, table[MEAN].loc[names], color="steelblue", alpha=0.7, label=MEAN)
    for column in table.columns.drop(MEAN):
        ax.plot(table[column].loc[names], names, "o", markersize=3, label=column)
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_xlabel("drop in validation return when the feature is permuted (> 0: the agent uses it)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def log_importance(client: MlflowClient, run_id: str, table: pd.DataFrame, out_dir: Path, group: str | None) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    table.to_csv(out_dir / "importance.csv", index_label="feature")
    artifact_path = "importance" if group is None else f"importance/{group}"
    for path in (out_dir / "importance.csv", plot_importance(table, out_dir / "importance.png")):
        client.log_artifact(run_id, str(path), artifact_path)
