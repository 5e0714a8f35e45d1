"""Which features mattered: per fold, the chosen agent's validation return drop when one feature is permuted.

The env family says how (`envs.EnvFamily.importance`; trading: envs.trading.importance), on validation data
only. Here every seed of each fold's chosen configuration is asked, the drops are averaged over seeds, and the
table (feature x fold, and the mean over folds) and a plot go to the sweep's parent run under `importance/`.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib
import pandas as pd
from mlflow.tracking import MlflowClient

from experiments.results.policy import load_module_policy

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the headless backend)

if TYPE_CHECKING:
    from experiments.config.experiment import ExperimentConfig
    from experiments.results.trials import CheckpointReader, Trial

MEAN = "mean over folds"


def feature_importance(exp: "ExperimentConfig", chosen: dict[int, list["Trial"]],
                       reader: "CheckpointReader") -> pd.DataFrame | None:
    """Feature x fold: the drop in validation return when the feature is permuted, mean over the chosen
    configuration's seeds; None when the env family has no importance function."""
    measure = exp.family.importance_function()
    if measure is None:
        return None
    columns = {}
    for fold, trials in sorted(chosen.items()):
        drops = [measure(load_module_policy(reader.module(t.checkpoint), exp.spec.greedy), t.env_config)["drop_mean"]
                 for t in trials]
        columns[f"fold {fold}"] = pd.concat(drops, axis=1).mean(axis=1)
    table = pd.DataFrame(columns)
    table[MEAN] = table.mean(axis=1)
    return table.sort_values(MEAN, ascending=False)


def describe(table: pd.DataFrame, top: int = 5) -> str:
    shown = ", ".join(f"{name} {value:+.2f}" for name, value in table[MEAN].head(top).items())
    return f"features that mattered (validation return drop when permuted, mean over folds): {shown}"


def plot(table: pd.DataFrame, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(table) + 1.5))
    names = list(table.index)[::-1]
    ax.barh(names, table[MEAN].loc[names], color="steelblue", alpha=0.7, label=MEAN)
    for column in table.columns.drop(MEAN):
        ax.plot(table[column].loc[names], names, "o", markersize=3, label=column)
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_xlabel("drop in validation return when the feature is permuted (> 0: the agent uses it)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def log_importance(client: MlflowClient, run_id: str, table: pd.DataFrame, out_dir: Path, group: str | None) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    table.to_csv(out_dir / "importance.csv", index_label="feature")
    artifact_path = "importance" if group is None else f"importance/{group}"
    for path in (out_dir / "importance.csv", plot(table, out_dir / "importance.png")):
        client.log_artifact(run_id, str(path), artifact_path)
