"""The training run behind `experiments.run`: Ray, MLflow parent run, Tune sweep, out-of-sample scoring.

Each sweep keeps its Tune folder and MLflow parent run in its storage (experiments/storage/sweep_state.py), so
`--resume` can restore the Tuner and keep logging into the same parent run. It returns a `RunResult`; how a run ends is
one of experiments/records/exits.py's codes (docs/faults.md): 0 whole; 3 partial (a trial failed, a planned fold or
seed is missing, a model was not registered); 1 no trial could be scored; 4 a fault outside the run (tracking server,
storage, disk), in one line with the resume command and the whole error chain in a log file; 130 interrupted. Every
MLflow run it opened is closed, or recorded for the next run to close when the tracking server is what failed.

It prints nothing: each line, trial row and verdict is an event for the caller's `on_event`
(experiments/api/events.py). `run_experiment` owns how the run ends (its `Ending`, its `RunResult`); the steps it
calls (`_open_sweep`, `_sweep` and theirs) return what they found.
"""
from __future__ import annotations

import functools
import os
import shlex
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from mlflow.tracking import MlflowClient
from rich.markup import escape

from envs import EnvFamily
from envs.abilities import Backtests
from envs.datasets import DataPart
from envs.errors import RunFault
from experiments.api.events import (
    EventConsole,
    Fault,
    GroupJudged,
    GroupsJudged,
    OnEvent,
    Partial,
    RunEvent,
    ignore,
    say,
)
from experiments.api.options import RunRequest
from experiments.api.preflight import Checked
from experiments.api.result import RunResult
from experiments.config.checks import ENV_CONFIG_PREFIX
from experiments.config.experiment import ExperimentConfig
from experiments.config.protocol import FOLD_KEY
from experiments.hardware import ResourcePlan, check_live_cluster
from experiments.hardware.plan import duration
from experiments.plan.cluster import RayTarget
from experiments.plan.local_ray import start_ray
from experiments.plan.provenance import git_commit, machine_tags
from experiments.records.exits import MLFLOW_FAILED, MLFLOW_FINISHED, MLFLOW_KILLED, ExitCode
from experiments.records.run_events import Line, Phase, TrialUpdate
from experiments.shell import python_command
from experiments.storage.filesystem import Storage, keep_credentials_out_of_ray
from experiments.storage.resume_check import check_resumable
from experiments.storage.sweep_state import FAILED as SWEEP_FAILED
from experiments.storage.sweep_state import FINISHED as SWEEP_FINISHED
from experiments.storage.sweep_state import INTERRUPTED, PARTIAL, SweepState, sweep_to_resume
from experiments.sweep.faults import (
    ClusterWatch,
    bound_waits,
    tracking_unreachable,
    what_failed,
    write_chain,
)
from experiments.sweep.run_status import StatusFile
from experiments.tracking.comparison_view import comparison_columns, save_view
from experiments.tracking.pending_closures import PendingClosures
from experiments.tracking.runs import (
    MlflowTrialCallback,
    close_open_children,
    flatten,
    log_params,
    make_client,
    open_experiment,
    trial_tags,
    ui_lines,
)

if TYPE_CHECKING:  # what judging returns; imported where the sweep is judged
    from experiments.results.registry import Registered
    from experiments.results.scoring import GroupOutcome, Judgement
    from experiments.results.trials import CheckpointReader
    from experiments.results.trials_ledger import LedgerRun

FINISHED, FAILED, KILLED = MLFLOW_FINISHED, MLFLOW_FAILED, MLFLOW_KILLED


def run_user() -> str:
    """Who the runs belong to in MLflow's UI: the tracking server's login, else MLflow's own guess (the OS
    user), as `mlflow.start_run` would tag it."""
    from mlflow.tracking.context.registry import resolve_tags

    return os.environ.get("MLFLOW_TRACKING_USERNAME") or resolve_tags().get("mlflow.user", "unknown")


def rerun_command(request: RunRequest, resume: bool) -> str:
    """The command a user types to resume this run's sweep (or start it over): the same file, settings, storage and
    cluster (--address; RAY_ADDRESS stays in the environment). Printed, never run."""
    options = request.options
    words = [python_command(), "-m", "experiments.run", str(request.conf)]
    words += ["--smoke-test"] if options.smoke_test else []
    for override in request.overrides:
        words += ["--set", override.text]
    for flag, value in (("--hardware", options.hardware), ("--storage", options.storage),
                        ("--address", options.address)):
        words += [flag, value] if value else []
    words += ["--output", str(options.output)] if options.output != Path("runs") else []
    return shlex.join(words + (["--resume"] if resume else []))


