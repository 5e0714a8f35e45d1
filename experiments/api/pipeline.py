"""The training run behind `experiments.run`: Ray, MLflow parent run, Tune sweep, out-of-sample scoring.

Each sweep keeps its Tune folder and MLflow parent run in its storage (experiments/storage/sweep_state.py), so
`--resume` can restore the Tuner and keep logging into the same parent run. It returns a `RunResult`; how a run ends is
one of experiments/records/exits.py's codes (docs/faults.md): 0 whole; 3 partial (a trial failed, a planned fold or
seed is missing, a model was not registered); 1 no trial could be scored; 4 a fault outside the run (tracking server,
storage, disk), in one line with the resume command and the whole error chain in a log file; 130 interrupted. Every
MLflow run it opened is closed, or recorded for the next run to close when the tracking server is what failed.
"""
from __future__ import annotations

import functools
import os
import shlex
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from mlflow.tracking import MlflowClient
from rich.console import Console
from rich.markup import escape

from envs import EnvFamily
from envs.datasets import DataPart
from envs.errors import RunFault
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
from experiments.sweep.tuner import fit, make_tuner, restore_tuner
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


def run_experiment(checked: Checked, ray_target: RayTarget, request: RunRequest, console: Console) -> RunResult:
    """Sweep the checked experiment (its search space is the one `experiments.sweep.tuner.check_buildable` built and
    RLlib validated), track it in MLflow, score out of sample and register; returns what it found and how it ended.
    With a status file its phase, MLflow ids, trial rows and evaluation files are kept there for a parent run."""
    import ray
    import torch

    exp, storage, options = checked.exp, checked.storage, request.options
    result = RunResult(exp.name, ExitCode.FAILED)
    status_file = StatusFile(options.status_file)
    status_file.update(phase="starting", name=exp.name)
    torch.set_num_threads(1)  # the driver's torch must not fight the trials for 2 cores
    silence_rllib_import_noise()
    bound_waits(os.environ)
    experiment_dir = options.output.resolve() / exp.name
    previous = None
    if options.resume:
        previous, note = sweep_to_resume(storage, exp.name)
        if note:
            console.print(note, markup=False, highlight=False)
    tracking_uri = previous.tracking_uri if previous else exp.tracking_uri()
    result.tracking_uri = tracking_uri
    client = make_client(tracking_uri)
    closures = PendingClosures(experiment_dir)
    ending = Ending()
    # A joined cluster that goes away mid-run ends it in one line (docs/faults.md), like the other faults.
    watch = ClusterWatch(ray_target, functools.partial(_cluster_lost, console, request, client, ending, closures,
                                                       storage, exp.name))
    started_ray = False
    try:
        for line in closures.apply(client, tracking_uri):
            console.print(line, markup=False, highlight=False)
        if previous:
            check_resumable(storage, previous.tune_dir, rerun_command(request, resume=False))
        keep_credentials_out_of_ray(os.environ, not ray_target.starts_local, console.print)
        watch.start()
        started_ray = start_ray(ray_target, options.local_ray(), console)
        result.exit_code = _sweep(checked, request, console, client, tracking_uri, previous, experiment_dir,
                                  status_file, ending, result)
    except KeyboardInterrupt:
        ending.mlflow, ending.sweep = KILLED, INTERRUPTED
        raise
    except RunFault as fault:  # a refused resume names its own way back; a fault mid-sweep gets --resume
        print_fault(console, str(fault), None, rerun_command(request, resume=True) if ending.state else None)
        result.exit_code = ExitCode.FAULT
    except Exception as error:  # noqa: BLE001 - classified by _ended_by_fault, re-raised when not a fault
        ending.tracking_down = tracking_unreachable(error, tracking_uri)
        result.exit_code = _ended_by_fault(error, tracking_uri, storage, request, console, experiment_dir)
    finally:
        watch.stop()
        if ending.state is not None:
            _close(client, ending.state, ending, closures, storage, exp.name, console)
        if started_ray:
            ray.shutdown()
    return result


