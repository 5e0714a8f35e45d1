"""The Tune sweep: a param space built from the experiment, a Tuner, and its results.

Search domains are placed in the RLlib config at their YAML paths by way of sentinel
strings, so that after `DQNConfig.to_dict()` we know under which flattened key Tune will
report each searched value (`trial.evaluated_params`) and can log it under its YAML name.
"""
from __future__ import annotations

import contextlib
import logging
import os
import signal
from functools import partial
from pathlib import Path
from typing import Any, Iterable, Iterator

from ray import tune
from ray.tune import CheckpointConfig, FailureConfig, ResultGrid, RunConfig, TuneConfig, Tuner

from algos.rllib.config import SELECTION_SCORE
from algos.tree_path import set_value, value_at
from envs.errors import InputError
from experiments.config.experiment import ExperimentConfig
from experiments.config.search_space import candidate_values, to_domains
from experiments.hardware import ResourcePlan
from experiments.records.params import ParamSpace
from experiments.storage.checkpoint_pruning import CheckpointPruner
from experiments.storage.filesystem import Storage
from experiments.storage.resume_check import no_silent_restart
from experiments.sweep.plateau import stop_rule
from experiments.sweep.reuse import reusable
from experiments.sweep.rllib_config import build_config, trainable

_SENTINEL = "__search__:"
TUNE_LOGGERS = ("ray.tune", "ray.train", "ray.air")


def _find_sentinels(tree: Any, path: tuple[str, ...] = ()) -> Iterable[tuple[tuple[str, ...], str]]:
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _find_sentinels(value, (*path, str(key)))
    elif isinstance(tree, str) and tree.startswith(_SENTINEL):
        yield path, tree.removeprefix(_SENTINEL)


def build_param_space(exp: ExperimentConfig, plan: ResourcePlan) -> ParamSpace:
    domains = to_domains(exp.tune.search_space)
    sentinels = {key: f"{_SENTINEL}{key}" for key in domains}
    config = build_config(exp, plan, domains=sentinels, seed=0).to_dict()
    search_keys: dict[str, str] = {}
    first_path: dict[str, tuple[str, ...]] = {}
    for path, yaml_key in _find_sentinels(config):
        if yaml_key in first_path:
            # A searched env_config key is also in the evaluation env_config: one draw, two places.
            if exp.tune.search_alg == "optuna":
                raise InputError(f"tune.search_space.{yaml_key}: optuna cannot search a key that RLlib needs "
                                 "twice (training and evaluation env_config): use search_alg: random")
            set_value(config, path, tune.sample_from(partial(value_at, path=first_path[yaml_key])))
            continue
        first_path[yaml_key] = path
        set_value(config, path, domains[yaml_key])
        search_keys["/".join(path)] = yaml_key
    missing = set(domains) - set(search_keys.values())
    if missing:
        raise InputError(f"tune.search_space: {', '.join(sorted(missing))} did not reach the {exp.algorithm} "
                         "config RLlib builds, so Tune could not search it: search another key")
    seeds = exp.tune.seeds
    config["seed"] = tune.grid_search(seeds) if len(seeds) > 1 else seeds[0]
    if len(seeds) > 1:
        search_keys["seed"] = "seed"
    return ParamSpace(space=config, search_keys=search_keys)


