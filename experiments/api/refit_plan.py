"""What a refit trains: the champion's configuration, seed and training budget, on every bar from its first training
bar through the newest one, nothing held out. Values only (no Ray, no MLflow calls): experiments/api/refitting.py
trains and registers it.

A walk-forward fold keeps its newest bars for validation and test, so the champion never trained on them: it is at
least that stale when it serves. Its configuration was chosen on validation bars and forward-tested on bars it never
saw; the refit repeats that configuration's training through the newest bar. Its weights are then tested on nothing
out of sample, which its version says (`VERIFIED`).
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd
import yaml

from envs.errors import InputError
from envs.splits import Protocol
from experiments.config.protocol import FOLD_KEY

REFIT_ALIAS = "refit"
VERIFIED = ("configuration chosen on validation bars and forward-tested on held-out bars (version {champion}); "
            "refit weights not tested out of sample")
ENV_CONFIG = "environment.env_config."
PROTOCOL_PARAM = f"{ENV_CONFIG}protocol."
# The settings that make a configuration (as its trial run logged them), and those among them that say only how its
# bars were cut, which a refit changes on purpose (where the bars are, the data's own keys, is the caller's).
CONFIGURATION = ("algorithm", "environment.env", ENV_CONFIG, "training.", "rl_module.", "reporting.")
NOT_CONFIGURATION = tuple(f"{ENV_CONFIG}{key}" for key in ("protocol", "fold", "feature_store", "split"))


@dataclass(frozen=True)
class RefitWindow:
    """The bars a refit trains on: rows [first_row, first_row + bars) of the data, the newest included, and the
    env_config protocol that cuts them so (envs.splits, type refit)."""

    first_bar: pd.Timestamp
    last_bar: pd.Timestamp
    first_row: int
    bars: int
    protocol: dict[str, Any]

    def describe(self) -> str:
        return f"{self.first_bar:%Y-%m-%d %H:%M} .. {self.last_bar:%Y-%m-%d %H:%M} ({self.bars:,} bars, none held out)"


def refit_window(index: pd.DatetimeIndex, protocol: Protocol, fold: int, trained_through: pd.Timestamp,
                 source: str) -> RefitWindow:
    """From the first bar the champion trained on (its fold `fold` of `protocol`, cut from the bars it had: those up
    to `trained_through`, the last bar of its data) through the last bar of `index`. An expanding window starts at
    the first bar; a rolling one at the same bar as the champion's, so it holds every bar since."""
    had = int(index.searchsorted(trained_through, side="right"))
    if had == 0 or index[had - 1] != trained_through:
        raise InputError(f"{source}: does not hold {trained_through}, the last bar of the champion's data: a refit "
                         "trains the champion's configuration on the bars it came from, with the newer ones appended "
                         "(python -m experiments.data update)")
    first = protocol.fold(had, fold, source=f"{source}: the champion's protocol").train[0]
    bars = len(index) - first
    cut = {"type": "refit", "train": protocol.train, **({"train_size": bars} if protocol.train == "rolling" else {})}
    return RefitWindow(index[first], index[-1], first, bars, cut)


@dataclass(frozen=True)
class Recipe:
    """How the champion was trained, which its refit repeats: its searched values and seed, the iterations its
    registered checkpoint had (the budget that made its weights: no validation picks a checkpoint in a refit), how
    its data was cut, and the version whose checkpoint it was warm-started from (an incremental champion)."""

    name: str
    version: str
    searched: dict[str, str]
    seed: str
    iterations: int
    protocol: Protocol
    fold: int
    data_end: pd.Timestamp
    warm_started_from: str | None = None

    def describe(self) -> str:
        values = ", ".join(f"{key}={value}" for key, value in self.searched.items())
        start = f", warm-started from version {self.warm_started_from}'s checkpoint" if self.warm_started_from else ""
        return f"{values + ', ' if values else ''}seed {self.seed}, {self.iterations} iteration(s){start}"


