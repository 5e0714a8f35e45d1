"""One sweep's own steps, from opening to registering: its MLflow parent run and Tune folder (new, or the interrupted
sweep's again with --resume), Tune's training with a tracked run per trial, the out-of-sample judgement, and each
group's verdict logged and its model registered.

Apart from experiments/api/pipeline.py, which drives a run around these steps (the driver made ready, Ray joined or
started, faults classified, every MLflow run closed) and owns how the run ends. These steps own none of that: each
returns what it found (an `OpenSweep`, a `SweepEnd`, an exit code), raises what went wrong for the pipeline to
classify, and prints nothing: each line is an event for `emit` (experiments/api/events.py). The pipeline imports this
module; nothing here imports it back.
"""
from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from mlflow.tracking import MlflowClient
from rich.markup import escape

from envs import EnvFamily
from envs.abilities import Backtests
from envs.datasets import DataPart
from experiments.api.events import GroupJudged, GroupsJudged, Partial, RunEvent
from experiments.api.options import RunRequest, rerun_command
from experiments.api.preflight import Checked
from experiments.config.checks import ENV_CONFIG_PREFIX
from experiments.config.experiment import ExperimentConfig
from experiments.config.protocol import FOLD_KEY
from experiments.hardware import ResourcePlan, check_live_cluster
from experiments.hardware.plan import duration
from experiments.plan.provenance import git_commit, machine_tags
from experiments.records.exits import MLFLOW_FAILED, MLFLOW_FINISHED, MLFLOW_KILLED, ExitCode
from experiments.records.run_events import Line, OnEvent, Phase, say, show_status
from experiments.storage.sweep_state import FAILED as SWEEP_FAILED
from experiments.storage.sweep_state import FINISHED as SWEEP_FINISHED
from experiments.storage.sweep_state import INTERRUPTED, PARTIAL, SweepState
from experiments.sweep.faults import what_failed
from experiments.tracking.comparison_view import comparison_columns, save_view
from experiments.tracking.runs import (
    MlflowTrialCallback,
    flatten,
    log_params,
    open_experiment,
    trial_tags,
    ui_lines,
)

if TYPE_CHECKING:  # what judging returns; imported where the sweep is judged
    from experiments.results.registry import Registered
    from experiments.results.scoring import GroupOutcome, Judgement
    from experiments.results.trials import CheckpointReader
    from experiments.results.trials_ledger import LedgerRun


def run_user() -> str:
    """Who the runs belong to in MLflow's UI: the tracking server's login, else MLflow's own guess (the OS
    user), as `mlflow.start_run` would tag it."""
    from mlflow.tracking.context.registry import resolve_tags

    return os.environ.get("MLFLOW_TRACKING_USERNAME") or resolve_tags().get("mlflow.user", "unknown")


def trial_params(exp: ExperimentConfig, plan: ResourcePlan, search_keys: dict[str, str]):
    static = flatten(exp.model_dump(mode="json", exclude={"tune", "tracking", "description"}))

    def params(trial: Any) -> dict[str, Any]:
        values = dict(static)
        for flat_key, value in (trial.evaluated_params or {}).items():
            values[search_keys.get(flat_key, flat_key)] = value
        values["seed"] = trial.config.get("seed")
        return {**values, **plan.as_params()}

    return params


def trial_data(family: EnvFamily, trial: Any) -> list[DataPart]:
    """The parts of the data a trial reads (its own env_config: its fold, its coin)."""
    return family.data_parts(dict(trial.config.get("env_config") or {}))


def _open_parent(client: MlflowClient, exp: ExperimentConfig, experiment_id: str, tags: dict[str, str],
                 plan: ResourcePlan, experiment_dir: Path) -> tuple[str, Path]:
    """The sweep's parent run, with the resolved experiment as params and artifact; and its output folder."""
    parent = client.create_run(experiment_id, run_name=f"{exp.name}-{time.strftime('%Y%m%d-%H%M%S')}",
                               tags={**tags, "role": "sweep"})
    out_dir = experiment_dir / parent.info.run_id
    out_dir.mkdir(parents=True, exist_ok=True)
    resolved = out_dir / "experiment.yaml"
    resolved.write_text(yaml.safe_dump(exp.model_dump(mode="json"), sort_keys=False))
    client.log_artifact(parent.info.run_id, str(resolved))
    log_params(client, parent.info.run_id, {**flatten(exp.model_dump(mode="json", exclude={"description"})),
                                            **plan.as_params()})
    return parent.info.run_id, out_dir


