"""The training run behind `experiments.run`: Ray, MLflow parent run, Tune sweep, out-of-sample scoring."""
from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path
from typing import Any

import yaml
from mlflow.entities import RunStatus
from rich.console import Console

from experiments.config import ExperimentConfig
from experiments.hardware import HardwarePreset, ResourcePlan, check_live_cluster
from experiments.tracking import (
    MlflowTrialCallback,
    flatten,
    git_commit,
    log_params,
    make_client,
    open_experiment,
)


def start_ray(args: argparse.Namespace, console: Console) -> bool:
    """Join `--address`/RAY_ADDRESS, or start a local Ray; returns True when we started it."""
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if args.address:
        ray.init(address=args.address, logging_level="ERROR", log_to_driver=False)
        console.print(f"joined Ray cluster at {args.address}")
        return False
    if args.dashboard_host != "127.0.0.1":
        console.print(f"[yellow]warning: the Ray dashboard listens on {args.dashboard_host}: anyone who can reach "
                      "this machine can see and control the cluster[/yellow]")
    context = ray.init(include_dashboard=not args.no_dashboard, dashboard_host=args.dashboard_host,
                       dashboard_port=8265, logging_level="ERROR", log_to_driver=False)
    if context.dashboard_url:
        console.print(f"Ray dashboard: http://{context.dashboard_url}")
    return True


def _trial_params(exp: ExperimentConfig, plan: ResourcePlan, search_keys: dict[str, str]):
    static = flatten(exp.model_dump(mode="json", exclude={"tune", "tracking", "description"}))

    def params(trial: Any) -> dict[str, Any]:
        values = dict(static)
        for flat_key, value in (trial.evaluated_params or {}).items():
            values[search_keys.get(flat_key, flat_key)] = value
        values["seed"] = trial.config.get("seed")
        return {**values, **plan.as_params()}

    return params


def _silence_rllib_import_noise() -> None:
    """RLlib's algorithm registry builds a DreamerV3 debug CartPole at import time, whose float64
    Box bounds make Gymnasium warn in the driver. The warning is about RLlib's env, not ours."""
    warnings.filterwarnings("ignore", category=UserWarning,
                            module=r"gymnasium\.(spaces\.box|utils\.passive_env_checker)")


def run_experiment(exp: ExperimentConfig, preset: HardwarePreset, plan: ResourcePlan,
                   args: argparse.Namespace, console: Console) -> int:
    import ray
    import torch

    from experiments.evaluate import evaluate_checkpoint, log_report, print_report
    from experiments.policy import load_greedy_policy
    from experiments.progress import LiveTrialTable
    from experiments.sweep import best_checkpoint, build_param_space, make_tuner

    torch.set_num_threads(1)  # the driver's torch must not fight the trials for 2 cores
    _silence_rllib_import_noise()
    started_ray = start_ray(args, console)
    tracking_uri = exp.tracking_uri()
    client = make_client(tracking_uri)
    experiment_id = open_experiment(client, exp.tracking.experiment_name or exp.name, tracking_uri)
    env_config = exp.environment.env_config
    tags = {"git_commit": git_commit(), "hardware/preset": preset.name, "env": exp.environment.env,
            "symbol": str(env_config.get("symbol", env_config.get("data_path", exp.environment.env))),
            "smoke_test": str(args.smoke_test)}
    parent = client.create_run(experiment_id, run_name=f"{exp.name}-{time.strftime('%Y%m%d-%H%M%S')}",
                               tags={**tags, "role": "sweep"})
    parent_id = parent.info.run_id
    out_dir = args.output.resolve() / exp.name / parent_id
    out_dir.mkdir(parents=True, exist_ok=True)
    status = RunStatus.to_string(RunStatus.FAILED)
    tracker = progress = None
    try:
        check_live_cluster(plan)
        console.print(plan.describe())
        resolved = out_dir / "experiment.yaml"
        resolved.write_text(yaml.safe_dump(exp.model_dump(mode="json"), sort_keys=False))
        client.log_artifact(parent_id, str(resolved))
        log_params(client, parent_id, {**flatten(exp.model_dump(mode="json", exclude={"description"})),
                                       **plan.as_params()})
        params = build_param_space(exp, plan)
        tracker = MlflowTrialCallback(tracking_uri, experiment_id, parent_id,
                                      _trial_params(exp, plan, params.search_keys), tags)
        progress = LiveTrialTable(console, params.search_keys)
        tuner = make_tuner(exp, plan, params, args.output / "tune", [tracker, progress])
        results = tuner.fit()
        progress.stop()
        best, checkpoint = best_checkpoint(results, exp.tune.metric, exp.tune.mode)
        console.print(f"best trial: {Path(best.path).name} ({exp.tune.metric} = "
                      f"{_metric(best.metrics, exp.tune.metric)}), checkpoint {checkpoint}")
        report = evaluate_checkpoint(load_greedy_policy(checkpoint), exp.environment.env, env_config)
        print_report(console, report)
        best_run = tracker.run_ids_by_trial.get(best.metrics.get("trial_id", ""))
        log_report(client, [parent_id, *([best_run] if best_run else [])], report, out_dir)
        client.log_artifacts(parent_id, str(checkpoint), "best_checkpoint")
        client.set_tag(parent_id, "best_checkpoint", str(checkpoint))
        status = RunStatus.to_string(RunStatus.FINISHED)
    except KeyboardInterrupt:
        status = RunStatus.to_string(RunStatus.KILLED)
        raise
    finally:
        if progress is not None:
            progress.stop()
        if tracker is not None:
            tracker.close_all(status)
        client.set_terminated(parent_id, status=status)
        if started_ray:
            ray.shutdown()
    console.print(f"MLflow run {parent_id} in experiment '{exp.tracking.experiment_name or exp.name}'. Open the UI with:")
    console.print(f"  mlflow ui --backend-store-uri {tracking_uri} --host 127.0.0.1 --port 5000", markup=False)
    return 0


def _metric(metrics: dict[str, Any], dotted: str) -> Any:
    node: Any = metrics
    for part in dotted.split("/"):
        node = node.get(part) if isinstance(node, dict) else None
    return node
