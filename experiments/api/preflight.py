"""Everything `--dry-run` runs: read and check one experiment, prepare its data, plan its hardware and build
its RLlib config, all before Ray starts.

`experiments.run` calls `preflight` for one experiment file; a run of several experiments
(`experiments.api.side_by_side`) calls it for each listed file with that experiment's share of the machine, so
a mistake in any of them stops the whole run before anything trains.
"""
from __future__ import annotations

import copy
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from pydantic import ValidationError

import algos
import envs
from algos.base import check_servable, check_servable_space
from envs.abilities import Backtests, CachesFeatures, PreparesData
from envs.errors import InputError
from envs.validation import describe_validation_error
from experiments.api.options import RunOptions
from experiments.config.checks import ENV_CONFIG_PREFIX
from experiments.config.ensemble import check_ensemble
from experiments.config.experiment import DEFAULT_ALGORITHM, ExperimentConfig
from experiments.config.files import Override, apply_overrides, parse_overrides, read_experiment
from experiments.config.load import load_experiment
from experiments.config.protocol import FOLD_KEY, fold_indices
from experiments.config.search_space import candidate_values
from experiments.config.search_space import describe as describe_space
from experiments.hardware import (
    HardwarePreset,
    PlanEstimate,
    ResourcePlan,
    estimate,
    resolve_plan,
    select_preset,
)
from experiments.hardware.batch import check_split, memory_cap
from experiments.hardware.plan import idle_cpus, trials_at_once
from experiments.records.run_events import Line, OnEvent, ignore, say
from experiments.results.examples import Examples, example_observations
from experiments.storage.filesystem import Storage, check_storage, resolve_storage

# A --smoke-test run: the same pipeline, 2 trials x 2 short iterations; each algorithm and each env family adds its
# own budget (AlgorithmSpec.smoke_overrides, e.g. DQN starts learning after 100 env steps; EnvFamily.smoke_overrides,
# e.g. the generation agent scores 5 paired seeds, not 20).
SMOKE_OVERRIDES = [
    "tune.num_samples=2",
    "tune.stop={training_iteration: 2}",
    "tune.checkpoint.frequency=1",
    "reporting.min_sample_timesteps_per_iteration=200",
    # Two short iterations never get past exploration: a smoke test keeps every iteration eligible.
    "tune.checkpoint.select.after_exploration=false",
]


@dataclass
class Checked:
    """One experiment that passed every check, with what its run needs."""

    exp: ExperimentConfig
    storage: Storage
    preset: HardwarePreset
    plan: ResourcePlan
    params: Any  # experiments.sweep.tuner.ParamSpace: the search space RLlib validated, which the sweep runs
    lines: list[str]  # the plan as printed: preset, resources, learning, estimate, search space, folds
    estimate: PlanEstimate
    examples: dict[int, Examples] = field(default_factory=dict)  # per fold: observations, action space


def smoke_version(exp: ExperimentConfig) -> ExperimentConfig:
    """Small, at different points: a group_by grid keeps its first two values, walk-forward folds their last two;
    without either, the first searched grid keeps its first num_samples values when it has that many (sampling
    its choices twice gave two identical trials); other grids become choices, and one seed is kept (two for an
    ensemble, which needs two members)."""
    group = exp.tune.group_by
    space_in = exp.tune.search_space
    grids = [key for key, domain in space_in.items() if "grid" in domain]
    kept = [key for key in grids if key in (group, FOLD_KEY)]
    firsts = {key: 2 for key in kept}
    if not kept and grids and len(space_in[grids[0]]["grid"]) >= exp.tune.num_samples:
        kept, firsts = grids[:1], {grids[0]: exp.tune.num_samples}
    space = {}
    for key, domain in space_in.items():
        if key in kept:  # walk-forward keeps the latest folds
            domain = {"grid": domain["grid"][-2:] if key == FOLD_KEY else domain["grid"][:firsts[key]]}
        elif "grid" in domain:
            domain = {"choice": domain["grid"]}
        space[key] = domain
    samples = 1 if kept else exp.tune.num_samples
    seeds = exp.tune.seeds[:2 if exp.ensemble else 1]
    tune = exp.tune.model_copy(update={"search_space": space, "seeds": seeds, "num_samples": samples})
    smoke = exp.model_copy(update={"tune": tune})
    smoke._smoke_test = True
    return smoke


def load(conf: Path, overrides: Sequence[str | Override], smoke_test: bool) -> ExperimentConfig:
    """The experiment as it will run: the file, its --set overrides and, for a smoke test, the smoke budget (the
    file is read once and each --set parsed once either way)."""
    overrides = parse_overrides(overrides)
    if not smoke_test:
        exp = load_experiment(conf, overrides)
    else:
        raw = read_experiment(conf)
        exp = smoke_version(load_experiment(conf, [*smoke_budget(raw, overrides), *overrides], raw=raw))
    check_selection(exp, str(conf))
    check_ensemble(exp, str(conf))
    return exp


