"""`api.retrain` (and `python -m experiments.retrain CONF`): a challenger from fresh bars, a forward test against
the champion, a gate.

The data is the family's (`envs.abilities.Retrains`: one bars file for a single market, every file of a universe
cut at one calendar time); the steps below are the same for every family that retrains.

1. The forward window is the newest `retrain.forward_bars` bars of the data's calendar. With a champion (the
   version holding the `champion` alias), they must all come after the champion's data ended: neither model has
   trained or been selected on them; too few is refused with the number needed.
2. The challenger trains on the data up to the forward window (a copy cut there, in the run's storage):
   - `mode: incremental` warm-starts one trial from the champion's checkpoint (weights and optimizer state; the
     replay buffer starts empty) with the champion's searched values and seed, on the newest fold only, for
     `retrain.incremental.iterations` iterations;
   - `mode: full` runs the experiment's whole sweep from scratch.
   Either way it is the experiment's own pipeline (`api.run`, in this process): tracked, scored, with its verdict,
   and registered as a new version of the same model, which the run's result names.
3. Champion and challenger are replayed over the forward window as paper trading would (their served code:
   bars in, decisions out), next to the family's baselines; the gate (experiments.results.promotion) decides, and
   the version is tagged with its lineage and the gate's numbers before an alias moves. `--promote` overrides the
   gate and is recorded. With no champion yet, the first challenger becomes one only if its verdict supports an
   edge over every baseline; else nothing is promoted, said in one line, exit 0. A `--smoke-test` retrain never
   sets the champion alias on its own (only `--promote` does), said in one line.
4. With `--refit` (or `retrain.refit: true`), the champion after the gate (the challenger if it was promoted, else
   the champion it kept) is refit: its configuration trained through the newest bar, nothing held out, registered
   as its own version under the `refit` alias (experiments/api/refitting.py), which serves. Everything the refit
   needs is checked before the challenger trains. `--refit-only` refits the champion without a challenger (after a
   refit that failed, or a retrain without --refit). A champion promoted without a refit retires a `refit` alias
   that refits an older champion, so it never serves a configuration the gate replaced.

Its exit code is the challenger run's (experiments/records/exits.py), 1 when no challenger was registered, 3 when
the refit failed after it (1 for --refit-only).
"""
from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from rich.markup import escape

from envs.abilities import Retrains, able
from envs.errors import InputError, RunFault
from envs.retrain_data import ForwardReport, RetrainData
from experiments.api.options import RunOptions
from experiments.api.refit_plan import REFIT_ALIAS, data_overrides
from experiments.api.refitting import RefitPlan, plan_refit, train_refit
from experiments.api.result import RetrainResult, RunResult
from experiments.records.exits import ExitCode
from experiments.results.promotion import (
    CHAMPION,
    Decision,
    champion_of,
    excess_sharpes,
    judge,
    prior_excess_sharpes,
    record,
)
from experiments.shell import ended_by, runnable
from experiments.storage.filesystem import resolve_storage


@dataclass(frozen=True)
class RetrainOptions:
    """What `experiments.retrain`'s flags say beyond a run's: the retrain mode (else retrain.mode), whether the
    challenger is promoted whatever the gate says, whether the champion is refit after the gate (None: retrain.refit)
    or refit alone with no challenger, and whether to stop after checking the file, the champion, the forward window
    and the refit."""

    mode: str | None = None
    promote: bool = False
    check_only: bool = False
    refit: bool | None = None
    refit_only: bool = False
    run: RunOptions = field(default_factory=RunOptions)


@dataclass(frozen=True)
class RetrainPlaces:
    """Where a retrain writes what its trials read (the cut bars, the champion's checkpoint) so every node can read
    it: `folder` of the run's `storage` (--storage, storage:, RLPLATFORM_STORAGE, else under --output), from the
    local copies under `local`."""

    storage: Any
    folder: tuple[str, ...]
    local: Path

    @classmethod
    def of(cls, conf: Path, exp: Any, run_options: RunOptions) -> "RetrainPlaces":
        output = run_options.output
        return cls(resolve_storage(run_options.storage, exp.storage, output.resolve(), str(conf)),
                   (exp.name, "retrain"), output / exp.name / "retrain")