@dataclass
class OpenSweep:
    """The sweep's MLflow parent run and Tune folder (its state), the tags of its runs and its output folder."""

    state: SweepState
    tags: dict[str, str]
    out_dir: Path


@dataclass
class SweepEnd:
    """How a sweep that ran to its end (or was interrupted) ended, and what it found for the RunResult."""

    mlflow: str
    sweep: str
    exit_code: ExitCode
    partial: list[str] = field(default_factory=list)
    groups: dict[str, GroupOutcome] = field(default_factory=dict)
    models: list[Registered] = field(default_factory=list)
    ensembles: list[Registered] = field(default_factory=list)


def run_tags(checked: Checked, request: RunRequest) -> dict[str, str]:
    """The tags of every MLflow run of the sweep: who, which code, machine, preset, env and algorithm."""
    exp, options = checked.exp, request.options
    return {"mlflow.user": run_user(), "git_commit": git_commit(), "hardware/preset": checked.preset.name,
            "env": exp.environment.env, "algorithm": exp.algorithm,
            **exp.family.run_tags(exp.environment.env_config), **machine_tags(), "smoke_test": str(options.smoke_test),
            **({"run_group": options.run_group} if options.run_group else {})}


def open_sweep(checked: Checked, request: RunRequest, client: MlflowClient, previous: SweepState | None,
                emit: OnEvent[RunEvent]) -> OpenSweep:
    """The sweep's parent run and Tune folder: the interrupted sweep's again (--resume), else new ones."""
    exp, storage = checked.exp, checked.storage
    tags = run_tags(checked, request)
    check_live_cluster(checked.plan, exp.tune.trial_resources)
    experiment_dir = request.options.output.resolve() / exp.name
    if previous:
        client.update_run(previous.parent_run_id, status="RUNNING")
        emit(Line(f"resuming {storage.display(previous.tune_dir)} into MLflow run {previous.parent_run_id}"))
        state = SweepState(previous.tune_dir, previous.parent_run_id, previous.experiment_id, previous.tracking_uri,
                           started=previous.started)
    else:
        state = _new_sweep(checked, client, tags, experiment_dir, emit)
    return OpenSweep(state, tags, experiment_dir / state.parent_run_id)


def _new_sweep(checked: Checked, client: MlflowClient, tags: dict[str, str], experiment_dir: Path,
               emit: OnEvent[RunEvent]) -> SweepState:
    """A new MLflow parent run (in the experiment, with its saved comparison view) and the Tune folder it names."""
    exp, storage, params = checked.exp, checked.storage, checked.params
    tracking_uri = exp.tracking_uri()
    experiment_id = open_experiment(client, exp.tracking.experiment_name or exp.name, tracking_uri)
    save_view(client, experiment_id, comparison_columns(
        [b.name for b in exp.family.baseline_table()], exp.family.comparison_columns, exp.tune.metric,
        dict.fromkeys(params.search_keys.values()), verdict=isinstance(exp.family, Backtests)))
    parent_id, _ = _open_parent(client, exp, experiment_id, tags, checked.plan, experiment_dir)
    # The parent run's id in the folder's name: two runs started in the same second get distinct folders.
    folder = f"{exp.name}-{time.strftime('%Y%m%d-%H%M%S')}-{parent_id[:6]}"
    state = SweepState(storage.path(exp.name, "tune", folder), parent_id, experiment_id, tracking_uri)
    if not storage.is_local:
        emit(Line(f"Tune results and checkpoints: {storage.display(state.tune_dir)}"))
    return state


