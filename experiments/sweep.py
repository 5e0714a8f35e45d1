"""The Tune sweep: a param space built from the experiment, a Tuner, and its results.

Search domains are placed in the RLlib config at their YAML paths by way of sentinel
strings, so that after `DQNConfig.to_dict()` we know under which flattened key Tune will
report each searched value (`trial.evaluated_params`) and can log it under its YAML name.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from ray import tune
from ray.tune import CheckpointConfig, FailureConfig, ResultGrid, RunConfig, TuneConfig, Tuner

from algos.dqn import build_dqn_config
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


def build_param_space(exp: ExperimentConfig, plan: ResourcePlan) -> ParamSpace:
    domains = to_domains(exp.tune.search_space)
    sentinels = {key: f"{_SENTINEL}{key}" for key in domains}
    config = build_dqn_config(exp, plan, domains=sentinels, seed=0).to_dict()
    search_keys: dict[str, str] = {}
    for path, yaml_key in _find_sentinels(config):
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


def make_tuner(exp: ExperimentConfig, plan: ResourcePlan, params: ParamSpace, storage: Path,
               callbacks: list[Any]) -> Tuner:
    checkpoint = exp.tune.checkpoint
    return Tuner(
        "DQN",
        param_space=params.space,
        tune_config=TuneConfig(
            num_samples=exp.tune.num_samples,
            max_concurrent_trials=exp.tune.max_concurrent_trials or plan.max_concurrent_trials,
        ),
        run_config=RunConfig(
            name=exp.name,
            storage_path=str(storage.resolve()),
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
        ),
    )


def best_checkpoint(results: ResultGrid, metric: str, mode: str) -> tuple[Any, Path]:
    """The trial with the best `metric` over all its iterations, and its best kept checkpoint."""
    ok = [r for r in results if r.error is None and r.metrics]
    if not ok:
        errors = "; ".join(str(r.error).splitlines()[0] for r in results if r.error)
        raise RuntimeError(f"no trial finished: {errors or 'no results'}")
    best = results.get_best_result(metric=metric, mode=mode, scope="all", filter_nan_and_inf=True)
    checkpoint = best.get_best_checkpoint(metric=metric, mode=mode) or best.checkpoint
    if checkpoint is None:
        raise RuntimeError(f"trial {best.path} kept no checkpoint")
    return best, Path(checkpoint.path)