def silence_rllib_import_noise() -> None:
    """RLlib's algorithm registry builds a DreamerV3 debug CartPole at import time, whose float64
    Box bounds make Gymnasium warn in the driver. The warning is about RLlib's env, not ours."""
    warnings.filterwarnings("ignore", category=UserWarning,
                            module=r"gymnasium\.(spaces\.box|utils\.passive_env_checker)")
    # Each RLlib env runner built in this process registers its env as rllib-single-agent-env-v0 again.
    warnings.filterwarnings("ignore", message=r".*Overriding environment rllib-single-agent-env-v0",
                            category=UserWarning)


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
class Ending:
    """How the sweep ended, for closing its MLflow runs and its state file."""

    mlflow: str = FAILED
    sweep: str = SWEEP_FAILED
    state: SweepState | None = None  # set as soon as the sweep has one
    tracking_down: bool = False  # the tracking server is what failed: closures are recorded, not tried


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


def run_experiment(checked: Checked, ray_target: RayTarget, request: RunRequest,
                   on_event: OnEvent | None = None) -> RunResult:
    """Sweep the checked experiment (its search space is the one `experiments.sweep.tuner.check_buildable` built and
    RLlib validated), track it in MLflow, score out of sample and register; returns what it found and how it ended.
    Progress goes to `on_event`; with a status file, phases and trial rows are kept there too for a parent run."""
    import ray

    exp, storage, options = checked.exp, checked.storage, request.options
    emit = with_status_file(options.status_file, on_event or ignore)
    previous = _prepare_driver(checked, options.resume, emit)
    tracking_uri = previous.tracking_uri if previous else exp.tracking_uri()
    result, ending = RunResult(exp.name, ExitCode.FAILED, tracking_uri=tracking_uri), Ending()
    client, closures = make_client(tracking_uri), PendingClosures(options.output.resolve() / exp.name)
    # A joined cluster that goes away mid-run ends it in one line (docs/faults.md), like the other faults.
    watch, started_ray = ClusterWatch(ray_target, functools.partial(_cluster_lost, emit, request, client, ending,
                                                                    closures, storage, exp.name)), False
    try:
        started_ray = _connect(ray_target, request, client, closures, tracking_uri, previous, storage, watch, emit)
        opened = _open_sweep(checked, request, client, previous, emit)
        ending.state = opened.state  # closed whatever happens next
        result.experiment_id, result.parent_run_id = opened.state.experiment_id, opened.state.parent_run_id
        result.output_dir = opened.out_dir
        end = _sweep(checked, request, client, opened, previous is not None, emit)
        ending.mlflow, ending.sweep = end.mlflow, end.sweep
        result.partial, result.groups, result.models, result.ensembles = (end.partial, end.groups, end.models,
                                                                          end.ensembles)
        result.exit_code = _last_words(checked, request, client, opened.state, end, emit)
    except KeyboardInterrupt:
        ending.mlflow, ending.sweep = KILLED, INTERRUPTED
        raise
    except Exception as error:  # noqa: BLE001 - classified by _ended_by_fault, re-raised when not a fault
        ending.tracking_down = not isinstance(error, RunFault) and tracking_unreachable(error, tracking_uri)
        result.exit_code = _ended_by_fault(error, checked, request, ending, tracking_uri, emit)
    finally:
        watch.stop()
        if ending.state is not None:
            _close(client, ending.state, ending, closures, storage, exp.name, emit)
        if started_ray:
            ray.shutdown()
    return result


def with_status_file(path: Path | None, on_event: OnEvent) -> OnEvent:
    """`on_event`, and with a status file (a side-by-side child's) its phases and trial rows written there too."""
    if path is None:
        return on_event
    status_file = StatusFile(path)

    def both(event: RunEvent) -> None:
        if isinstance(event, Phase):
            status_file.update(phase=event.name, **event.fields)
        elif isinstance(event, TrialUpdate):  # at once when a trial starts or ends, else at most every second
            status_file.rows(event.rows, force=event.kind != "result")
        on_event(event)

    return both


