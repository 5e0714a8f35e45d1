"""`python -m experiments.run CONF`: validate, plan resources, sweep with Tune, track in MLflow, score out of sample.

Exit codes: 0 done, 2 bad input (one readable message, no traceback), 1 a failed sweep,
130 interrupted.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.markup import escape

import envs
from envs.errors import InputError
from experiments.checks import ENV_CONFIG_PREFIX
from experiments.cluster import leftover_address_file, resolve_ray_target
from experiments.config import ExperimentConfig, load_experiment
from experiments.hardware import estimate, resolve_plan, select_preset
from experiments.protocol import FOLD_KEY, fold_indices
from experiments.search_space import candidate_values
from experiments.search_space import describe as describe_space
from experiments.shell import runnable, terminal_console
from experiments.storage import check_storage, resolve_storage

LOOPBACK = "127.0.0.1"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m experiments.run", description=__doc__)
    parser.add_argument("conf", type=Path, help="experiment YAML, e.g. conf/dqn_btc.yaml")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a setting by dotted path, e.g. --set training.lr=1e-4 (repeatable)")
    parser.add_argument("--dry-run", action="store_true", help="validate and print the plan; train nothing")
    parser.add_argument("--smoke-test", action="store_true", help="the same pipeline with 2 trials x 2 iterations")
    parser.add_argument("--resume", action="store_true",
                        help="continue the last interrupted sweep of this experiment (same --output)")
    parser.add_argument("--hardware", help="hardware preset name or YAML path (else GPU_PROFILE, the YAML, detection)")
    parser.add_argument("--address",
                        help="join a Ray cluster: HOST:PORT, ray://HOST:PORT, auto (the one `ray start` started here) "
                             "or local (start our own); default RAY_ADDRESS, else a live `ray start` cluster on this "
                             "machine, else a local Ray")
    parser.add_argument("--storage",
                        help="where Tune results, checkpoints and the resume file go: a folder or s3://BUCKET/PREFIX "
                             "(?endpoint_override=http://HOST:PORT or AWS_ENDPOINT_URL_S3 for S3-compatible stores); "
                             "default: storage: in the file, else RLPLATFORM_STORAGE, else --output")
    parser.add_argument("--no-dashboard", action="store_true", help="do not start the Ray dashboard")
    parser.add_argument("--dashboard-host", default=LOOPBACK,
                        help="interface for the Ray dashboard (default 127.0.0.1: this machine only)")
    parser.add_argument("--output", type=Path, default=Path("runs"),
                        help="folder for evaluation files, and for Tune results unless --storage says otherwise "
                             "(default ./runs)")
    return parser.parse_args(argv)


# A --smoke-test run: the same pipeline, 2 trials x 2 short iterations; each algorithm adds its own budget
# (AlgorithmSpec.smoke_overrides), e.g. DQN starts learning after 100 env steps.
SMOKE_OVERRIDES = [
    "tune.num_samples=2",
    "tune.stop={training_iteration: 2}",
    "tune.checkpoint.frequency=1",
    "reporting.min_sample_timesteps_per_iteration=200",
]


def prepare_data(exp: ExperimentConfig, fetch: bool, console: Console) -> list[str]:
    """Make the env family's data local before anything starts (e.g. fetch the coins of a sweep), or, when
    `fetch` is off (dry run), report what is missing. Returns what is still missing."""
    searched = {key.removeprefix(ENV_CONFIG_PREFIX): candidate_values(domain)
                for key, domain in exp.tune.search_space.items() if key.startswith(ENV_CONFIG_PREFIX)}
    return envs.prepare_data(exp.environment.env, exp.environment.env_config, searched, fetch, console.print)


def smoke_version(exp: ExperimentConfig) -> ExperimentConfig:
    """Two trials in all: a group_by grid keeps its first two values (one trial each), walk-forward folds
    their last two, other grids become choices, and one seed is kept."""
    group = exp.tune.group_by
    space = {}
    for key, domain in exp.tune.search_space.items():
        if "grid" in domain and key == group:
            domain = {"grid": domain["grid"][:2]}
        elif "grid" in domain and key == FOLD_KEY:
            domain = {"grid": domain["grid"][-2:]}  # the two most recent folds
        elif "grid" in domain:
            domain = {"choice": domain["grid"]}
        space[key] = domain
    kept_grids = (group and "grid" in space.get(group, {})) or FOLD_KEY in space
    samples = 1 if kept_grids else exp.tune.num_samples
    tune = exp.tune.model_copy(update={"search_space": space, "seeds": exp.tune.seeds[:1], "num_samples": samples})
    smoke = exp.model_copy(update={"tune": tune})
    smoke._smoke_test = True
    return smoke


def load(args: argparse.Namespace) -> ExperimentConfig:
    if not args.smoke_test:
        return load_experiment(args.conf, args.overrides)
    spec = load_experiment(args.conf, args.overrides).spec  # the algorithm may come from --set or extends
    return smoke_version(load_experiment(args.conf, [*SMOKE_OVERRIDES, *spec.smoke_overrides, *args.overrides]))


def check_environment(exp: ExperimentConfig, construct: bool = True) -> list[str]:
    """Fail before Ray starts if the env id is unknown or its data/config is bad; every fold must fit the
    data. Returns one line per fold with its periods (for families with folds)."""
    env_id, env_config = exp.environment.env, exp.environment.env_config
    envs.require_registered(env_id)
    if not construct:
        return []
    periods = []
    for fold in fold_indices(exp):
        fold_config = {**env_config, "fold": fold} if FOLD_KEY in exp.tune.search_space else env_config
        env = envs.make_env(env_id, fold_config)
        envs.make_env(env_id, {**fold_config, **exp.evaluation.env_config}).close()
        if envs.supports_folds(env_id):
            parts = env.unwrapped.split_periods()
            periods.append(f"fold {fold}: " + ", ".join(f"{name} {a}..{b}" for name, (a, b) in parts.items()))
        env.close()
    return periods


def env_steps_per_trial(exp: ExperimentConfig) -> int:
    stop = exp.tune.stop
    for key in ("env_runners/num_env_steps_sampled_lifetime", "num_env_steps_sampled_lifetime"):
        if key in stop:
            return int(stop[key])
    return int(stop.get("training_iteration", 10) * exp.reporting.min_sample_timesteps_per_iteration)


def describe_learning(plan: Any, exp: ExperimentConfig) -> str:
    """What the preset changes in how the agent learns (experiments/hardware/batch.py): usually nothing."""
    training, fragment = exp.training, exp.env_runners.rollout_fragment_length
    ratio = exp.spec.replay_ratio(training, fragment, plan.num_envs_per_env_runner) if fragment != "auto" else None
    line = plan.batch_plan.describe(training.lr, ratio)
    if plan.mixed_precision != "none":
        line += (f"; mixed precision {plan.mixed_precision} (autocast in the learner)"
                 if exp.spec.mixed_precision(training) else f"; mixed precision {plan.mixed_precision} NOT applied: "
                 f"{exp.algorithm} with these settings has no autocast (docs/hardware.md)")
    return line


def print_plan(console: Console, exp: ExperimentConfig, args: argparse.Namespace) -> Any:
    preset, reason = select_preset(args.hardware, os.environ, exp.hardware)
    plan = resolve_plan(preset, exp.timeframe, exp.num_trials(), exp.training.train_batch_size_per_learner,
                        exp.training.batch_scaling)
    console.print(f"[bold]{escape(exp.name)}[/bold]: {escape(exp.algorithm)} on {escape(exp.environment.env)} "
                  f"({exp.num_trials()} trial(s))")
    lines = [f"hardware preset: {preset.name} (chosen by {reason})", plan.describe(), describe_learning(plan, exp)]
    speedup = exp.spec.speedup(exp.training)
    lines.append(estimate(plan, preset, exp.num_trials(), env_steps_per_trial(exp), speedup).describe()
                 + f" [estimate from the preset's declared env steps/s x {speedup:g} for {exp.algorithm} with these "
                 "training settings]")
    if exp.tune.search_space:
        lines.append("search space: " + ", ".join(f"{k}={v}" for k, v in describe_space(exp.tune.search_space).items()))
    if exp.pinned:
        lines.append("pinned by --set (not searched): " + ", ".join(f"{k}={v}" for k, v in exp.pinned.items()))
    for line in lines:
        console.print(line, markup=False, highlight=False)
    return preset, plan


def main(argv: list[str] | None = None) -> int:
    console = terminal_console()
    try:
        args = parse_args(argv)
        exp = load(args)
        exp.tracking_uri()  # a URI with credentials in it is refused before anything prints or saves it
        storage = resolve_storage(args.storage, exp.storage, args.output, str(args.conf))
        check_storage(storage)  # unreachable, missing bucket, refused credentials: before anything is written
        ray_target = resolve_ray_target(args.address, os.environ, leftover_address_file())
        missing = prepare_data(exp, fetch=not args.dry_run, console=console)
        periods = check_environment(exp, construct=not missing)
        preset, plan = print_plan(console, exp, args)
        from experiments.sweep import check_buildable

        params = check_buildable(exp, plan, str(args.conf))  # the sweep runs exactly what was checked
        for line in periods if len(periods) > 1 else []:
            console.print(line)
        console.print(f"storage: {storage.uri} ({storage.source})", markup=False, highlight=False)
        if args.dry_run:
            console.print(f"ray: {ray_target.note or 'a local Ray'}", markup=False, highlight=False)
            console.print("resolved experiment:")
            console.print(yaml.safe_dump(exp.model_dump(mode="json"), sort_keys=False), markup=False)
            return 0
        from experiments.pipeline import run_experiment

        return run_experiment(exp, preset, plan, params, storage, ray_target, args, console)
    except InputError as error:
        print(f"error: {runnable(str(error))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