def sweep(checked: Checked, request: RunRequest, client: MlflowClient, opened: OpenSweep, resuming: bool,
           emit: OnEvent[RunEvent]) -> SweepEnd:
    """Train, then judge, log and register what the trials found; how the sweep ended and what it found."""
    from experiments.results.trials import SweepFailed

    state, clock = opened.state, request.clock
    state.save(checked.storage, checked.exp.name)
    emit(Phase("training", {"tracking_uri": state.tracking_uri, "experiment_id": state.experiment_id,
                            "parent_run_id": state.parent_run_id}))
    results, interrupted = _train(checked, opened, resuming, emit)
    clock.lap("train")
    emit(Line(""))
    if interrupted:
        emit(Line(f"sweep interrupted: continue it with {rerun_command(request, resume=True)}"))
        return SweepEnd(MLFLOW_KILLED, INTERRUPTED, ExitCode.INTERRUPTED)
    _raise_lost_trials(results, checked, request, state.tracking_uri)
    emit(Phase("scoring"))
    ledger, reader = _ledger(checked, request, client, opened), _reader(checked, opened)
    try:
        judgement = _judge(checked, results, reader, ledger, emit)
    except SweepFailed as failed:
        emit(Line(f"error: the sweep failed: {failed}; Tune's log: {opened.out_dir / 'tune.log'}; after fixing the "
                  f"cause, retry its trials with {rerun_command(request, resume=True)}", highlight=True))
        return SweepEnd(MLFLOW_FAILED, SWEEP_FAILED, ExitCode.FAILED, [str(failed)])
    end = _log_and_register(checked, client, opened, judgement, ledger, reader, emit)
    clock.lap("score")
    out_dir = opened.out_dir
    emit(Phase("done", {"evaluations": [str(p) for p in sorted(out_dir.rglob("evaluation.csv"))],
                        "verdicts": [str(p) for p in sorted(out_dir.rglob("verdict.txt"))],
                        "timings": clock.timings()}))
    return end


def _train(checked: Checked, opened: OpenSweep, resuming: bool, emit: OnEvent[RunEvent]) -> tuple[Any, bool]:
    """Tune's sweep, new or restored (its trials' progress to `emit`); its results and whether it was interrupted."""
    from experiments.sweep.progress import TrialProgress, restored_progress_reports_to
    from experiments.sweep.tuner import fit, make_tuner, restore_tuner

    exp, plan, params, storage, state = checked.exp, checked.plan, checked.params, checked.storage, opened.state
    if resuming:
        with restored_progress_reports_to(emit):  # the sweep's own callbacks come back from its tuner.pkl
            tuner = restore_tuner(exp, storage, state.tune_dir, params)
    else:
        tracker = MlflowTrialCallback(state.tracking_uri, state.experiment_id, state.parent_run_id,
                                      trial_params(exp, plan, params.search_keys), opened.tags,
                                      trial_tags(exp.family.tag_keys), functools.partial(trial_data, exp.family))
        tuner = make_tuner(exp, plan, params, storage, state.tune_dir,
                           [tracker, TrialProgress(emit, params.search_keys)])
    return fit(tuner, opened.out_dir / "tune.log", resuming=resuming)


def _raise_lost_trials(results: Any, checked: Checked, request: RunRequest, tracking_uri: str) -> None:
    """A trial lost to the storage or the disk: the run ends as the fault it is."""
    for trial_result in results:
        if trial_result.error is not None and what_failed(trial_result.error, tracking_uri, checked.storage,
                                                          request.options.output):
            raise trial_result.error


def _ledger(checked: Checked, request: RunRequest, client: MlflowClient, opened: OpenSweep) -> LedgerRun:
    """This sweep's attempt in the trials ledger of its data and windows (the verdict's effective N)."""
    from experiments.results.trials_ledger import LedgerRun, TrialsLedger

    exp, state = checked.exp, opened.state
    return LedgerRun(TrialsLedger(client, state.tracking_uri), exp.name, state.parent_run_id,
                     opened.tags["mlflow.user"], git_commit(), exp.smoke_test, request.options.fresh_ledger or "")


def _reader(checked: Checked, opened: OpenSweep) -> CheckpointReader:
    from experiments.results.trials import CheckpointReader

    return CheckpointReader(checked.storage, opened.out_dir / "downloaded")


def _judge(checked: Checked, results: Any, reader: CheckpointReader, ledger: LedgerRun,
           emit: OnEvent[RunEvent]) -> Judgement:
    from experiments.results.scoring import judge_sweep

    return judge_sweep(checked.exp, results, checked.params, reader, show_status(emit), ledger)