def _sweep(checked: Checked, request: RunRequest, console: Console, client: MlflowClient, tracking_uri: str,
           previous: SweepState | None, experiment_dir: Path, status_file: StatusFile, ending: Ending,
           result: RunResult) -> ExitCode:
    from experiments.results.ensemble_logging import log_ensembles
    from experiments.results.mlflow_logging import log_judgement
    from experiments.results.printing import print_group, print_group_table, print_partial
    from experiments.results.registry import register_ensemble, register_group
    from experiments.results.scoring import judge_sweep
    from experiments.results.trials import ALL, CheckpointReader, SweepFailed
    from experiments.results.trials_ledger import LedgerRun, TrialsLedger
    from experiments.sweep.progress import TrialProgress

    exp, preset, plan, params, storage = checked.exp, checked.preset, checked.plan, checked.params, checked.storage
    options, clock = request.options, request.clock
    env_id = exp.environment.env
    tags = {"mlflow.user": run_user(), "git_commit": git_commit(), "hardware/preset": preset.name, "env": env_id,
            "algorithm": exp.algorithm, **exp.family.run_tags(exp.environment.env_config), **machine_tags(),
            "smoke_test": str(options.smoke_test),
            **({"run_group": options.run_group} if options.run_group else {})}
    check_live_cluster(plan, exp.tune.trial_resources)
    if previous:
        client.update_run(previous.parent_run_id, status="RUNNING")
        console.print(f"resuming {storage.display(previous.tune_dir)} into MLflow run {previous.parent_run_id}",
                      markup=False, highlight=False)
        state = SweepState(previous.tune_dir, previous.parent_run_id, previous.experiment_id, tracking_uri,
                           started=previous.started)
    else:
        experiment_id = open_experiment(client, exp.tracking.experiment_name or exp.name, tracking_uri)
        save_view(client, experiment_id, comparison_columns(
            [b.name for b in exp.family.baseline_table()], exp.family.comparison_columns, exp.tune.metric,
            dict.fromkeys(params.search_keys.values()), verdict=exp.family.folds))
        parent_id, _ = _open_parent(client, exp, experiment_id, tags, plan, experiment_dir)
        # The parent run's id in the folder's name: two runs started in the same second get distinct folders.
        sweep = f"{exp.name}-{time.strftime('%Y%m%d-%H%M%S')}-{parent_id[:6]}"
        state = SweepState(storage.path(exp.name, "tune", sweep), parent_id, experiment_id, tracking_uri)
        if not storage.is_local:
            console.print(f"Tune results and checkpoints: {storage.display(state.tune_dir)}", markup=False,
                          highlight=False)
    ending.state = state  # closed whatever happens next
    state.save(storage, exp.name)
    out_dir = experiment_dir / state.parent_run_id
    result.experiment_id, result.parent_run_id, result.output_dir = state.experiment_id, state.parent_run_id, out_dir
    status_file.update(phase="training", tracking_uri=tracking_uri, experiment_id=state.experiment_id,
                       parent_run_id=state.parent_run_id)
    if previous:
        tuner = restore_tuner(exp, storage, previous.tune_dir, params)
    else:
        tracker = MlflowTrialCallback(tracking_uri, state.experiment_id, state.parent_run_id,
                                      trial_params(exp, plan, params.search_keys), tags,
                                      trial_tags(exp.family.tag_keys), functools.partial(trial_data, exp.family))
        tuner = make_tuner(exp, plan, params, storage, state.tune_dir,
                           [tracker, TrialProgress(console, params.search_keys, status=status_file)])
    results, interrupted = fit(tuner, out_dir / "tune.log", resuming=previous is not None)
    clock.lap("train")
    console.print()
    if interrupted:
        ending.mlflow, ending.sweep = KILLED, INTERRUPTED
        console.print(f"sweep interrupted: continue it with {rerun_command(request, resume=True)}", markup=False,
                      highlight=False)
        return ExitCode.INTERRUPTED
    for trial_result in results:  # a trial lost to the storage or the disk: the run ends as the fault it is
        if trial_result.error is not None and what_failed(trial_result.error, tracking_uri, storage, options.output):
            raise trial_result.error
    status_file.update(phase="scoring")
    ledger = LedgerRun(TrialsLedger(client, tracking_uri), exp.name, state.parent_run_id, tags["mlflow.user"],
                       git_commit(), exp.smoke_test, options.fresh_ledger or "")
    reader = CheckpointReader(storage, out_dir / "downloaded")
    try:
        judgement = judge_sweep(exp, results, params, reader, console, ledger)
    except SweepFailed as failed:
        result.partial = [str(failed)]
        console.print(f"error: the sweep failed: {escape(str(failed))}; Tune's log: {out_dir / 'tune.log'}; after "
                      f"fixing the cause, retry its trials with {escape(rerun_command(request, resume=True))}")
        return ExitCode.FAILED
    chosen_runs = log_judgement(client, state, judgement, out_dir, ledger)
    ensemble_runs = log_ensembles(client, state, judgement, out_dir, ledger)
    result.groups, partial = judgement.groups, list(judgement.partial)
    print_partial(console, partial)
    single = len(judgement.groups) == 1
    for group, outcome in judgement.groups.items():  # each group's verdict, then its model
        print_group(console, group, outcome, single)
        if outcome.verdict is not None and outcome.verdict.missing:
            partial.append(f"{'' if group == ALL else group + ': '}{outcome.verdict.missing}")
        examples = checked.examples.get(outcome.chosen.fold) if single and not _searches_env(exp) else None
        model = register_group(exp, outcome, client, state, chosen_runs[group], reader, console, examples)
        result.models.append(model)
        partial += [model.refused] if model.refused else []
        if outcome.ensemble is not None:  # its own version, beside the single chosen trial's
            ensemble = register_ensemble(exp, outcome, client, state, ensemble_runs.get(group), console, examples)
            result.ensembles.append(ensemble)
            partial += [ensemble.refused] if ensemble.refused else []
    print_group_table(console, judgement, exp.tune.group_by)
    result.partial = partial
    clock.lap("score")
    status_file.update(phase="done", evaluations=[str(p) for p in sorted(out_dir.rglob("evaluation.csv"))],
                       verdicts=[str(p) for p in sorted(out_dir.rglob("verdict.txt"))], timings=clock.timings())
    ending.mlflow, ending.sweep = FINISHED, (PARTIAL if partial else SWEEP_FINISHED)
    console.print(f"took {duration(clock.elapsed())}, estimated {checked.estimate.short()} "
                  f"(preset {preset.name}: edit its env_steps_per_second when the two disagree)"
                  f"{clock.busy_note()}", markup=False, highlight=False)
    name = exp.tracking.experiment_name or exp.name
    for line in ui_lines(tracking_uri, [(f"MLflow run {state.parent_run_id} in experiment '{name}'",
                                         state.experiment_id)]):
        console.print(line, markup=False, highlight=False)
    if partial:
        client.set_tag(state.parent_run_id, "partial", "; ".join(partial)[:5000])
        console.print(f"[yellow]partial result (exit {ExitCode.PARTIAL:d}): {escape('; '.join(partial))}. Failed "
                      f"trials run again from their last checkpoints with "
                      f"{escape(rerun_command(request, resume=True))}[/yellow]")
        return ExitCode.PARTIAL
    return ExitCode.OK


