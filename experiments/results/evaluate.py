"""Score the best trial's policy out of sample, print the table, log it to MLflow with a plot.

Platform envs bring their own scorer (`envs.EnvFamily.evaluator`): trading backtests the test
period against buy-and-hold, flat and an SMA rule; test prioritization scores held-out CI
cycles. Any other Gymnasium id gets mean greedy return next to a uniformly random policy.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import matplotlib
import numpy as np
import pandas as pd
from mlflow.tracking import MlflowClient
from rich.console import Console
from rich.markup import escape
from rich.table import Table

import envs
from envs.report import EvaluationReport, Policy
from experiments.tracking.runs import log_metrics, sanitize_key

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the headless backend)


def _episode_returns(env_id: str, env_config: dict[str, Any], choose, episodes: int, seed: int) -> list[float]:
    env = envs.make_env(env_id, env_config)
    returns = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        done, total = False, 0.0
        while not done:
            obs, reward, terminated, truncated, _ = env.step(choose(obs))
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return returns


def evaluate_gym_policy(policy: Policy, env_id: str, env_config: dict[str, Any],
                        episodes: int = 10, seed: int = 10_000) -> EvaluationReport:
    """Greedy return over fresh seeds vs a random policy, for plain Gymnasium envs."""
    space = envs.make_env(env_id, env_config).action_space
    space.seed(seed)  # the random baseline's actions are the same on every run

    def greedy(observation: np.ndarray) -> Any:
        action = policy(np.asarray(observation)[None])[0]  # an index for a Discrete space, a vector for a Box
        return int(action) if isinstance(space, gym.spaces.Discrete) else action

    rows = {
        "agent": _episode_returns(env_id, env_config, greedy, episodes, seed),
        "random": _episode_returns(env_id, env_config, lambda o: space.sample(), episodes, seed),
    }
    table = pd.DataFrame({name: {"episode_return_mean": np.mean(r), "episode_return_std": np.std(r),
                                 "episodes": len(r)} for name, r in rows.items()}).T
    return EvaluationReport(
        title=f"{env_id}: {episodes} evaluation episodes on unseen seeds",
        table=table,
        agent_metrics={"eval/return_mean": float(np.mean(rows["agent"]))},
        series=pd.DataFrame(rows, index=pd.RangeIndex(episodes, name="episode")),
        series_label="episode return",
    )


def evaluate_checkpoint(policy: Policy, family: envs.EnvFamily, env_config: dict[str, Any]) -> EvaluationReport:
    scorer = family.evaluator()
    if scorer is None:
        return evaluate_gym_policy(policy, family.env_id, env_config)
    return scorer(policy, env_config)


def print_frame(console: Console, frame: pd.DataFrame, title: str, first_column: str = "") -> None:
    table = Table(title=escape(title))
    table.add_column(escape(first_column), no_wrap=True)
    for column in frame.columns:
        table.add_column(escape(str(column)), justify="right")
    for name, row in frame.iterrows():
        table.add_row(escape(str(name)), *(escape(format_cell(column, v)) for column, v in zip(frame.columns, row)),
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


def plot_series(report: EvaluationReport, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for column in report.series.columns:
        ax.plot(report.series.index, report.series[column], label=str(column),
                linewidth=2.0 if column == "agent" else 1.0)
    ax.set_title(report.title, fontsize=9)
    ax.set_ylabel(report.series_label)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
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