def _prepare_driver(checked: Checked, resume: bool, emit: OnEvent) -> SweepState | None:
    """This process made ready to drive trials, and the sweep it resumes (with --resume)."""
    import torch

    emit(Phase("starting", {"name": checked.exp.name}))
    torch.set_num_threads(1)  # the driver's torch must not fight the trials for 2 cores
    silence_rllib_import_noise()
    bound_waits(os.environ)
    if not resume:
        return None
    previous, note = sweep_to_resume(checked.storage, checked.exp.name)
    if note:
        emit(Line(note))
    return previous


def _connect(ray_target: RayTarget, request: RunRequest, client: MlflowClient, closures: PendingClosures,
             tracking_uri: str, previous: SweepState | None, storage: Storage, watch: ClusterWatch,
             emit: OnEvent) -> bool:
    """Close what earlier runs left open, check the sweep to resume, then join or start Ray, watched from then on;
    True when this run started its own Ray."""
    for line in closures.apply(client, tracking_uri):
        emit(Line(line))
    if previous:
        check_resumable(storage, previous.tune_dir, rerun_command(request, resume=False))
    keep_credentials_out_of_ray(os.environ, not ray_target.starts_local, say(emit))
    watch.start()
    return start_ray(ray_target, request.options.local_ray(), EventConsole(emit))


def run_tags(checked: Checked, request: RunRequest) -> dict[str, str]:
    """The tags of every MLflow run of the sweep: who, which code, machine, preset, env and algorithm."""
    exp, options = checked.exp, request.options
    return {"mlflow.user": run_user(), "git_commit": git_commit(), "hardware/preset": checked.preset.name,
            "env": exp.environment.env, "algorithm": exp.algorithm,
            **exp.family.run_tags(exp.environment.env_config), **machine_tags(), "smoke_test": str(options.smoke_test),
            **({"run_group": options.run_group} if options.run_group else {})}


def _open_sweep(checked: Checked, request: RunRequest, client: MlflowClient, previous: SweepState | None,
                emit: OnEvent) -> OpenSweep:
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
               emit: OnEvent) -> SweepState:
    """A new MLflow parent run (in the experiment, with its saved comparison view) and the Tune folder it names."""
    exp, storage, params = checked.exp, checked.storage, checked.params
    tracking_uri = exp.tracking_uri()
    experiment_id = open_experiment(client, exp.tracking.experiment_name or exp.name, tracking_uri)
    save_view(client, experiment_id, comparison_columns(
        [b.name for b in exp.family.baseline_table()], exp.family.comparison_columns, exp.tune.metric,
        dict.fromkeys(params.search_keys.values()), verdict=isinstance(exp.family, Backtests)))
    parent_id, _ = _open_parent(client, exp, experiment_id, tags, checked.plan, experiment_dir)
    # The parent run's id in the folder's name: two runs started in the same second get distinct folders.
    sweep = f"{exp.name}-{time.strftime('%Y%m%d-%H%M%S')}-{parent_id[:6]}"
    state = SweepState(storage.path(exp.name, "tune", sweep), parent_id, experiment_id, tracking_uri)
    if not storage.is_local:
        emit(Line(f"Tune results and checkpoints: {storage.display(state.tune_dir)}"))
    return state


def _sweep(checked: Checked, request: RunRequest, client: MlflowClient, opened: OpenSweep, resuming: bool,
           emit: OnEvent) -> SweepEnd:
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
        return SweepEnd(KILLED, INTERRUPTED, ExitCode.INTERRUPTED)
    _raise_lost_trials(results, checked, request, state.tracking_uri)
    emit(Phase("scoring"))
    ledger, reader = _ledger(checked, request, client, opened), _reader(checked, opened)
    try:
        judgement = _judge(checked, results, reader, ledger, emit)
    except SweepFailed as failed:
        emit(Line(f"error: the sweep failed: {failed}; Tune's log: {opened.out_dir / 'tune.log'}; after fixing the "
                  f"cause, retry its trials with {rerun_command(request, resume=True)}", highlight=True))
        return SweepEnd(FAILED, SWEEP_FAILED, ExitCode.FAILED, [str(failed)])
    end = _log_and_register(checked, client, opened, judgement, ledger, reader, emit)
    clock.lap("score")
    out_dir = opened.out_dir
    emit(Phase("done", {"evaluations": [str(p) for p in sorted(out_dir.rglob("evaluation.csv"))],
                        "verdicts": [str(p) for p in sorted(out_dir.rglob("verdict.txt"))],
                        "timings": clock.timings()}))
    return end


def _train(checked: Checked, opened: OpenSweep, resuming: bool, emit: OnEvent) -> tuple[Any, bool]:
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