def smoke_budget(raw: dict[str, Any], overrides: Sequence[Override]) -> tuple[Override, ...]:
    """The smoke test's overrides: the platform's, then the algorithm's and the env family's own (the algorithm and
    the env may come from --set or extends). A name that is not known adds nothing here; the file's validation
    refuses it in its own words."""
    probe = apply_overrides(copy.deepcopy(raw), overrides)
    algorithm, env = probe.get("algorithm", DEFAULT_ALGORITHM), (probe.get("environment") or {}).get("env")
    spec = algos.algorithm(algorithm) if isinstance(algorithm, str) and algorithm in algos.ALGORITHMS else None
    family = envs.family(env) if isinstance(env, str) else None
    return (*parse_overrides(SMOKE_OVERRIDES), *parse_overrides(spec.smoke_overrides if spec else ()),
            *parse_overrides(family.smoke_overrides if family else ()))


def check_selection(exp: ExperimentConfig, source: str) -> None:
    """A rule that keeps only checkpoints after exploration needs trials that get there."""
    if not exp.tune.checkpoint.select.after_exploration:
        return
    explore, budget = exp.spec.exploration_steps(exp.training), env_steps_per_trial(exp)
    if explore >= budget:
        raise InputError(f"{source}: tune.checkpoint.select.after_exploration: exploration decays at {explore} env "
                         f"steps but a trial stops at about {budget}, so no checkpoint would be eligible: end the "
                         "exploration schedule earlier, train longer, or set after_exploration: false")


def prepare_data(exp: ExperimentConfig, fetch: bool, log: Callable[[str], None]) -> list[str]:
    """Make the env family's data local before anything starts (e.g. fetch the coins of a sweep), or, when
    `fetch` is off (dry run), report what is missing. Returns what is still missing."""
    if not isinstance(exp.family, PreparesData):
        return []
    searched = {key.removeprefix(ENV_CONFIG_PREFIX): candidate_values(domain)
                for key, domain in exp.tune.search_space.items() if key.startswith(ENV_CONFIG_PREFIX)}
    return exp.family.prepare_data(exp.environment.env_config, searched, fetch, log)


def check_environment(exp: ExperimentConfig, construct: bool = True) -> tuple[list[str], int, dict[int, Examples]]:
    """Fail before Ray starts if the env id is unknown or its data/config is bad; every fold must fit the
    data. Each fold's env is built once, as its trials train on it; its split checks every part of the fold (train,
    validation, test) against the episode length and decision interval, and the evaluation env_config was checked by
    the family's model when the file was read (a family without one gets the evaluation's keys in its one build).
    Returns what the env says of itself (e.g. its features)
    and, with several folds, one line per fold with its periods; the bytes of one observation (float32), which size
    the update batch's memory (0 if not built); and each fold's example observations and action space, which
    registration gives the model as its input example."""
    env_id, env_config = exp.environment.env, exp.environment.env_config
    envs.require_registered(env_id)
    if not construct:
        return [], 0, {}
    periods: list[str] = []
    described: list[str] = []
    observation_bytes = 0
    examples: dict[int, Examples] = {}
    for fold in fold_indices(exp):
        fold_config = {**env_config, "fold": fold} if FOLD_KEY in exp.tune.search_space else env_config
        # An env without a config model (a Gymnasium id's keyword arguments) is built with the evaluation's keys laid
        # over it, so a key its evaluation env would refuse is refused here, not after training.
        evaluated = fold_config if exp.family.config_model() else {**fold_config, **exp.evaluation.env_config}
        env = exp.family.make(evaluated)
        check_action_space(exp, env.action_space)
        check_servable_space(exp.algorithm, exp.spec, env.action_space, exp.training)
        exp.spec.check_env(env, env_id, exp.training)
        described = described or envs.plan_lines(env)  # the first env built says where its features came from
        observation_bytes = 4 * math.prod(env.observation_space.shape or (1,))
        if isinstance(exp.family, Backtests):
            parts = env.unwrapped.split_periods()
            periods.append(f"fold {fold}: " + ", ".join(f"{name} {a}..{b}" for name, (a, b) in parts.items()))
        examples[fold] = example_observations(env)
        env.close()
    return described + (periods if len(periods) > 1 else []), observation_bytes, examples