def retrain(conf: Path, overrides: Sequence[str], options: RetrainOptions, console: Any) -> RetrainResult:
    import mlflow

    from envs import FAMILIES
    from experiments.api.console_view import events_to_console
    from experiments.api.preflight import load
    from experiments.api.runs import run
    from experiments.results.registry import registered_name
    from experiments.tracking.runs import make_client

    run_options = options.run
    exp = load(conf, overrides, run_options.smoke_test)
    settings, env_config, family = exp.retrain, exp.environment.env_config, exp.family
    if not isinstance(family, Retrains):
        raise InputError(f"{conf}: {exp.environment.env} has no retrain (envs.abilities.Retrains: "
                         f"{', '.join(able(Retrains, FAMILIES))} have one): a retrain forward-tests champion and "
                         "challenger on the newest data of a file that grows; score this family's model on new data "
                         "with python -m experiments.transfer")
    if options.mode not in (None, "incremental", "full"):
        raise InputError(f"retrain mode {options.mode!r}: use incremental or full")
    clashing = [flag for flag, given in (("--mode", options.mode), ("--promote", options.promote),
                                         ("--no-refit", options.refit is False)) if given]
    if options.refit_only and clashing:
        raise InputError(f"--refit-only trains no challenger and refits the champion: leave out {', '.join(clashing)}")
    # The challenger's sweep runs with --set name=<the experiment's>, so the --set of its cut data does not rename
    # the model.
    name, _ = registered_name(exp.name, [*exp.overridden, "name"], env_config, None, exp.smoke_test, family.data_keys)
    client = make_client(exp.tracking_uri())
    mlflow.set_tracking_uri(exp.tracking_uri())
    champion = champion_of(client, name)
    data = family.retrain_data(env_config, str(conf))
    for note in data.notes:
        console.print(note, markup=False)
    if options.refit_only:
        return refit_alone(client, conf, overrides, exp, name, champion, data, options, console)
    refit = settings.refit if options.refit is None else options.refit
    mode = options.mode or settings.mode
    if champion is None and mode == "incremental":
        console.print(f"models:/{name}@champion does not exist yet: the first challenger comes from the full sweep",
                      markup=False)
        mode = "full"
    # Checked before the challenger trains: a refit that would be refused refuses the whole retrain.
    planned = plan_refit(client, conf, overrides, exp, champion, data, exp.smoke_test) if (
        refit and champion is not None) else None
    forward = data.forward_rows(settings.forward_bars, champion.tags if champion else None)
    index = data.index
    console.print(f"forward window: {index[forward.start]} .. {index[forward.stop - 1]} "
                  f"({len(forward)} bars, not trained or selected on by either model)", markup=False)
    result = RetrainResult(ExitCode.OK, champion_version=str(champion.version) if champion else None)
    if refit:
        console.print(f"refit after the gate: {planned.describe()}; the challenger's instead if it is promoted"
                      if planned else f"refit after the gate: the champion's configuration through {index[-1]}, "
                                      "if this retrain makes one", markup=False)
    if options.check_only:
        return result
    places = RetrainPlaces.of(conf, exp, run_options)
    train = data.cut(forward.start, places.storage, places.folder, places.local)
    group = f"retrain-{uuid.uuid4().hex[:8]}"
    # The user's --set first: the cut data and the model's name must win over them.
    challenger_sets = [*overrides, f"name={exp.name}", *data_overrides(train)]
    if mode == "incremental":
        challenger_sets += warm_start_overrides(client, exp, champion, places, console)
    console.print(f"challenger: {mode} retrain on the bars up to {index[forward.start - 1]}", markup=False)
    try:
        challenger_run = run(conf, challenger_sets, run_options.but(run_group=group),
                             on_event=events_to_console(console))
    except (InputError, RunFault) as error:  # its one line, then what it means for the retrain
        challenger_run = RunResult(exp.name, ended_by(error))
    result.challenger, result.exit_code = challenger_run, challenger_run.exit_code
    # A version under another name (the challenger's inputs mean something else than the champion's) is no
    # challenger of this model.
    registered = [model for model in challenger_run.models if model.uri and model.name == name]
    if not registered:
        console.print(f"no challenger registered (experiments.run exit {challenger_run.exit_code:d}): nothing "
                      "promoted", markup=False)
        result.exit_code = challenger_run.exit_code or ExitCode.FAILED
        return result
    challenger = client.get_model_version(registered[0].name, registered[0].version)
    result.challenger_version = str(challenger.version)
    decision, result.forward = decide(client, name, challenger, champion, data, forward, places.local, exp,
                                      options.promote, console)
    lineage = {"parent_version": str(champion.version) if champion else "none", "retrain/mode": mode,
               "forward_start": str(index[forward.start]), "forward_end": str(index[forward.stop - 1])}
    alias = record(client, name, challenger.version, decision, lineage)
    result.promoted, result.decision = alias == CHAMPION, decision.reason
    console.print(escape(f"models:/{name}/{challenger.version} -> @{alias}: {decision.reason}"))
    if alias == CHAMPION and not refit:
        console.print(runnable(f"serve it: python -m experiments.serve 'models:/{name}@champion'"), markup=False)
    if refit and alias != CHAMPION and champion is None:
        console.print("no champion: nothing to refit", markup=False)
    elif refit:
        try:
            if alias == CHAMPION:  # read again: its lineage tags (an incremental one's warm start) are written now
                planned = plan_refit(client, conf, overrides, exp, client.get_model_version(name, challenger.version),
                                     data, exp.smoke_test)
            result.refit_version = run_refit(client, conf, overrides, planned, data, places, options, console,
                                             group)
        except (InputError, RunFault) as error:  # the gate's outcome stands; the refit's one line says why not
            ended_by(error)
        result.exit_code = result.exit_code if result.refit_version else ExitCode.PARTIAL
    if alias == CHAMPION and result.refit_version is None:
        retire_stale_refit(client, name, str(challenger.version), console)
    return result