def _judge(checked: Checked, results: Any, reader: CheckpointReader, ledger: LedgerRun, emit: OnEvent) -> Judgement:
    from experiments.results.scoring import judge_sweep

    return judge_sweep(checked.exp, results, checked.params, reader, EventConsole(emit), ledger)


def _log_and_register(checked: Checked, client: MlflowClient, opened: OpenSweep, judgement: Judgement,
                      ledger: LedgerRun, reader: CheckpointReader, emit: OnEvent) -> SweepEnd:
    """Each group's verdict logged and said, its model (and ensemble) registered; what is missing, as `partial`."""
    from experiments.results.ensemble_logging import log_ensembles
    from experiments.results.mlflow_logging import log_judgement
    from experiments.results.trials import ALL

    exp, state = checked.exp, opened.state
    chosen_runs = log_judgement(client, state, judgement, opened.out_dir, ledger)
    ensemble_runs = log_ensembles(client, state, judgement, opened.out_dir, ledger)
    end = SweepEnd(FINISHED, SWEEP_FINISHED, ExitCode.OK, list(judgement.partial), judgement.groups)
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
              emit: OnEvent) -> tuple[Registered, Registered | None]:
    """The group's chosen trial registered as a model version, and its ensemble as another (with `ensemble:`)."""
    from experiments.results.registry import register_ensemble, register_group

    console = EventConsole(emit)
    model = register_group(checked.exp, outcome, client, state, chosen_run, reader, console, examples)
    if outcome.ensemble is None:
        return model, None
    return model, register_ensemble(checked.exp, outcome, client, state, ensemble_run, console, examples)


def _last_words(checked: Checked, request: RunRequest, client: MlflowClient, state: SweepState, end: SweepEnd,
                emit: OnEvent) -> ExitCode:
    """A finished sweep's time against its estimate, where to look at it, and what is missing (exit 3)."""
    if end.mlflow != FINISHED:
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


def _ended_by_fault(error: Exception, checked: Checked, request: RunRequest, ending: Ending, tracking_uri: str,
                    emit: OnEvent) -> ExitCode:
    """A fault outside the run: one line, the chain in a log file, the way back. A refused resume (a RunFault) names
    its own way back; a fault mid-sweep gets --resume. Anything else is a bug and keeps its traceback."""
    if isinstance(error, RunFault):
        emit(Fault(str(error), None, rerun_command(request, resume=True) if ending.state else None))
        return ExitCode.FAULT
    line = what_failed(error, tracking_uri, checked.storage, request.options.output)
    if line is None:
        raise error
    experiment_dir = request.options.output.resolve() / checked.exp.name
    emit(Fault(line, write_chain(error, experiment_dir), rerun_command(request, resume=True)))
    return ExitCode.FAULT


def _cluster_lost(emit: OnEvent, request: RunRequest, client: MlflowClient, ending: Ending,
                  closures: PendingClosures, storage: Storage, name: str, line: str) -> None:
    """The run's end when the cluster it joined went away, said from the cluster watch's thread (the main thread
    is stuck in Ray by then): the line, the way back, and its MLflow runs and sweep state closed as failed."""
    emit(Fault(line, None, rerun_command(request, resume=True) if ending.state else None))
    if ending.state is not None:
        _close(client, ending.state, ending, closures, storage, name, emit)


def _close(client: MlflowClient, state: SweepState, ending: Ending, closures: PendingClosures, storage: Storage,
           name: str, emit: OnEvent) -> None:
    """Close the sweep's MLflow runs and mark its state file; when the tracking server is what failed, record
    the closures for the next run instead of waiting on it again."""
    try:
        state.ended(storage, name, ending.sweep)
    except OSError:
        pass  # the storage is what failed: the file still says running, and its driver is gone: resumable
    if not ending.tracking_down:
        try:
            close_open_children(client, state.experiment_id, state.parent_run_id, ending.mlflow)
            client.set_terminated(state.parent_run_id, status=ending.mlflow)
            return
        except Exception:  # noqa: BLE001, S110 - whatever the tracking client raises, the closures are recorded
            pass
    kept = closures.record(state.tracking_uri, state.experiment_id, state.parent_run_id, ending.mlflow)
    emit(Line(f"  MLflow run {state.parent_run_id} stays open for now: "
              + (f"the next run of '{name}' closes it (recorded in {closures.path})" if kept
                 else "the tracking server and the disk both failed: close it in the MLflow UI")))
