"""The Tune sweep: a param space built from the experiment, a Tuner, and its results.

Search domains are placed in the RLlib config at their YAML paths by way of sentinel
strings, so that after `DQNConfig.to_dict()` we know under which flattened key Tune will
report each searched value (`trial.evaluated_params`) and can log it under its YAML name.
"""
from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from ray import tune
from ray.tune import CheckpointConfig, FailureConfig, ResultGrid, RunConfig, TuneConfig, Tuner

from algos.dqn import build_dqn_config, trainable
from envs.errors import InputError
from experiments.config import ExperimentConfig
from experiments.hardware import ResourcePlan
from experiments.search_space import to_domains

_SENTINEL = "__search__:"


@dataclass
class ParamSpace:
    space: dict[str, Any]       # what Tune gets: an RLlib config dict with domains inside
    search_keys: dict[str, str]  # Tune's flattened key ("lr", "env_config/fee_bps") -> YAML key


def _find_sentinels(tree: Any, path: tuple[str, ...] = ()) -> Iterable[tuple[tuple[str, ...], str]]:
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _find_sentinels(value, (*path, str(key)))
    elif isinstance(tree, str) and tree.startswith(_SENTINEL):
        yield path, tree.removeprefix(_SENTINEL)


def _set(tree: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        tree = tree[key]
    tree[path[-1]] = value


def _value_at(path: tuple[str, ...]) -> Any:
    """A Tune `sample_from` function that copies the resolved value found at `path`."""
    def copy(config: dict[str, Any]) -> Any:
        node: Any = config
        for key in path:
            node = node[key]
        return node

    return copy


def build_param_space(exp: ExperimentConfig, plan: ResourcePlan) -> ParamSpace:
    domains = to_domains(exp.tune.search_space)
    sentinels = {key: f"{_SENTINEL}{key}" for key in domains}
    config = build_dqn_config(exp, plan, domains=sentinels, seed=0).to_dict()
    search_keys: dict[str, str] = {}
    first_path: dict[str, tuple[str, ...]] = {}
    for path, yaml_key in _find_sentinels(config):
        if yaml_key in first_path:
            # A searched env_config key is also in the evaluation env_config: one draw, two places.
            if exp.tune.search_alg == "optuna":
                raise InputError(f"tune.search_space.{yaml_key}: optuna cannot search a key that RLlib needs "
                                 "twice (training and evaluation env_config): use search_alg: random")
            _set(config, path, tune.sample_from(_value_at(first_path[yaml_key])))
            continue
        first_path[yaml_key] = path
        _set(config, path, domains[yaml_key])
        search_keys["/".join(path)] = yaml_key
    missing = set(domains) - set(search_keys.values())
    if missing:
        raise RuntimeError(f"search keys lost while building the RLlib config: {sorted(missing)}")
    seeds = exp.tune.seeds
    config["seed"] = tune.grid_search(seeds) if len(seeds) > 1 else seeds[0]
    if len(seeds) > 1:
        search_keys["seed"] = "seed"
    return ParamSpace(space=config, search_keys=search_keys)


def search_algorithm(exp: ExperimentConfig) -> Any:
    """None keeps Tune's variant generator (grids expanded, other domains sampled at random)."""
    if exp.tune.search_alg != "optuna":
        return None
    from ray.tune.search.optuna import OptunaSearch

    return OptunaSearch(metric=exp.tune.metric, mode=exp.tune.mode, seed=exp.tune.seeds[0])


def scheduler(exp: ExperimentConfig) -> Any:
    settings = exp.tune.scheduler
    if settings.type != "asha":
        return None
    from ray.tune.schedulers import ASHAScheduler

    max_t = settings.max_t or int(exp.tune.stop.get("training_iteration", 100))
    return ASHAScheduler(time_attr="training_iteration", metric=exp.tune.metric, mode=exp.tune.mode,
                         max_t=max_t, grace_period=min(settings.grace_period, max_t),
                         reduction_factor=settings.reduction_factor)


def run_config(exp: ExperimentConfig, tune_dir: Path, callbacks: list[Any]) -> RunConfig:
    checkpoint = exp.tune.checkpoint
    return RunConfig(
        name=tune_dir.name,
        storage_path=str(tune_dir.parent.resolve()),
        stop=exp.tune.stop,
        callbacks=callbacks,
        verbose=0,
        failure_config=FailureConfig(max_failures=exp.tune.max_failures),
        checkpoint_config=CheckpointConfig(
            num_to_keep=checkpoint.num_to_keep,
            checkpoint_score_attribute=exp.tune.metric,
            checkpoint_score_order=exp.tune.mode,
            checkpoint_frequency=checkpoint.frequency,
            checkpoint_at_end=True,
        ),
    )


def make_tuner(exp: ExperimentConfig, plan: ResourcePlan, params: ParamSpace, tune_dir: Path,
               callbacks: list[Any]) -> Tuner:
    return Tuner(
        trainable(exp),
        param_space=params.space,
        tune_config=TuneConfig(
            num_samples=exp.tune.num_samples,
            max_concurrent_trials=exp.tune.max_concurrent_trials or plan.max_concurrent_trials,
            search_alg=search_algorithm(exp),
            scheduler=scheduler(exp),
        ),
        run_config=run_config(exp, tune_dir, callbacks),
    )


def _raise_keyboard_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def fit(tuner: Tuner) -> tuple[ResultGrid, bool]:
    """Run the sweep; also say whether the user interrupted it.

    Tune catches the first Ctrl-C, stops the trials, saves its state and returns normally. Its
    handler then re-installs the handler that was in place before `fit`, so finding ours back
    tells an interrupted sweep from a finished one (a second Ctrl-C raises KeyboardInterrupt).
    """
    previous = signal.signal(signal.SIGINT, _raise_keyboard_interrupt)
    try:
        results = tuner.fit()
        interrupted = signal.getsignal(signal.SIGINT) is _raise_keyboard_interrupt
    finally:
        signal.signal(signal.SIGINT, previous)
    unfinished = results.num_terminated + results.num_errors < len(results)
    return results, interrupted or unfinished


def restore_tuner(exp: ExperimentConfig, path: Path, params: ParamSpace) -> Tuner:
    """Continue an interrupted sweep: finished trials are kept, unfinished and errored ones resume."""
    return Tuner.restore(str(path), trainable=trainable(exp), param_space=params.space,
                         resume_unfinished=True, resume_errored=True)


def group_results(results: ResultGrid, params: ParamSpace, group_by: str | None) -> dict[str, list[Any]]:
    """Results per value of the `group_by` setting (one group "all" without it)."""
    if not group_by:
        return {"all": list(results)}
    flat_key = next(k for k, v in params.search_keys.items() if v == group_by)
    groups: dict[str, list[Any]] = {}
    for result in results:
        node: Any = result.config
        for part in flat_key.split("/"):
            node = node[part]
        groups.setdefault(str(node), []).append(result)
    return groups


def best_in(results: list[Any], metric: str, mode: str) -> tuple[Any, Path]:
    """The result with the best `metric` over all its iterations, and its best kept checkpoint."""
    ok = [r for r in results if r.error is None and r.metrics_dataframe is not None
          and metric in r.metrics_dataframe]
    if not ok:
        errors = "; ".join(str(r.error).splitlines()[0] for r in results if r.error)
        raise RuntimeError(f"no trial reported {metric}: {errors or 'no results'}")
    pick = max if mode == "max" else min
    best = pick(ok, key=lambda r: pick(r.metrics_dataframe[metric].dropna(), default=float("nan")))
    checkpoint = best.get_best_checkpoint(metric=metric, mode=mode) or best.checkpoint
    if checkpoint is None:
        raise RuntimeError(f"trial {best.path} kept no checkpoint")
    return best, Path(checkpoint.path)
