"""The refit (`experiments.retrain --refit`): the champion's configuration trained through the newest bar, registered
as its own version of the champion's model under the `refit` alias, which serves.

experiments/api/refit_plan.py says what a refit trains (the champion's recipe, the bars through now). `plan_refit`
checks all of it before anything trains, so a retrain asked to refit refuses bad input before its challenger trains;
`train_refit` then trains it as one Tune trial of the experiment's own RLlib config (tracked in MLflow as a run with
one child, as a sweep is), takes its last checkpoint (nothing is held out to select another on), and registers its
numpy policy with the family's input reader (the normalization of every bar it trained on). The version is tagged
with what was verified and what was not, and the alias moves last, so a killed refit never leaves it on a
half-recorded version.
"""
from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.markup import escape

from envs.errors import InputError
from envs.retrain_data import RetrainData
from experiments.api.options import RunOptions
from experiments.api.refit_plan import (
    REFIT_ALIAS,
    VERIFIED,
    Recipe,
    RefitWindow,
    configuration_changes,
    recipe_of,
    recipe_overrides,
    refit_window,
)
from experiments.config.experiment import ExperimentConfig
from experiments.shell import runnable

TRIAL_EXCLUDED = {"tune", "tracking", "description"}  # what a trial run's params leave out (as the sweep logs them)


@dataclass(frozen=True)
class RefitPlan:
    """A checked refit of one champion: its recipe, its window and the --set overrides that make the experiment
    train it (the data path and an incremental champion's warm start are the caller's)."""

    recipe: Recipe
    window: RefitWindow
    settings: tuple[str, ...]  # the warm-start settings of an incremental champion (retrain.incremental.settings)

    def describe(self) -> str:
        return (f"models:/{self.recipe.name}/{self.recipe.version}'s configuration ({self.recipe.describe()}) on "
                f"{self.window.describe()}")

    def overrides(self, data: dict[str, Any], warm_start: str | None = None) -> list[str]:
        """`data`: the env_config values that name the bars it trains on."""
        start = [f"warm_start={warm_start}"] if warm_start else []
        return [*recipe_overrides(self.recipe, self.window, data, self.recipe.name), *self.settings, *start]


def logged_params(exp: ExperimentConfig) -> dict[str, str]:
    """The settings of `exp` as its trial's run logs them (experiments.api.sweep_steps): dotted key -> text."""
    from experiments.tracking.runs import as_logged, flatten

    return as_logged(flatten(exp.model_dump(mode="json", exclude=TRIAL_EXCLUDED)))


def plan_refit(client: Any, conf: Path, overrides: Sequence[str], exp: ExperimentConfig, champion: Any,
               data: RetrainData, smoke_test: bool) -> RefitPlan:
    """Everything a refit of `champion` (a model version) on every bar of `data` needs, checked before anything
    trains: its recipe, its window, the experiment with the refit's settings, and that those settings are still the
    champion's (a changed file would refit another configuration than the one the gate judged)."""
    from experiments.api.preflight import load

    missing = [tag for tag in ("parent_run_id", "data_end") if tag not in champion.tags]
    if not champion.run_id or missing:
        raise InputError(f"models:/{champion.name}/{champion.version}: records no {', '.join(missing) or 'run'}: a "
                         "refit repeats how a sweep trained the champion, and this version was not registered by one "
                         "(python -m experiments.retrain CONF --mode full makes a champion that is)")
    run = client.get_run(champion.run_id)
    sweep = client.get_run(champion.tags["parent_run_id"])
    recipe = recipe_of(champion.name, str(champion.version), dict(champion.tags), dict(run.data.params),
                       dict(sweep.data.tags), exp.tune.search_space)
    window = refit_window(data.index, recipe.protocol, recipe.fold, recipe.data_end, data.label)
    incremental = exp.retrain.incremental.settings if recipe.warm_started_from else {}
    plan = RefitPlan(recipe, window, tuple(f"{key}={value}" for key, value in incremental.items()))
    refit = load(conf, [*overrides, *plan.overrides(data.current)], smoke_test)
    changed = configuration_changes(dict(run.data.params), logged_params(refit), data.current)
    if changed:
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        raise InputError(f"{conf}: {changed[0]}{more} since models:/{champion.name}/{champion.version} was trained: a "
                         "refit trains the champion's configuration, which the gate judged: put the setting back, "
                         "or retrain (--mode full) so the new one is judged first")
    return plan