def cap_batch(exp: ExperimentConfig, preset: HardwarePreset, observation_bytes: int,
              source: str) -> tuple[ExperimentConfig, list[str]]:
    """The experiment with its update batch capped so that one update's observations fit the preset's memory
    (experiments.hardware.batch.memory_cap), and the line that says so; unchanged when it fits. A universe of 500
    assets can ask for more than a GPU holds; a coin's window never does."""
    batch = exp.training.train_batch_size_per_learner
    trials = min(exp.tune.max_concurrent_trials or trials_at_once(preset), max(exp.num_trials(), 1))
    cap, where = memory_cap(observation_bytes, preset, trials)
    if not observation_bytes or not isinstance(batch, int) or batch <= cap:
        return exp, []
    capped = {"train_batch_size_per_learner": cap}
    minibatch = getattr(exp.training, "minibatch_size", None)
    if isinstance(minibatch, int) and minibatch > cap:
        capped["minibatch_size"] = cap
    line = (f"batch CAPPED by memory: {batch} observations of {observation_bytes / 1e6:.3g} MB are "
            f"{batch * observation_bytes / 1e9:.3g} GB, over {where}: batch {batch} -> {cap}")
    return with_training(exp, capped, source), [line]


def with_training(exp: ExperimentConfig, values: dict[str, Any], source: str) -> ExperimentConfig:
    """`exp` with these training keys set as a --set sets them, without reading the file again: the training section
    validated anew, and a key the search space searched pinned (it leaves the search; the plan says so)."""
    try:
        training = type(exp.training).model_validate({**exp.training.model_dump(), **values})
    except ValidationError as error:
        raise InputError(describe_validation_error(error, source, type(exp.training), "training.")) from None
    pinned = {f"training.{key}": value for key, value in values.items()
              if f"training.{key}" in exp.tune.search_space}
    tune = exp.tune.model_copy(update={
        "search_space": {key: domain for key, domain in exp.tune.search_space.items() if key not in pinned},
        "group_by": None if exp.tune.group_by in pinned else exp.tune.group_by})
    edited = exp.model_copy(update={"training": training, "tune": tune})
    edited._pinned = {**exp.pinned, **pinned}
    return edited


def check_action_space(exp: ExperimentConfig, space: Any) -> None:
    """The algorithm must act in the env's action space (`AlgorithmSpec.action_spaces`): DQN picks one of n actions
    and cannot size a position, SAC outputs a vector and cannot pick one. Refused here, not by RLlib mid-sweep."""
    if exp.spec.supports(space):
        return
    fits = [name for name in algos.ALGORITHMS if algos.algorithm(name).supports(space)]
    raise InputError(f"{exp.environment.env} acts in {space}, and algorithm {exp.algorithm} acts in "
                     f"{' or '.join(exp.spec.action_spaces)} spaces only: "
                     f"use algorithm: {' or '.join(fits) or '?'}, or an env_config whose actions it can take")


def env_steps_per_trial(exp: ExperimentConfig) -> int:
    stop = exp.tune.stop
    for key in ("env_runners/num_env_steps_sampled_lifetime", "num_env_steps_sampled_lifetime"):
        if key in stop:
            return int(stop[key])
    return int(stop.get("training_iteration", 10) * exp.reporting.min_sample_timesteps_per_iteration)


def describe_plateau(exp: ExperimentConfig) -> str | None:
    """The plan's line for tune.plateau: what stops a trial before tune.stop, which stays its maximum (and the
    estimate's budget)."""
    if exp.tune.plateau is None:
        return None
    metric, mode, min_delta = exp.tune.curve_rule()
    gain = f"by more than {min_delta:g}" if min_delta else "at all"
    maximum = ", ".join(f"{key} {value:g}" for key, value in exp.tune.stop.items())
    return (f"plateau: a trial stops once {metric} ({mode}) has not improved {gain} for {exp.tune.plateau.patience} "
            f"iteration(s), else at tune.stop ({maximum}), the maximum the estimate counts")


def describe_learning(plan: ResourcePlan, exp: ExperimentConfig) -> str:
    """What the preset changes in how the agent learns (experiments/hardware/batch.py): usually nothing."""
    training, fragment = exp.training, exp.env_runners.rollout_fragment_length
    ratio = exp.spec.replay_ratio(training, fragment, plan.num_envs_per_env_runner) if fragment != "auto" else None
    line = plan.batch_plan.describe(training.lr, ratio)
    if plan.mixed_precision == "none":
        return line
    if not exp.spec.mixed_precision(training):
        return (f"{line}; mixed precision {plan.mixed_precision} NOT applied: {exp.algorithm} with these settings "
                "has no autocast (docs/hardware.md)")
    # The batch and lr are the experiment's, but bf16/fp16 arithmetic is not fp32's: results differ from a CPU run.
    line = line.replace("learning unchanged by the preset:", "batch and lr unchanged by the preset:", 1)
    return (f"{line}; numerics CHANGED: mixed precision {plan.mixed_precision} (autocast in the learner), so "
            f"the numbers differ from an fp32 run of the same file")