def refit_alone(client: Any, conf: Path, overrides: Sequence[str], exp: Any, name: str, champion: Any | None,
                data: RetrainData, options: RetrainOptions, console: Any) -> RetrainResult:
    """--refit-only: the champion refit through the newest bar with no challenger; nothing when the `refit` alias
    already holds that refit."""
    if champion is None:
        raise InputError(f"models:/{name}@champion does not exist: --refit-only refits the champion; make one with "
                         "python -m experiments.retrain CONF --refit (--promote forces it)")
    result = RetrainResult(ExitCode.OK, champion_version=str(champion.version))
    done, newest = current_refit(client, champion.name), data.index[-1]
    if (done is not None and done.tags.get("refit_of") == str(champion.version)
            and done.tags.get("refit/last_bar") == str(newest)):
        console.print(f"nothing to refit: models:/{champion.name}/{done.version} (@{REFIT_ALIAS}) refits version "
                      f"{champion.version} through {newest}, the newest bar", markup=False)
        result.refit_version = str(done.version)
        return result
    planned = plan_refit(client, conf, overrides, exp, champion, data, exp.smoke_test)
    if options.check_only:
        console.print(f"refit: {planned.describe()}", markup=False)
        return result
    result.refit_version = run_refit(client, conf, overrides, planned, data, RetrainPlaces.of(conf, exp, options.run),
                                     options, console, f"refit-{uuid.uuid4().hex[:8]}")
    result.exit_code = ExitCode.OK if result.refit_version else ExitCode.FAILED
    return result


def run_refit(client: Any, conf: Path, overrides: Sequence[str], planned: RefitPlan, data: RetrainData,
              places: RetrainPlaces, options: RetrainOptions, console: Any, group: str) -> str | None:
    """Train and register `planned` on a copy of `data` (all of it, kept in the storage as the challenger's cut
    is; the forward test's copies under `places.local` are reused); an incremental champion's refit starts from the
    checkpoint the champion started from."""
    whole = data.cut(len(data.index), places.storage, places.folder, places.local)
    warm_start = None
    if planned.recipe.warm_started_from:
        source = client.get_model_version(planned.recipe.name, planned.recipe.warm_started_from)
        warm_start = version_checkpoint(client, source, places)
    return train_refit(planned, conf, overrides, options.run, whole, warm_start, client, console, group)


def current_refit(client: Any, name: str) -> Any | None:
    """The version that holds the `refit` alias, or None."""
    from mlflow.exceptions import MlflowException

    try:
        return client.get_model_version_by_alias(name, REFIT_ALIAS)
    except MlflowException:
        return None


def retire_stale_refit(client: Any, name: str, champion: str, console: Any) -> None:
    """Remove the `refit` alias when it refits another version than the champion `champion`: a configuration the
    gate replaced must not serve."""
    stale = current_refit(client, name)
    if stale is None or stale.tags.get("refit_of") == champion:
        return
    client.delete_registered_model_alias(name, REFIT_ALIAS)
    console.print(f"models:/{name}@{REFIT_ALIAS} removed: version {stale.version} refits version "
                  f"{stale.tags.get('refit_of')}, no longer the champion; serve @champion until its refit "
                  f"(python -m experiments.retrain CONF --refit-only)", markup=False)


def warm_start_overrides(client: Any, exp: Any, champion: Any, places: RetrainPlaces, console: Any) -> list[str]:
    """--set overrides for one trial warm-started from the champion: its checkpoint (in the storage), searched
    values and seed, the newest fold only, the incremental budget and settings."""

    from experiments.config.protocol import FOLD_KEY

    run = client.get_run(champion.run_id)
    checkpoint = version_checkpoint(client, champion, places)
    pinned = [f"{key}={run.data.params[key]}" for key in exp.tune.search_space
              if key != FOLD_KEY and key in run.data.params]
    overrides = [*pinned, f"tune.seeds=[{run.data.params.get('seed', exp.tune.seeds[0])}]", "tune.num_samples=1",
                 f"warm_start={checkpoint}", "ensemble=null"]  # one trial: no ensemble to make of it
    if exp.evaluation.protocol and exp.evaluation.protocol.get("type") == "walk_forward":
        overrides.append("evaluation.protocol.folds=1")
    if not exp.smoke_test:
        overrides.append(f"tune.stop.training_iteration={exp.retrain.incremental.iterations}")
    overrides += [f"{key}={value}" for key, value in exp.retrain.incremental.settings.items()]
    console.print(f"warm start from models:/{champion.name}/{champion.version}'s checkpoint (weights and optimizer "
                  f"state; the replay buffer starts empty), with its {', '.join(pinned) or 'settings'} and seed",
                  markup=False)
    return overrides


