"""The training run behind `experiments.run`: the driver made ready, Ray joined or started, the sweep run
(experiments/api/sweep_steps.py: MLflow parent run, Tune sweep, out-of-sample scoring, registration), faults
classified and every MLflow run closed.

Each sweep keeps its Tune folder and MLflow parent run in its storage (experiments/storage/sweep_state.py), so
`--resume` can restore the Tuner and keep logging into the same parent run. It returns a `RunResult`; how a run ends is
one of experiments/records/exits.py's codes (docs/faults.md): 0 whole; 3 partial (a trial failed, a planned fold or
seed is missing, a model was not registered); 1 no trial could be scored; 4 a fault outside the run (tracking server,
storage, disk), in one line with the resume command and the whole error chain in a log file; 130 interrupted. Every
MLflow run it opened is closed, or recorded for the next run to close when the tracking server is what failed.

It prints nothing: each line, trial row and verdict is an event for the caller's `on_event`
(experiments/api/events.py). `run_experiment` owns how the run ends (its `Ending`, its `RunResult`); the sweep's steps
it calls (`open_sweep`, `sweep`, `last_words`) return what they found.
"""
from __future__ import annotations

import functools
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

from mlflow.tracking import MlflowClient

from envs.errors import RunFault
from experiments.api.events import Fault, RunEvent
from experiments.api.options import RunRequest, rerun_command
from experiments.api.preflight import Checked
from experiments.api.result import RunResult
from experiments.api.sweep_steps import last_words, open_sweep, sweep
from experiments.plan.cluster import RayTarget
from experiments.plan.local_ray import start_ray
from experiments.records.exits import MLFLOW_FAILED, MLFLOW_KILLED, ExitCode
from experiments.records.run_events import Line, OnEvent, Phase, TrialUpdate, ignore, say
from experiments.storage.filesystem import Storage, keep_credentials_out_of_ray
from experiments.storage.resume_check import check_resumable
from experiments.storage.sweep_state import FAILED as SWEEP_FAILED
from experiments.storage.sweep_state import INTERRUPTED, SweepState, sweep_to_resume
from experiments.sweep.faults import ClusterWatch, bound_waits, tracking_unreachable, what_failed, write_chain
from experiments.sweep.run_status import StatusFile
from experiments.tracking.pending_closures import PendingClosures
from experiments.tracking.runs import close_open_children, make_client


def silence_rllib_import_noise() -> None:
    """RLlib's algorithm registry builds a DreamerV3 debug CartPole at import time, whose float64
    Box bounds make Gymnasium warn in the driver. The warning is about RLlib's env, not ours."""
    warnings.filterwarnings("ignore", category=UserWarning,
                            module=r"gymnasium\.(spaces\.box|utils\.passive_env_checker)")
    # Each RLlib env runner built in this process registers its env as rllib-single-agent-env-v0 again.
    warnings.filterwarnings("ignore", message=r".*Overriding environment rllib-single-agent-env-v0",
                            category=UserWarning)


@dataclass
class Ending:
    """How the sweep ended, for closing its MLflow runs and its state file."""

    mlflow: str = MLFLOW_FAILED
    sweep: str = SWEEP_FAILED
    state: SweepState | None = None  # set as soon as the sweep has one
    tracking_down: bool = False  # the tracking server is what failed: closures are recorded, not tried


def run_experiment(checked: Checked, ray_target: RayTarget, request: RunRequest,
                   on_event: OnEvent[RunEvent] | None = None) -> RunResult:
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
        opened = open_sweep(checked, request, client, previous, emit)
        ending.state = opened.state  # closed whatever happens next
        result.experiment_id, result.parent_run_id = opened.state.experiment_id, opened.state.parent_run_id
        result.output_dir = opened.out_dir
        end = sweep(checked, request, client, opened, previous is not None, emit)
        ending.mlflow, ending.sweep = end.mlflow, end.sweep
        result.partial, result.groups, result.models, result.ensembles = (end.partial, end.groups, end.models,
                                                                          end.ensembles)
        result.exit_code = last_words(checked, request, client, opened.state, end, emit)
    except KeyboardInterrupt:
        ending.mlflow, ending.sweep = MLFLOW_KILLED, INTERRUPTED
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


def with_status_file(path: Path | None, on_event: OnEvent[RunEvent]) -> OnEvent[RunEvent]:
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


def _prepare_driver(checked: Checked, resume: bool, emit: OnEvent[RunEvent]) -> SweepState | None:
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
             emit: OnEvent[RunEvent]) -> bool:
    """Close what earlier runs left open, check the sweep to resume, then join or start Ray, watched from then on;
    True when this run started its own Ray."""
    for line in closures.apply(client, tracking_uri):
        emit(Line(line))
    if previous:
        check_resumable(storage, previous.tune_dir, rerun_command(request, resume=False))
    keep_credentials_out_of_ray(os.environ, not ray_target.starts_local, say(emit))
    watch.start()
    return start_ray(ray_target, request.options.local_ray(), say(emit, highlight=False))


def _ended_by_fault(error: Exception, checked: Checked, request: RunRequest, ending: Ending, tracking_uri: str,
                    emit: OnEvent[RunEvent]) -> ExitCode:
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


def _cluster_lost(emit: OnEvent[RunEvent], request: RunRequest, client: MlflowClient, ending: Ending,
                  closures: PendingClosures, storage: Storage, name: str, line: str) -> None:
    """The run's end when the cluster it joined went away, said from the cluster watch's thread (the main thread
    is stuck in Ray by then): the line, the way back, and its MLflow runs and sweep state closed as failed."""
    emit(Fault(line, None, rerun_command(request, resume=True) if ending.state else None))
    if ending.state is not None:
        _close(client, ending.state, ending, closures, storage, name, emit)


def _close(client: MlflowClient, state: SweepState, ending: Ending, closures: PendingClosures, storage: Storage,
           name: str, emit: OnEvent[RunEvent]) -> None:
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