def train_refit(plan: RefitPlan, conf: Path, overrides: Sequence[str], options: RunOptions, data: dict[str, Any],
                warm_start: str | None, client: Any, console: Any, run_group: str) -> str | None:
    """Train `plan` on `data` (the env_config values that name a copy of the bars it was planned on), register it
    and move the `refit` alias; the new version, or None when the trial failed (said in one line; the registry is
    left as it was)."""
    import ray

    from experiments.api.console_view import events_to_console
    from experiments.api.pipeline import silence_rllib_import_noise
    from experiments.api.preflight import preflight
    from experiments.plan.cluster import leftover_address_file, resolve_ray_target
    from experiments.plan.local_ray import start_ray
    from experiments.records.run_events import say
    from experiments.storage.filesystem import keep_credentials_out_of_ray
    from experiments.sweep.faults import bound_waits

    checked = preflight(conf, [*overrides, *plan.overrides(data, warm_start)], options, events_to_console(console),
                        fetch=True)
    target = resolve_ray_target(options.address, os.environ, leftover_address_file())
    console.print(escape(f"refit: {plan.describe()}"))
    silence_rllib_import_noise()
    bound_waits(os.environ)
    keep_credentials_out_of_ray(os.environ, not target.starts_local, console.print)
    # A retrain that joined a cluster for its challenger is still connected to it; a local Ray was shut down.
    started = False if ray.is_initialized() else start_ray(target, options.local_ray(),
                                                           say(events_to_console(console), highlight=False))
    try:
        return _train_and_register(plan, checked, options, client, console, run_group)
    finally:
        if started:
            ray.shutdown()


def _train_and_register(plan: RefitPlan, checked: Any, options: RunOptions, client: Any, console: Any,
                        run_group: str) -> str | None:
    import torch

    from experiments.api.console_view import events_to_console
    from experiments.api.sweep_steps import run_user, trial_data, trial_params
    from experiments.plan.provenance import git_commit, machine_tags
    from experiments.records.exits import MLFLOW_FAILED, MLFLOW_FINISHED, MLFLOW_KILLED
    from experiments.sweep.progress import TrialProgress
    from experiments.sweep.tuner import fit, make_tuner
    from experiments.tracking.runs import (
        MlflowTrialCallback,
        close_open_children,
        open_experiment,
        run_of_trial,
        trial_tags,
    )

    torch.set_num_threads(1)  # the driver's torch must not fight the trial for the cores
    exp, storage, recipe = checked.exp, checked.storage, plan.recipe
    tracking_uri = exp.tracking_uri()
    tags = {"mlflow.user": run_user(), "git_commit": git_commit(), "hardware/preset": checked.preset.name,
            "env": exp.environment.env, "algorithm": exp.algorithm,
            **exp.family.run_tags(exp.environment.env_config), **machine_tags(),
            "smoke_test": str(exp.smoke_test), "run_group": run_group}
    experiment_id = open_experiment(client, exp.tracking.experiment_name or exp.name, tracking_uri)
    parent = client.create_run(experiment_id, run_name=f"{exp.name}-refit-{time.strftime('%Y%m%d-%H%M%S')}",
                               tags={**tags, "role": "refit", "refit_of": recipe.version}).info.run_id
    out_dir = options.output.resolve() / exp.name / parent
    tracker = MlflowTrialCallback(tracking_uri, experiment_id, parent,
                                  trial_params(exp, checked.plan, checked.params.search_keys), tags,
                                  trial_tags(exp.family.tag_keys), lambda trial: trial_data(exp.family, trial))
    tune_dir = storage.path(exp.name, "refit", f"{exp.name}-refit-{time.strftime('%Y%m%d-%H%M%S')}-{parent[:6]}")
    tuner = make_tuner(exp, checked.plan, checked.params, storage, tune_dir,
                       [tracker, TrialProgress(events_to_console(console), checked.params.search_keys)])
    status = MLFLOW_FAILED
    try:
        results, interrupted = fit(tuner, out_dir / "tune.log")
        console.print()
        if interrupted:
            status = MLFLOW_KILLED
            raise KeyboardInterrupt
        [result] = list(results)
        if result.error is not None or result.checkpoint is None:
            why = str(result.error).strip().splitlines()[-1][:300] if result.error else "no checkpoint was saved"
            console.print(escape(f"refit failed: {why}; Tune's log: {out_dir / 'tune.log'}; nothing registered, the "
                                 f"aliases are as the gate left them: refit again with python -m experiments.retrain "
                                 "CONF --refit-only"))
            return None
        trial_run = run_of_trial(client, experiment_id, parent, str(result.metrics.get("trial_id", "")))
        version = _register(plan, checked, result, trial_run or parent, parent, out_dir, client, console)
        status = MLFLOW_FINISHED
        return version
    finally:
        close_open_children(client, experiment_id, parent, status)
        client.set_terminated(parent, status=status)


