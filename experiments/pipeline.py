"""The training run behind `experiments.run`: Ray, MLflow parent run, Tune sweep, out-of-sample scoring.

A sweep writes `<output>/<name>/latest_sweep.json` (its Tune folder and MLflow parent run), so
`--resume` can restore the Tuner and keep logging into the same parent run.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml
from mlflow.entities import RunStatus
from mlflow.tracking import MlflowClient
from rich.console import Console

import envs
from envs.errors import InputError
from experiments import cross_cpu
from experiments.cluster import LOCAL, RayTarget
from experiments.config import ExperimentConfig
from experiments.hardware import ResourcePlan, check_live_cluster
from experiments.hardware.plan import duration
from experiments.preflight import Checked
from experiments.provenance import git_commit, machine_tags
from experiments.run_status import StatusFile
from experiments.shell import python_command, tool_command
from experiments.storage import Storage, warn_environment_credentials
from experiments.sweep import fit, make_tuner, restore_tuner
from experiments.tracking import (
    MlflowTrialCallback,
    close_open_children,
    flatten,
    log_params,
    make_client,
    open_experiment,
    trial_tags,
    ui_lines,
)

DEFAULT_DASHBOARD_PORT = 8265  # Ray's first choice, and the port the docs name

FINISHED, FAILED, KILLED = (RunStatus.to_string(s) for s in (RunStatus.FINISHED, RunStatus.FAILED, RunStatus.KILLED))


@dataclass
class SweepState:
    """What `--resume` needs to find an interrupted sweep again; kept in the sweep's storage, so a resume
    from another machine finds it too."""

    tune_dir: str  # the Tune experiment folder, a path inside the storage
    parent_run_id: str
    experiment_id: str
    tracking_uri: str

    @staticmethod
    def path(storage: Storage, name: str) -> str:
        return storage.path(name, "latest_sweep.json")

    def save(self, storage: Storage, name: str) -> None:
        storage.write_text(self.path(storage, name), json.dumps(asdict(self), indent=2))

    @classmethod
    def load(cls, storage: Storage, name: str) -> "SweepState":
        path = cls.path(storage, name)
        text = storage.read_text(path)
        if text is None:
            raise InputError(f"{storage.display(path)}: no sweep of '{name}' to resume there: run without --resume "
                             "(or pass the same --storage or --output as the interrupted run)")
        return cls(**json.loads(text))


def run_user() -> str:
    """Who the runs belong to in MLflow's UI: the tracking server's login, else MLflow's own guess (the OS
    user), as `mlflow.start_run` would tag it."""
    from mlflow.tracking.context.registry import resolve_tags

    return os.environ.get("MLFLOW_TRACKING_USERNAME") or resolve_tags().get("mlflow.user", "unknown")


def resume_flags(args: argparse.Namespace) -> str:
    """The flags that find an interrupted sweep's storage again."""
    flags = "" if args.output == Path("runs") else f" --output {args.output}"
    return flags + (f" --storage {args.storage}" if args.storage else "")


def start_ray(target: RayTarget, args: argparse.Namespace, console: Console) -> bool:
    """Join the cluster `target` names, or start a local Ray; returns True when we started it."""
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if target.note:
        console.print(target.note, markup=False, highlight=False)
    if not target.starts_local:
        # Workers on a cluster we join do not inherit our environment: --cross-cpu's pins travel with the job.
        pins = {"env_vars": cross_cpu.pinned_environment()} if cross_cpu.is_pinned() else None
        context = ray.init(address=target.address, logging_level="ERROR", log_to_driver=False, runtime_env=pins)
        print_dashboard(context.dashboard_url, console)
        return False
    if args.dashboard_host != "127.0.0.1":
        console.print(f"[yellow]warning: the Ray dashboard listens on {args.dashboard_host}: anyone who can reach "
                      "this machine can see and control the cluster[/yellow]")
    port = getattr(args, "dashboard_port", None)
    if port is not None and not port_is_free(args.dashboard_host, port):
        raise InputError(f"--dashboard-port {port}: another process listens on {args.dashboard_host}:{port}: pick "
                         "another port, or leave --dashboard-port out to take the next free one")
    # No port: Ray tries 8265 and up to 50 ports after it, so a second run beside the first takes the next free one
    # and prints the URL it really got. An explicit port is checked by Ray even with --no-dashboard (its dashboard
    # process starts for the state API), which is how a second run used to die on the first one's 8265.
    context = ray.init(address=LOCAL, include_dashboard=not args.no_dashboard, dashboard_host=args.dashboard_host,
                       dashboard_port=port, logging_level="ERROR", log_to_driver=False)
    print_dashboard(context.dashboard_url, console, moved_note(context.dashboard_url, port))
    return True