def recipe_of(name: str, version: str, tags: dict[str, str], params: dict[str, str], sweep_tags: dict[str, str],
              search_keys: Iterable[str]) -> Recipe:
    """The recipe of model version `version` of `name` from its tags, its trial run's params and its sweep run's
    tags; InputError when they do not record it."""
    where = f"models:/{name}/{version}"
    iterations = sweep_tags.get("best_checkpoint_iteration", "")
    if not iterations.isdigit() or int(iterations) < 1:
        raise InputError(f"{where}: its sweep run records no best_checkpoint_iteration, the training budget a refit "
                         "repeats: make a champion that records it (python -m experiments.retrain CONF --mode full)")
    searched = {key: params[key] for key in search_keys if key != FOLD_KEY and key in params}
    warm = tags.get("parent_version") if tags.get("retrain/mode") == "incremental" else None
    return Recipe(name, version, searched, params.get("seed", "0"), int(iterations), logged_protocol(params),
                  int(tags.get("fold", "0")), pd.Timestamp(tags["data_end"]), warm)


def logged_protocol(params: dict[str, str]) -> Protocol:
    """The protocol a trial's env cut its data with, from its logged params (one per key, as text); the holdout
    default when it logged none."""
    logged = {key.removeprefix(PROTOCOL_PARAM): None if value == "None" else yaml.safe_load(value)
              for key, value in params.items() if key.startswith(PROTOCOL_PARAM)}
    return Protocol.from_dict(logged or None, "the champion's environment.env_config.protocol")


def data_overrides(data: dict[str, Any]) -> list[str]:
    """--set overrides of env_config values that name a run's data (envs.retrain_data.RetrainData.cut): a path as
    it is, a list of them as a YAML flow list."""
    return [f"{ENV_CONFIG}{key}={value if isinstance(value, str) else json.dumps(value)}"
            for key, value in data.items()]


def recipe_overrides(recipe: Recipe, window: RefitWindow, data: dict[str, Any], name: str) -> list[str]:
    """--set overrides that make an experiment train `recipe` on `window`'s bars of `data` (the env_config values
    that name them): one trial, no evaluation (nothing is held out to evaluate on), the champion's searched values
    and seed, its iterations, one checkpoint at the end, no ensemble (one trial is one member). An incremental
    champion's warm start and settings are added by the caller, which fetches the checkpoint."""
    iterations = recipe.iterations
    return [f"name={name}", *data_overrides(data), "evaluation.protocol=null",
            "evaluation.evaluation_interval=null", f"{ENV_CONFIG}protocol={json.dumps(window.protocol)}",
            *(f"{key}={value}" for key, value in recipe.searched.items()),
            f"tune.seeds=[{recipe.seed}]", "tune.num_samples=1", "tune.search_alg=random", "tune.scheduler.type=fifo",
            f"tune.stop={{training_iteration: {iterations}}}", f"tune.checkpoint.frequency={iterations}",
            "tune.checkpoint.select.after_exploration=false", "ensemble=null",
            "tune.plateau=null"]  # the champion's budget, whole: no validation curve to stop on


def configuration_changes(logged: dict[str, str], now: dict[str, str], data_keys: Iterable[str]) -> list[str]:
    """The configuration settings whose value in `now` (a refit's trial params, as they would be logged) differs from
    `logged` (the champion's), as 'key logged -> now'; the env_config's `data_keys` (where the bars are) are not
    configuration. Keys only one side has (a setting added to the platform since) are left out."""
    moved = (*NOT_CONFIGURATION, *(f"{ENV_CONFIG}{key}" for key in data_keys))
    keys = sorted(key for key in set(logged) & set(now) if key.startswith(CONFIGURATION) and not key.startswith(moved))
    return [f"{key} {logged[key]} -> {now[key]}" for key in keys if logged[key] != now[key]]
