"""Which features mattered: per fold, the chosen agent's validation return drop when one feature is permuted.

The env family says how (`envs.abilities.ExplainsInputs`: its `importance`), on validation data
only. Here every seed of each fold's chosen configuration is asked, the drops are averaged over seeds, and the
table is feature x fold, and the mean over folds (mlflow_logging.py logs it with a plot under `importance/`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from envs.abilities import ExplainsInputs

if TYPE_CHECKING:
    from experiments.config.experiment import ExperimentConfig
    from experiments.results.trials import CheckpointReader, Trial

MEAN = "mean over folds"


def feature_importance(exp: "ExperimentConfig", chosen: dict[int, list["Trial"]],
                       reader: "CheckpointReader") -> pd.DataFrame | None:
    """Feature x fold: the drop in validation return when the feature is permuted, mean over the chosen
    configuration's seeds; None when the env family has no importance function."""
    if not isinstance(exp.family, ExplainsInputs):
        return None
    measure = exp.family.importance
    columns = {}
    for fold, trials in sorted(chosen.items()):
        drops = [measure(reader.policy(t.checkpoint, exp.spec), t.env_config)["drop_mean"]
                 for t in trials]
        columns[f"fold {fold}"] = pd.concat(drops, axis=1).mean(axis=1)
    table = pd.DataFrame(columns)
    table[MEAN] = table.mean(axis=1)
    return table.sort_values(MEAN, ascending=False)


def describe(table: pd.DataFrame, top: int = 5) -> str:
    shown = ", ".join(f"{name} {value:+.2f}" for name, value in table[MEAN].head(top).items())
    return f"features that mattered (validation return drop when permuted, mean over folds): {shown}"