def plan_resources(exp: ExperimentConfig, preset: HardwarePreset, reason: str) -> tuple[ResourcePlan, PlanEstimate,
                                                                                          list[str]]:
    """The preset's plan for this experiment, its time/cost estimate and the lines that describe both."""
    plan = resolve_plan(preset, exp.timeframe, exp.num_trials(), exp.training.train_batch_size_per_learner,
                        exp.training.batch_scaling)
    check_split(plan.update_batch, max(plan.num_learners, 1), exp.spec.splits_batch_unevenly(exp.training),
                exp.algorithm, f"preset {preset.name} with training.train_batch_size_per_learner")
    if exp.tune.max_concurrent_trials:  # the experiment's own cap wins over the preset's concurrency
        plan = plan.with_concurrency(exp.tune.max_concurrent_trials)
    speedup = exp.spec.speedup(exp.training)
    budget = estimate(plan, preset, exp.num_trials(), env_steps_per_trial(exp), speedup)
    idle = idle_cpus(plan, preset, exp.num_trials())
    lines = [f"hardware preset: {preset.name} (chosen by {reason})", plan.describe(), *([idle] if idle else []),
             describe_learning(plan, exp),
             budget.describe() + f" [estimate from the preset's declared env steps/s x {speedup:g} for "
             f"{exp.algorithm} with these training settings]"]
    plateau = describe_plateau(exp)
    lines += [plateau] if plateau else []
    if exp.tune.search_space:
        lines.append("search space: " + ", ".join(f"{k}={v}" for k, v in describe_space(exp.tune.search_space).items()))
    lines += [f"note: {note}" for note in exp.notes]
    if exp.pinned:
        lines.append("pinned by --set (not searched): " + ", ".join(f"{k}={v}" for k, v in exp.pinned.items()))
    return plan, budget, lines


def named_in(conf: Path, error: InputError) -> InputError:
    """A refusal that starts with a key of the experiment (`environment.env_config.features: ...`, raised where the
    data is read) names the experiment file too, as the file's validation does; one naming a data file is kept."""
    message = str(error)
    section = message.split(":", 1)[0].split(".", 1)[0]
    return InputError(f"{conf}: {message}") if section in ExperimentConfig.model_fields else error


def preflight(conf: Path, overrides: Sequence[str | Override], options: RunOptions,
              on_event: OnEvent[Line] | None = None, fetch: bool = False,
              preset: tuple[HardwarePreset, str] | None = None) -> Checked:
    """Every check that needs no Ray, then the RLlib config built once (its param space is what runs); what it
    fetches is said through `on_event`. `preset`: (preset, why) chosen by the caller, e.g. an experiment's share of
    the machine; else --hardware (`options.hardware`), GPU_PROFILE, the file's `hardware:` or detection choose."""
    exp = load(conf, overrides, options.smoke_test)
    check_servable(exp.algorithm, exp.spec)  # registration comes after the whole sweep: refuse what it would refuse
    exp.tracking_uri()  # a URI with credentials in it is refused before anything prints or saves it
    storage = resolve_storage(options.storage, exp.storage, options.output, str(conf))
    check_storage(storage)  # unreachable, missing bucket, refused credentials: before anything is written
    exp = with_feature_store(exp, storage)
    missing = prepare_data(exp, fetch=fetch, log=say(on_event or ignore))
    try:
        periods, observation_bytes, examples = check_environment(exp, construct=not missing)
    except InputError as error:
        raise named_in(conf, error) from None
    chosen, reason = preset or select_preset(options.hardware, os.environ, exp.hardware)
    exp, capped = cap_batch(exp, chosen, observation_bytes, str(conf))
    plan, budget, lines = plan_resources(exp, chosen, reason)
    lines += capped
    from experiments.sweep.tuner import check_buildable

    params = check_buildable(exp, plan, str(conf))
    lines += periods
    return Checked(exp, storage, chosen, plan, params, lines, budget, examples)


def with_feature_store(exp: ExperimentConfig, storage: Storage) -> ExperimentConfig:
    """`exp` whose env_config names the run's feature store (a family that caches computed features shares them
    between trials there), unless the file names one."""
    if not isinstance(exp.family, CachesFeatures):
        return exp
    env_config = exp.family.attach_store(exp.environment.env_config, storage.uri_of("features"))
    return exp.model_copy(update={"environment": exp.environment.model_copy(update={"env_config": env_config})})