def _register(plan: RefitPlan, checked: Any, result: Any, run_id: str, parent: str, out_dir: Path, client: Any,
              console: Any) -> str:
    """Register the trial's last checkpoint as a version of the champion's model, tag it, then move the alias."""
    from experiments.plan.provenance import git_commit
    from experiments.records.checkpoints import ScoredCheckpoint
    from experiments.results.registry import model_meaning, name_for_meaning, raw_inputs_reader, register_policy
    from experiments.results.trials import CheckpointReader

    exp, recipe, window = checked.exp, plan.recipe, plan.window
    env_config = dict(result.config.get("env_config") or {})
    observations, action_space = checked.examples[0]
    meaning = model_meaning(exp.algorithm, observations.shape[1:], action_space, env_config)
    name, conflict = name_for_meaning(client, recipe.name, meaning)
    if conflict:
        raise InputError(f"models:/{recipe.name}: the refit's inputs mean something else than the champion's "
                         f"({conflict.split('(', 1)[-1].rstrip(')')}): nothing registered")
    reader = CheckpointReader(checked.storage, out_dir / "downloaded")
    checkpoint = ScoredCheckpoint(result.checkpoint.path, math.nan, recipe.iterations)
    verified = VERIFIED.format(champion=recipe.version)
    tags = {"smoke_test": str(exp.smoke_test), "experiment": exp.name, "algorithm": exp.algorithm,
            "env": exp.environment.env, "data": exp.family.data_label(env_config), "fold": "refit",
            "seed": recipe.seed, "parent_run_id": parent, "git_commit": git_commit(), **meaning,
            "retrain/mode": "refit", "parent_version": recipe.version, "refit_of": recipe.version,
            "refit/first_bar": str(window.first_bar), "refit/last_bar": str(window.last_bar),
            "refit/bars": str(window.bars), "refit/iterations": str(recipe.iterations),
            "refit/warm_start": recipe.warm_started_from or "none", "verified": verified}
    uri = register_policy(exp.tracking_uri(), run_id, reader.numpy_policy(checkpoint, exp.spec), name,
                          observations, tags, raw_inputs_reader(exp.family, env_config), exp.family.env_id)
    version = uri.rsplit("/", 1)[-1]
    client.log_artifacts(parent, str(reader.whole(checkpoint)), "final_checkpoint")
    client.set_tag(parent, "refit_version", version)
    client.update_model_version(name, version, description=f"refit of version {recipe.version}: {plan.describe()}; "
                                                           f"verified: {verified}")
    client.set_registered_model_alias(name, REFIT_ALIAS, version)  # last: the alias never names a half-recorded one
    console.print(escape(f"models:/{name}/{version} -> @{REFIT_ALIAS}: version {recipe.version}'s configuration "
                         f"trained through {window.last_bar}; {verified}"))
    console.print(runnable(f"serve it: python -m experiments.serve 'models:/{name}@{REFIT_ALIAS}'"), markup=False)
    return version