def moved_note(url: str | None, asked_port: int | None) -> str:
    """Why the URL is not the documented :8265: a second run beside the first takes the next free port."""
    if asked_port is not None or not url or url.endswith(f":{DEFAULT_DASHBOARD_PORT}"):
        return ""
    return f" ({DEFAULT_DASHBOARD_PORT} is taken, by another run here)"


def port_is_free(host: str, port: int) -> bool:
    """Whether `host:port` can be bound now (the test Ray itself makes before it refuses with a traceback)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def print_dashboard(url: str | None, console: Console, note: str = "") -> None:
    """The dashboard's URL and, when Ray's token authentication is on (the default since 2.59), how to log in.
    The token itself is never printed: it is the cluster's password."""
    if not url:
        return
    from ray._private.authentication.authentication_utils import is_token_auth_enabled

    console.print(f"Ray dashboard: http://{url}{note}", markup=False, highlight=False)
    if is_token_auth_enabled():
        console.print(f"  it asks for a token: paste what `{tool_command('ray')} get-auth-token` prints",
                      markup=False, highlight=False)


def _silence_rllib_import_noise() -> None:
    """RLlib's algorithm registry builds a DreamerV3 debug CartPole at import time, whose float64
    Box bounds make Gymnasium warn in the driver. The warning is about RLlib's env, not ours."""
    warnings.filterwarnings("ignore", category=UserWarning,
                            module=r"gymnasium\.(spaces\.box|utils\.passive_env_checker)")
    # Each RLlib env runner built in this process registers its env as rllib-single-agent-env-v0 again.
    warnings.filterwarnings("ignore", message=r".*Overriding environment rllib-single-agent-env-v0",
                            category=UserWarning)


def _trial_params(exp: ExperimentConfig, plan: ResourcePlan, search_keys: dict[str, str]):
    static = flatten(exp.model_dump(mode="json", exclude={"tune", "tracking", "description"}))

    def params(trial: Any) -> dict[str, Any]:
        values = dict(static)
        for flat_key, value in (trial.evaluated_params or {}).items():
            values[search_keys.get(flat_key, flat_key)] = value
        values["seed"] = trial.config.get("seed")
        return {**values, **plan.as_params()}

    return params


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


