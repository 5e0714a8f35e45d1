"""Checks of a validated experiment that reach across sections, all before Ray starts.

Each raises an `InputError` naming the file and the key: search-space keys that address no setting,
searched values the setting (or the env family's config) refuses, searches the hardware plan cannot
honour, `tune.metric` / `tune.stop` / `tune.plateau.metric` keys the algorithm never reports, and a plateau's
patience shorter than the evaluation interval it watches.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from algos.tree_path import with_value
from envs.abilities import ScoresValidation
from envs.errors import InputError
from envs.validation import closest, describe_validation_error, did_you_mean
from experiments.config.search_space import candidate_values

if TYPE_CHECKING:
    from experiments.config.experiment import ExperimentConfig

ENV_CONFIG_PREFIX = "environment.env_config."
# The hardware plan derives the per-learner batch (and, with batch_scaling: preset, the lr) from these values.
_PLANNED_BY_HARDWARE = ("training.train_batch_size_per_learner", "training.lr")


def check_search_paths(config: "ExperimentConfig", source: str) -> None:
    """Every search-space key must address an existing setting, e.g. training.lr."""
    dumped = config.model_dump()
    for key in config.tune.search_space:
        node: Any = dumped
        parts = key.split(".")
        for depth, part in enumerate(parts):
            free_form = depth > 0 and parts[depth - 1] == "env_config"
            if not isinstance(node, dict) or (part not in node and not free_form):
                known = list(node) if isinstance(node, dict) else []
                hint = did_you_mean(part, known, "".join(f"{p}." for p in parts[:depth]))
                raise InputError(f"{source}: tune.search_space key {key!r} addresses no setting{hint}")
            node = node.get(part)


def check_search_values(config: "ExperimentConfig", source: str) -> None:
    """Every value a search can give (choice/grid values, range bounds) must be one its setting accepts:
    checked by the experiment's own model, and for env_config keys by the env family's config model."""
    dumped = config.model_dump(exclude={"tune"})
    for key, spec in config.tune.search_space.items():
        for value in candidate_values(spec):
            where = f"{source}: tune.search_space.{key} value {value!r}"
            if key.startswith(ENV_CONFIG_PREFIX):
                env_config = {**config.environment.env_config, key.removeprefix(ENV_CONFIG_PREFIX): value}
                config.family.check_config(env_config, where)
                continue
            try:
                type(config).model_validate(with_value(dumped, key, value))
            except ValidationError as error:
                raise InputError(describe_validation_error(error, where, type(config))) from None


def check_batch_search(config: "ExperimentConfig", source: str) -> None:
    """A searched batch cannot be split over data-parallel learners, nor a searched lr scaled by a preset's
    rule, before Tune draws it: such a search runs on one learner without batch scaling."""
    searched = [key for key in _PLANNED_BY_HARDWARE if key in config.tune.search_space]
    if searched and config.training.batch_scaling == "preset":
        raise InputError(f"{source}: training.batch_scaling: preset rescales {', '.join(searched)}, which "
                         f"tune.search_space also searches: search them with batch_scaling: none")
    if "training.train_batch_size_per_learner" in config.tune.search_space and (config.learners.num_learners or 0) > 1:
        raise InputError(f"{source}: a searched training.train_batch_size_per_learner cannot be split over "
                         f"learners.num_learners: search it with one learner")


def _closest_result_key(key: str, known: list[str]) -> str:
    """A "did you mean" for a result key: by the whole path, else by its last part (RLlib's old
    `episode_reward_mean` -> `env_runners/episode_return_mean`)."""
    match = closest(key, known)
    if match is None:
        leaves = {k.rsplit("/", 1)[-1]: k for k in reversed(known)}  # the first key with that leaf wins
        leaf = closest(key.rsplit("/", 1)[-1], leaves)
        match = leaves[leaf] if leaf else None
    return f": did you mean {match!r}?" if match else ""


def check_result_keys(config: "ExperimentConfig", source: str) -> None:
    """`tune.metric` and every `tune.stop` key must be a result key the algorithm reports ("/"-separated):
    a typo would otherwise never select or never stop, and Tune says so only after the sweep started. So must
    tune.plateau.metric, and the plateau's patience must outlast the evaluation interval (check_plateau_patience)."""
    learner = config.spec.learner
    family_keys = [f"evaluation/validation/{key}" for key in config.family.validation_keys] if isinstance(
        config.family, ScoresValidation) else []
    named = [("tune.metric", config.tune.metric), *(("tune.stop", key) for key in config.tune.stop)]
    if config.tune.plateau is not None and config.tune.plateau.metric is not None:
        named.append(("tune.plateau.metric", config.tune.plateau.metric))
    for where, key in named:
        if not learner.reports(key) and key not in family_keys:
            known = learner.result_keys() + family_keys
            raise InputError(f"{source}: {where} {key!r} is not a result key {config.algorithm} reports"
                             f"{_closest_result_key(key, known)} (e.g. training_iteration, "
                             f"evaluation/env_runners/episode_return_mean, env_runners/num_env_steps_sampled_lifetime)")
        if key in family_keys and not config.evaluation.evaluation_interval:
            raise InputError(f"{source}: {where} {key!r} is scored after each evaluation, and evaluation."
                             "evaluation_interval is not set; set it (e.g. 2) or select on another key")
    check_plateau_patience(config, source)


def check_plateau_patience(config: "ExperimentConfig", source: str) -> None:
    """A plateau on an evaluation key sees a new score every evaluation.evaluation_interval iterations only: a shorter
    patience would stop every trial between two evaluations, before the next one could improve."""
    plateau, interval = config.tune.plateau, config.evaluation.evaluation_interval or 0
    metric = config.tune.curve_rule()[0]
    if plateau is not None and metric.startswith("evaluation/") and plateau.patience < interval:
        raise InputError(f"{source}: tune.plateau.patience {plateau.patience} is shorter than evaluation."
                         f"evaluation_interval {interval}, and {metric!r} changes only when an evaluation runs: "
                         f"set patience to at least {interval}")