def check_buildable(exp: ExperimentConfig, plan: ResourcePlan, source: str) -> ParamSpace:
    """Build the sweep's full RLlib config with every search domain in place, and let RLlib validate one
    point of it (each searched key at its first value): all before a trial starts, as `--dry-run` does."""
    params = build_param_space(exp, plan)
    point = {key: candidate_values(domain)[0] for key, domain in exp.tune.search_space.items()}
    try:
        build_config(exp, plan, domains=point, seed=exp.tune.seeds[0]).validate()
    except (ValueError, TypeError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise InputError(f"{source}: RLlib refuses the {exp.algorithm} config built from this file: {first}") from None
    return params


def search_algorithm(exp: ExperimentConfig) -> Any:
    """The searcher, seeded from the file (`tune.search_seed`) so the same file samples the same points.

    random: Tune's variant generator with `constant_grid_search`, so a sampled point is drawn once and
    then repeated over every grid value (seeds, folds): otherwise Tune draws it anew per grid cell
    and "the same configuration on another seed" would be another configuration."""
    if exp.tune.search_alg == "optuna":
        from ray.tune.search.optuna import OptunaSearch

        return OptunaSearch(metric=exp.tune.metric, mode=exp.tune.mode, seed=exp.tune.search_seed)
    from ray.tune.search.basic_variant import BasicVariantGenerator

    return BasicVariantGenerator(constant_grid_search=True, random_state=exp.tune.search_seed)


def scheduler(exp: ExperimentConfig) -> Any:
    settings = exp.tune.scheduler
    if settings.type != "asha":
        return None
    from ray.tune.schedulers import ASHAScheduler

    max_t = settings.max_t or int(exp.tune.stop.get("training_iteration", 100))
    return ASHAScheduler(time_attr="training_iteration", metric=exp.tune.metric, mode=exp.tune.mode,
                         max_t=max_t, grace_period=min(settings.grace_period, max_t),
                         reduction_factor=settings.reduction_factor)


def run_config(exp: ExperimentConfig, storage: Storage, tune_dir: str, callbacks: list[Any]) -> RunConfig:
    """Tune writes results and checkpoints to `tune_dir` in `storage` (on S3 when the sweep spans nodes); a trial
    stops at `tune.stop`, or earlier at `tune.plateau` (experiments/sweep/plateau.py). Tune keeps every checkpoint;
    `CheckpointPruner` keeps `tune.checkpoint.num_to_keep` of them once no saved state can name the others
    (experiments/storage/checkpoint_pruning.py)."""
    checkpoint = exp.tune.checkpoint
    parent, name = tune_dir.rstrip("/").rsplit("/", 1)
    pruner = CheckpointPruner(storage, tune_dir, checkpoint.num_to_keep, exp.tune.mode)
    return RunConfig(
        name=name,
        storage_path=parent,
        storage_filesystem=storage.tune_filesystem(),
        stop=stop_rule(exp),  # tune.stop's dict, or with tune.plateau a Stopper (experiments/sweep/plateau.py)
        callbacks=[*callbacks, pruner],
        verbose=0,
        failure_config=FailureConfig(max_failures=exp.tune.max_failures),
        checkpoint_config=CheckpointConfig(
            num_to_keep=None,
            checkpoint_score_attribute=SELECTION_SCORE,  # tune.metric, flat (see algos.rllib.config.SELECTION_SCORE)
            checkpoint_score_order=exp.tune.mode,
            checkpoint_frequency=checkpoint.frequency,
            checkpoint_at_end=True,
        ),
    )


def make_tuner(exp: ExperimentConfig, plan: ResourcePlan, params: ParamSpace, storage: Storage, tune_dir: str,
               callbacks: list[Any]) -> Tuner:
    return Tuner(
        reusable(trainable(exp)),
        param_space=params.space,
        tune_config=TuneConfig(
            num_samples=exp.tune.num_samples,
            max_concurrent_trials=plan.max_concurrent_trials,  # the experiment's cap is in the plan
            search_alg=search_algorithm(exp),
            scheduler=scheduler(exp),
            reuse_actors=True,  # one trial process per slot, its algorithm rebuilt per trial (reuse.py)
        ),
        run_config=run_config(exp, storage, tune_dir, callbacks),
    )


def _raise_keyboard_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def fit(tuner: Tuner, log_file: Path, resuming: bool = False) -> tuple[ResultGrid, bool]:
    """Run the sweep; also say whether the user interrupted it.

    Tune catches the first Ctrl-C, stops the trials, saves its state and returns normally. Its
    handler then re-installs the handler that was in place before `fit`, so finding ours back
    tells an interrupted sweep from a finished one (a second Ctrl-C raises KeyboardInterrupt).

    Tune's own log (a trial's traceback when its worker dies, storage retries) goes to `log_file`, not the
    terminal: our progress lines say what happened in one line each (experiments/sweep/progress.py). A resumed
    sweep that Tune cannot read back ends the run instead of starting over (experiments/storage/resume_check.py).
    """
    # Tune's newer console output ignores verbose=0: it prints a configuration box and a TensorBoard hint
    # (TensorBoard is not installed). Our own progress (experiments/sweep/progress.py) replaces it.
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    # Tune's TensorBoard logger warns at every -inf selection score: an iteration a checkpoint rule leaves out
    # (tune.checkpoint.select) gets the worst score on purpose.
    logging.getLogger("tensorboardX.x2num").setLevel(logging.ERROR)
    previous = signal.signal(signal.SIGINT, _raise_keyboard_interrupt)
    try:
        with tune_log_to(log_file), (no_silent_restart() if resuming else contextlib.nullcontext()):
            results = tuner.fit()
        interrupted = signal.getsignal(signal.SIGINT) is _raise_keyboard_interrupt
    finally:
        signal.signal(signal.SIGINT, previous)
    unfinished = results.num_terminated + results.num_errors < len(results)
    return results, interrupted or unfinished


class _QuietFileHandler(logging.FileHandler):
    """A log file that stays silent when it cannot be written (on a full disk the run reports the disk)."""

    def handleError(self, record: logging.LogRecord) -> None:
        return


@contextlib.contextmanager
def tune_log_to(path: Path) -> Iterator[None]:
    """Tune's, Train's and AIR's log records into `path` instead of the terminal, for the length of a sweep."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = _QuietFileHandler(path, delay=True)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    loggers = [logging.getLogger(name) for name in TUNE_LOGGERS]
    before = [(logger.propagate, logger.level) for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.propagate = False
        logger.setLevel(min(logger.level or logging.INFO, logging.INFO))
    try:
        yield
    finally:
        for logger, (propagate, level) in zip(loggers, before, strict=True):
            logger.removeHandler(handler)
            logger.propagate, logger.level = propagate, level
        handler.close()


def restore_tuner(exp: ExperimentConfig, storage: Storage, tune_dir: str, params: ParamSpace) -> Tuner:
    """Continue an interrupted sweep: finished trials are kept, unfinished and errored ones resume."""
    return Tuner.restore(tune_dir, trainable=reusable(trainable(exp)), param_space=params.space,
                         resume_unfinished=True, resume_errored=True, storage_filesystem=storage.tune_filesystem())
