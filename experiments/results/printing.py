"""Every table and line a finished run prints: the out-of-sample report, the verdict, what features mattered, the
verdict per group. It reads what scoring returned (`experiments.results.scoring.Judgement`) and writes only to the
console; logging to MLflow is experiments/results/mlflow_logging.py, registering experiments/results/registry.py.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from envs.report import EvaluationReport
from experiments.plan.provenance import machine_line
from experiments.results.importance import describe as describe_importance
from experiments.results.report import fold_table, group_table
from experiments.results.scoring import GroupOutcome, Judgement
from experiments.results.verdict import Verdict


def print_partial(console: Console, partial: list[str]) -> None:
    """What is missing from the plan before any group is judged: failed trials, groups with no scored trial."""
    for line in partial:
        console.print(f"[yellow]partial: {escape(line)}[/yellow]")


def print_group(console: Console, group: str, outcome: GroupOutcome, single: bool) -> None:
    """One group's outcome: its whole verdict and what features mattered when it is the run's only group, else one
    verdict line; the out-of-sample report for families without a verdict."""
    if outcome.verdict is not None:
        if single:
            print_verdict(console, outcome.verdict, outcome.market)
        else:
            console.print(escape(f"{group} ({outcome.market}, {outcome.verdict.scope()}): "
                                 f"{outcome.verdict.lines()[0]}"))
    if outcome.importance is not None:
        if single:
            console.print(escape(describe_importance(outcome.importance)))
    else:
        print_report(console, outcome.report)
    if outcome.ensemble is not None:
        print_ensemble(console, group, outcome, single)


def print_ensemble(console: Console, group: str, outcome: GroupOutcome, single: bool) -> None:
    """The ensemble's lines beside the single chosen trial's: what it is, its test Sharpe over folds against the
    chosen configuration's, and its own verdict (a line per baseline; one line per group when there are several)."""
    ensemble = outcome.ensemble
    where = "" if single else f"{group}: "
    if ensemble.refused:
        console.print(f"[yellow]{escape(where + 'ensemble over ' + ensemble.over + ': ' + ensemble.refused)}"
                      "[/yellow]")
        return
    if ensemble.verdict is None:  # a family without returns: the deployed fold's ensemble on its test part
        console.print(escape(f"{where}ensemble over {ensemble.over}, {ensemble.deployed.describe()}, on its test "
                             "part:"))
        print_report(console, ensemble.deployed.report)
        return
    mean, spread = ensemble.sharpe()
    agent = outcome.verdict.summary.loc["agent"]
    console.print(escape(f"{where}ensemble over {ensemble.over} ({ensemble.deployed.describe()}): test Sharpe "
                         f"{mean:.3f} ± {spread:.3f} over {len(ensemble.folds)} fold(s); the single chosen trial's "
                         f"{agent['sharpe_mean']:.3f} ± {agent['sharpe_std']:.3f} over folds x seeds"))
    if not single:
        console.print(escape(f"{group} ensemble: {ensemble.verdict.lines()[0]}"))
        return
    console.print(escape(f"ensemble verdict over {ensemble.verdict.scope()}:"))
    for line in ensemble.verdict.lines():
        console.print(f"  [bold]ensemble {escape(line)}[/bold]")


def print_group_table(console: Console, judgement: Judgement, group_by: str) -> None:
    """With several verdicts, one table of them (the agent against the headline baseline per group)."""
    verdicts = judgement.verdicts()
    if len(verdicts) < 2:
        return
    headline = next(iter(verdicts.values())).edges[0].baseline
    name = group_by.split(".")[-1]
    print_frame(console, group_table(verdicts), first_column=name,
                title=f"Verdict per {name} (agent vs {headline} over its folds; an edge needs DSR >= "
                      f"{judgement.threshold:.4g}: 0.95 adjusted for {len(verdicts)} verdicts at once)")


def print_frame(console: Console, frame: pd.DataFrame, title: str, first_column: str = "") -> None:
    table = Table(title=escape(title))
    table.add_column(escape(first_column), no_wrap=True)
    for column in frame.columns:
        table.add_column(escape(str(column)), justify="right")
    for name, row in frame.iterrows():
        table.add_row(escape(str(name)),
                      *(escape(format_cell(column, v)) for column, v in zip(frame.columns, row, strict=True)),
                      style="bold" if name == "agent" else None)
    console.print(table)


def print_report(console: Console, report: EvaluationReport) -> None:
    print_frame(console, report.table, report.title, first_column="strategy")
    for note in report.notes:
        console.print(f"note: {note}", markup=False)


# Columns that are fractions of capital or of time: shown as percentages, as the README's tables show them.
PERCENT_COLUMNS = frozenset({"total_return", "max_drawdown", "fees_paid", "exposure", "target_exposure", "return_mean",
                             "return_std"})
# Columns that count things (a median or mean of counts may end in .5 or .75).
COUNT_COLUMNS = frozenset({"trades", "trades_median", "agent_trades", "results", "episodes", "cycles",
                           "cycles_with_failures", "paper_cycles", "agent_wins", "crashes", "agent_ahead"})


def format_cell(column: Any, value: Any) -> str:
    """A table cell as a reader expects it: -12.34% for a return, 18 (not 18.0000) for a count, 3
    decimals for a ratio such as a Sharpe ratio or a DSR; "-" for a missing value."""
    if isinstance(value, (float, np.floating, int, np.integer)) and not isinstance(value, bool):
        value = float(value)
        if np.isnan(value):
            return "-"
        if column in PERCENT_COLUMNS:
            return f"{value:.2%}"
        if column in COUNT_COLUMNS or (abs(value) >= 1e4 and value == int(value)):
            return f"{value:,.2f}".rstrip("0").rstrip(".")  # a median or mean of counts: 9.5, 23.75
        return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.3f}"
    return str(value)


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
    for note in verdict.notes():
        console.print(f"  note: {escape(note)}")
    for edge in verdict.edges:
        if np.isfinite(edge.sharpe_star):
            console.print(f"  vs {edge.baseline}: excess Sharpe {edge.sharpe:.2f} (annualized) against "
                          f"{edge.sharpe_star:.2f} that luck reaches over {verdict.n_tried} configuration(s)")
    console.print(escape(f"  {machine_line()}"))