def run_experiment(checked: Checked, ray_target: RayTarget, args: argparse.Namespace, console: Console) -> int:
    """Sweep the checked experiment (its search space is the one `experiments.sweep.check_buildable` built and
    RLlib validated), track it in MLflow, score out of sample and register; returns the exit code. With
    `--status-file` its phase, MLflow ids, trial rows and evaluation files are kept there for a parent run."""
    import ray
    import torch

    from experiments.progress import TrialProgress

    exp, preset, plan, params, storage = checked.exp, checked.preset, checked.plan, checked.params, checked.storage
    status_file = StatusFile(args.status_file)
    status_file.update(phase="starting", name=exp.name)
    torch.set_num_threads(1)  # the driver's torch must not fight the trials for 2 cores
    _silence_rllib_import_noise()
    previous = SweepState.load(storage, exp.name) if args.resume else None
    tracking_uri = previous.tracking_uri if previous else exp.tracking_uri()
    client = make_client(tracking_uri)
    warn_environment_credentials(os.environ, console.print)
    started_ray = start_ray(ray_target, args, console)
    env_id = exp.environment.env
    tags = {"mlflow.user": run_user(), "git_commit": git_commit(), "hardware/preset": preset.name, "env": env_id,
            "algorithm": exp.algorithm, **envs.run_tags(env_id, exp.environment.env_config), **machine_tags(),
            "smoke_test": str(args.smoke_test),
            **({"run_group": args.run_group} if args.run_group else {})}
    status = FAILED
    state: SweepState | None = previous
    try:
        check_live_cluster(plan, exp.tune.trial_resources)
        experiment_dir = args.output.resolve() / exp.name
        if previous:
            client.update_run(previous.parent_run_id, status="RUNNING")
            console.print(f"resuming {previous.tune_dir} into MLflow run {previous.parent_run_id}")
            out_dir = experiment_dir / previous.parent_run_id
        else:
            experiment_id = open_experiment(client, exp.tracking.experiment_name or exp.name, tracking_uri)
            parent_id, out_dir = _open_parent(client, exp, experiment_id, tags, plan, experiment_dir)
            state = SweepState(tune_dir=storage.path(exp.name, "tune", f"{exp.name}-{time.strftime('%Y%m%d-%H%M%S')}"),
                               parent_run_id=parent_id, experiment_id=experiment_id, tracking_uri=tracking_uri)
            state.save(storage, exp.name)
            if not storage.is_local:
                console.print(f"Tune results and checkpoints: {storage.display(state.tune_dir)}", markup=False,
                              highlight=False)
        status_file.update(phase="training", tracking_uri=tracking_uri, experiment_id=state.experiment_id,
                           parent_run_id=state.parent_run_id)
        if previous:
            tuner = restore_tuner(exp, storage, previous.tune_dir, params)
        else:
            tracker = MlflowTrialCallback(tracking_uri, state.experiment_id, state.parent_run_id,
                                          _trial_params(exp, plan, params.search_keys), tags,
                                          trial_tags(envs.family(env_id).tag_keys))
            tuner = make_tuner(exp, plan, params, storage, state.tune_dir,
                               [tracker, TrialProgress(console, params.search_keys, status=status_file)])
        results, interrupted = fit(tuner)
        console.print()
        if interrupted:
            status = KILLED
            console.print(f"sweep interrupted: continue it with {python_command()} -m experiments.run {args.conf} "
                          f"--resume{resume_flags(args)}", markup=False)
            return 130
        from experiments.scoring import score_sweep
        from experiments.trials_ledger import LedgerRun, TrialsLedger

        status_file.update(phase="scoring")
        ledger = LedgerRun(TrialsLedger(client, tracking_uri), exp.name, state.parent_run_id, tags["mlflow.user"],
                           git_commit(), exp.smoke_test, args.fresh_ledger or "")
        score_sweep(exp, results, params, client, state, storage, out_dir, console, ledger)
        status_file.update(phase="done", evaluations=[str(p) for p in sorted(out_dir.rglob("evaluation.csv"))],
                           verdicts=[str(p) for p in sorted(out_dir.rglob("verdict.txt"))])
        status = FINISHED
    except KeyboardInterrupt:
        status = KILLED
        raise
    finally:
        if state is not None:
            close_open_children(client, state.experiment_id, state.parent_run_id,
                                FINISHED if status == FINISHED else KILLED)
            client.set_terminated(state.parent_run_id, status=status)
        if started_ray:
            ray.shutdown()
    if hasattr(args, "started"):
        console.print(f"took {duration(time.monotonic() - args.started)}, estimated {checked.estimate.short()} "
                      f"(preset {preset.name}: edit its env_steps_per_second when the two disagree)", markup=False,
                      highlight=False)
    name = exp.tracking.experiment_name or exp.name
    for line in ui_lines(tracking_uri, [(f"MLflow run {state.parent_run_id} in experiment '{name}'",
                                         state.experiment_id)]):
        console.print(line, markup=False, highlight=False)
    return 0