def version_checkpoint(client: Any, version: Any, places: RetrainPlaces) -> str:
    """The RLlib checkpoint a model version was registered from (its sweep run's best_checkpoint artifact), downloaded
    once and put where every node can read it (the storage); its path or s3:// URI."""
    import pyarrow.fs as pafs

    storage, folder, local = places.storage, places.folder, places.local
    downloaded = local / f"champion-v{version.version}"
    if not (downloaded / "best_checkpoint").exists():
        local.mkdir(parents=True, exist_ok=True)
        client.download_artifacts(version.tags["parent_run_id"], "best_checkpoint", str(downloaded))
    checkpoint = str((downloaded / "best_checkpoint").resolve())
    if storage.is_local:
        return checkpoint
    target = storage.path(*folder, f"champion-v{version.version}")
    pafs.copy_files(checkpoint, target, source_filesystem=pafs.LocalFileSystem(),
                    destination_filesystem=storage.filesystem)
    return storage.uri_of(*folder, f"champion-v{version.version}")


def decide(client: Any, name: str, challenger: Any, champion: Any | None, data: RetrainData, forward: range,
           local: Path, exp: Any, force: bool, console: Any) -> tuple[Decision, pd.DataFrame]:
    """Forward-test (on copies under `local`) and judge the challenger (or, with no champion, read its verdict); and
    the forward table."""
    import mlflow

    models = {"challenger": mlflow.pyfunc.load_model(f"models:/{name}/{challenger.version}")}
    if champion is not None:
        models["champion"] = mlflow.pyfunc.load_model(f"models:/{name}/{champion.version}")
    report = data.forward_test(models, forward, local)
    return _judged(client, name, challenger, champion, report, exp, force, console), report.table


def _judged(client: Any, name: str, challenger: Any, champion: Any | None, report: ForwardReport, exp: Any,
            force: bool, console: Any) -> Decision:
    """The gate's decision on the forward test's `report`, printed with its table."""
    console.print(f"forward test {report.window}: each model's served code, the backtest's costs", markup=False)
    console.print(report.table[["total_return", "sharpe", "max_drawdown", "trades"]].round(4).to_string(),
                  markup=False, highlight=False)
    baselines = [b for b in report.table.index if b not in ("challenger", "champion")]
    metrics = client.get_run(challenger.tags["parent_run_id"]).data.metrics
    if champion is None:
        missing = [b for b in baselines if metrics.get(f"verdict/supported/{b}") != 1.0]
        numbers = {"forward_sharpe": float(report.table.loc["challenger", "sharpe"]),
                   **excess_sharpes(report.returns, "challenger", {b: b for b in baselines})}
        if not missing:
            return smoke_held(Decision(True, "first champion: its verdict supports an edge over every baseline",
                                       numbers), exp.smoke_test, force)
        reason = f"its verdict does not support an edge over {', '.join(missing)}"
        if force:
            return Decision(True, f"first champion, forced with --promote: {reason}", numbers, forced=True)
        console.print(f"no champion: {reason}: nothing promoted (--promote makes one anyway, recorded)", markup=False)
        return Decision(False, f"not promoted: {reason}", numbers)
    decision = judge(report.table, report.returns, "challenger", "champion", baselines, exp.retrain.gate,
                     prior_excess_sharpes(client, name, challenger.version, [CHAMPION, *baselines]),
                     metrics.get("verdict/pbo"))
    if force and not decision.promote:
        return Decision(True, f"forced with --promote ({decision.reason})", decision.numbers, forced=True)
    return smoke_held(decision, exp.smoke_test, force)


def smoke_held(decision: Decision, smoke_test: bool, force: bool) -> Decision:
    """A --smoke-test challenger is never promoted by its own numbers, whatever they are: two short iterations prove
    that the pipeline runs, not that a model is worth deploying. Only --promote (`force`), recorded as forced, makes
    one a champion. The reason is the one line retrain prints for the version."""
    if not smoke_test or not decision.promote or decision.forced:
        return decision
    held = "a --smoke-test run never sets the champion alias on its own"
    if force:
        return Decision(True, f"forced with --promote ({held}; {decision.reason})", decision.numbers, forced=True)
    return Decision(False, f"not promoted: {held} (--promote does, recorded); the gate alone would have said: "
                           f"{decision.reason}", decision.numbers)