def _searches_env(exp: ExperimentConfig) -> bool:
    """Whether the sweep searches an env_config key besides the fold: then a trial's env (its observations) may differ
    from the one the dry run built for its fold, and registration builds the chosen trial's own."""
    return any(key.startswith(ENV_CONFIG_PREFIX) and key != FOLD_KEY for key in exp.tune.search_space)


def _ended_by_fault(error: Exception, tracking_uri: str, storage: Storage, request: RunRequest,
                    console: Console, experiment_dir: Path) -> ExitCode:
    """A fault outside the run: one line, the chain in a log file, the way back. Anything else is a bug and
    keeps its traceback."""
    line = what_failed(error, tracking_uri, storage, request.options.output)
    if line is None:
        raise error
    print_fault(console, line, write_chain(error, experiment_dir), rerun_command(request, resume=True))
    return ExitCode.FAULT


def _cluster_lost(console: Console, request: RunRequest, client: MlflowClient, ending: Ending,
                  closures: PendingClosures, storage: Storage, name: str, line: str) -> None:
    """The run's end when the cluster it joined went away, said from the cluster watch's thread (the main thread
    is stuck in Ray by then): the line, the way back, and its MLflow runs and sweep state closed as failed."""
    print_fault(console, line, None, rerun_command(request, resume=True) if ending.state else None)
    if ending.state is not None:
        _close(client, ending.state, ending, closures, storage, name, console)


def print_fault(console: Console, line: str, log: Path | None, resume: str | None) -> None:
    console.print(f"error: {line}", markup=False, highlight=False)
    if log is not None:
        console.print(f"  the whole error: {log}", markup=False, highlight=False)
    if resume is not None:
        console.print(f"  then continue the sweep with {resume}", markup=False, highlight=False)


def _close(client: MlflowClient, state: SweepState, ending: Ending, closures: PendingClosures, storage: Storage,
           name: str, console: Console) -> None:
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
    console.print(f"  MLflow run {state.parent_run_id} stays open for now: "
                  + (f"the next run of '{name}' closes it (recorded in {closures.path})" if kept
                     else "the tracking server and the disk both failed: close it in the MLflow UI"),
                  markup=False, highlight=False)