def _log_and_register(checked: Checked, client: MlflowClient, opened: OpenSweep, judgement: Judgement,
                      ledger: LedgerRun, reader: CheckpointReader, emit: OnEvent[RunEvent]) -> SweepEnd:
    """Each group's verdict logged and said, its model (and ensemble) registered; what is missing, as `partial`."""
    from experiments.results.ensemble_logging import log_ensembles
    from experiments.results.mlflow_logging import log_judgement
    from experiments.results.trials import ALL

    exp, state = checked.exp, opened.state
    chosen_runs = log_judgement(client, state, judgement, opened.out_dir, ledger)
    ensemble_runs = log_ensembles(client, state, judgement, opened.out_dir, ledger)
    end = SweepEnd(MLFLOW_FINISHED, SWEEP_FINISHED, ExitCode.OK, list(judgement.partial), judgement.groups)
    if end.partial:
        emit(Partial(tuple(end.partial)))
    single = len(judgement.groups) == 1
    for group, outcome in judgement.groups.items():  # each group's verdict, then its model
        emit(GroupJudged(group, outcome, single))
        if outcome.verdict is not None and outcome.verdict.missing:
            end.partial.append(f"{'' if group == ALL else group + ': '}{outcome.verdict.missing}")
        examples = checked.examples.get(outcome.chosen.fold) if single and not _searches_env(exp) else None
        model, ensemble = _register(checked, client, state, outcome, chosen_runs[group], ensemble_runs.get(group),
                                    reader, examples, emit)
        end.models.append(model)
        end.ensembles += [ensemble] if ensemble is not None else []
        end.partial += [kept.refused for kept in (model, ensemble) if kept is not None and kept.refused]
    emit(GroupsJudged(judgement, exp.tune.group_by))
    end.sweep = PARTIAL if end.partial else SWEEP_FINISHED
    return end


def _register(checked: Checked, client: MlflowClient, state: SweepState, outcome: GroupOutcome,
              chosen_run: str | None, ensemble_run: str | None, reader: CheckpointReader, examples: Any,
              emit: OnEvent[RunEvent]) -> tuple[Registered, Registered | None]:
    """The group's chosen trial registered as a model version, and its ensemble as another (with `ensemble:`)."""
    from experiments.results.registry import register_ensemble, register_group

    log = say(emit)
    model = register_group(checked.exp, outcome, client, state, chosen_run, reader, log, examples)
    if outcome.ensemble is None:
        return model, None
    return model, register_ensemble(checked.exp, outcome, client, state, ensemble_run, log, examples)


def last_words(checked: Checked, request: RunRequest, client: MlflowClient, state: SweepState, end: SweepEnd,
                emit: OnEvent[RunEvent]) -> ExitCode:
    """A finished sweep's time against its estimate, where to look at it, and what is missing (exit 3)."""
    if end.mlflow != MLFLOW_FINISHED:
        return end.exit_code
    clock, partial = request.clock, end.partial
    emit(Line(f"took {duration(clock.elapsed())}, estimated {checked.estimate.short()} (preset {checked.preset.name}: "
              f"edit its env_steps_per_second when the two disagree){clock.busy_note()}"))
    name = checked.exp.tracking.experiment_name or checked.exp.name
    for line in ui_lines(state.tracking_uri, [(f"MLflow run {state.parent_run_id} in experiment '{name}'",
                                               state.experiment_id)]):
        emit(Line(line))
    if not partial:
        return ExitCode.OK
    client.set_tag(state.parent_run_id, "partial", "; ".join(partial)[:5000])
    emit(Line(f"[yellow]partial result (exit {ExitCode.PARTIAL:d}): {escape('; '.join(partial))}. Failed trials run "
              f"again from their last checkpoints with {escape(rerun_command(request, resume=True))}[/yellow]",
              markup=True, highlight=True))
    return ExitCode.PARTIAL


def _searches_env(exp: ExperimentConfig) -> bool:
    """Whether the sweep searches an env_config key besides the fold: then a trial's env (its observations) may differ
    from the one the dry run built for its fold, and registration builds the chosen trial's own."""
    return any(key.startswith(ENV_CONFIG_PREFIX) and key != FOLD_KEY for key in exp.tune.search_space)
