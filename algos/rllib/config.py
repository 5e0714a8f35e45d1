"""RLlib config every algorithm shares: env registration, the selection score (and an env family's validation
scores), and the builder calls that do not depend on the algorithm (environment, runners, learners, module,
evaluation, reporting).

An RLlib learner's `build` (algos/rllib/learner.py) makes its own config class, applies its `training` section, and
hands the rest to `apply_common`.
"""
from __future__ import annotations

import logging
import math
import numbers
from functools import partial
from typing import Any, Callable

import gymnasium as gym
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModule
from ray.tune.registry import register_env

import algos
import envs
from algos.inputs import BuildInputs, SelectionRule
from algos.rllib.system_metrics import attach_samples, start_sampling
from algos.tree_path import value_at
from envs.abilities import ScoresValidation

# Every result carries the value of `tune.metric` under this top-level key. Tune's keep-K checkpoint
# bookkeeping looks its score attribute up in the *unflattened* result
# (ray/train/_internal/checkpoint_manager.py, `score_attr in checkpoint_result.metrics`), so a nested
# metric such as evaluation/env_runners/episode_return_mean is never found there and the newest
# checkpoints are kept instead of the best. A flat copy is found.
SELECTION_SCORE = "selection_score"

DEFAULT_SELECTION_RULE = SelectionRule()


class _NewApiStackNotice(logging.Filter):
    """Drops RLlib's 400-character "You are running DQN (SAC, ...) on the new API stack!" warning, which every config
    validation logs once per process: the new API stack is the only one we build (the old stack's DQN does
    not build in Ray 2.60), so it tells our users nothing. Other RLlib config warnings pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "on the new API stack! This is the new default" not in record.getMessage()


# The config base logs it for DQN and PPO; SAC's config logs its own from its module.
for _logger in ("ray.rllib.algorithms.algorithm_config", "ray.rllib.algorithms.sac.sac"):
    logging.getLogger(_logger).addFilter(_NewApiStackNotice())


def _create_env(env_id: str, env_context: dict[str, Any]) -> gym.Env | gym.vector.VectorEnv:
    """One env, or, when RLlib's runner asks for `num_envs` of an env with a native vector implementation
    (gym_env_vectorize_mode "vector_entry_point"), all of them in one batched env."""
    import envs  # registers the ids inside env-runner processes

    config = dict(env_context)
    if "num_envs" in config:
        return envs.make_vector_env(env_id, int(config.pop("num_envs")), config)
    return envs.make_env(env_id, config)


def register_environment(env_id: str) -> None:
    """Make `env_id` known to RLlib, built by `envs.make_env` in every env runner."""
    envs.require_registered(env_id)
    register_env(env_id, partial(_create_env, env_id))


def lookup(result: dict[str, Any], metric: str) -> Any:
    """The value at a "/"-separated metric path of a nested result; a flat key that itself contains "/" when the
    path leads nowhere; else None."""
    return value_at(result, metric, sep="/", default=result.get(metric))


def copy_selection_score(metric: str, mode: str, rule: SelectionRule = DEFAULT_SELECTION_RULE, *,
                         result: dict[str, Any], algorithm: Any = None, **_: Any) -> None:
    """RLlib `on_train_result` callback: put the selection score at the top level of the result (see
    SELECTION_SCORE): `metric` itself, or as `rule` (tune.checkpoint.select) makes it from the iterations so far
    (kept on the algorithm object).

    An iteration without the metric (no evaluation ran), or one the rule excludes, gets the worst possible score,
    so it never displaces a scored checkpoint."""
    value = lookup(result, metric)
    scored = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    history = getattr(algorithm, "_selection_history", None) if algorithm is not None else None
    if history is None:
        history = []
        if algorithm is not None:
            algorithm._selection_history = history
    history.append(float(value) if scored else float("nan"))
    steps = next((float(v) for v in (lookup(result, "num_env_steps_sampled_lifetime"),
                                     lookup(result, "env_runners/num_env_steps_sampled_lifetime"))
                  if isinstance(v, numbers.Real)), 0.0)
    result[SELECTION_SCORE] = rule.score(history, steps, mode)


def warm_start(checkpoint: str, *, algorithm: Any, **_: Any) -> None:
    """RLlib `on_algorithm_init` callback: start from `checkpoint`'s learner state (the RLModule's weights, target
    network included, and the optimizer's state), synced to the env runners; the replay buffer starts empty.
    `checkpoint` is a local folder or an s3:// URI (with ?endpoint_override=...), which every node can read."""
    import pyarrow.fs as pafs

    filesystem, path = pafs.FileSystem.from_uri(checkpoint) if "://" in checkpoint else (None, checkpoint)
    algorithm.restore_from_path(f"{str(path).rstrip('/')}/learner_group", component="learner_group",
                                filesystem=filesystem)


def score_validation(scorer: Callable[[Any, dict[str, Any]], dict[str, float]], env_config: dict[str, Any],
                     name: str, *, algorithm: Any, evaluation_metrics: dict[str, Any], **_: Any) -> None:
    """RLlib `on_evaluate_end` callback: the env family's validation scores of the greedy policy just evaluated
    (envs.abilities.ScoresValidation), as evaluation/validation/<key>. The policy is the evaluation runner's module
    exported to numpy by algorithm `name` of the table, the same greedy actions the final table and the registered
    model use."""
    module = algorithm.eval_env_runner.module
    if isinstance(module, MultiRLModule):
        module = module[DEFAULT_MODULE_ID]
    policy = algos.algorithm(name).numpy_policy(module)
    evaluation_metrics["validation"] = scorer(policy, env_config)


def _evaluation_envs(evaluation: dict[str, Any], training_envs: int) -> int:
    """Envs stepped by the greedy evaluation: no more than the episodes it counts. RLlib steps every
    env of the runner until `evaluation_duration` episodes finish, so 32 training envs would walk a
    deterministic validation split 32 times to count one episode."""
    if evaluation["evaluation_duration_unit"] == "episodes":
        return max(1, min(evaluation["evaluation_duration"], training_envs))
    return training_envs


def _callbacks(inputs: BuildInputs) -> dict[str, list[Any]]:
    """RLlib callbacks of every trial: the selection score on each result; a warm start and system metrics when
    asked for."""
    on_init, on_result = [], [partial(copy_selection_score, inputs.metric, inputs.mode, inputs.selection)]
    if inputs.warm_start:
        on_init.append(partial(warm_start, inputs.warm_start))
    if inputs.system_metrics_interval_s:
        on_init.append(partial(start_sampling, inputs.system_metrics_interval_s))
        on_result.append(attach_samples)
    callbacks = {"on_train_result": on_result, **({"on_algorithm_init": on_init} if on_init else {})}
    family = envs.family(inputs.env_id)
    evaluation = inputs.sections["evaluation"]
    if isinstance(family, ScoresValidation) and inputs.algorithm is not None and evaluation["evaluation_interval"]:
        env_config = {**inputs.sections["environment"]["env_config"], **evaluation["env_config"]}
        callbacks["on_evaluate_end"] = [partial(score_validation, family.validation_scores, env_config,
                                                inputs.algorithm)]
    return callbacks


def apply_common(config: AlgorithmConfig, inputs: BuildInputs) -> AlgorithmConfig:
    """The builder calls shared by every algorithm, from the experiment's sections and resources."""
    sections, resources = inputs.sections, inputs.resources
    env, runners, evaluation = sections["environment"], sections["env_runners"], sections["evaluation"]
    register_environment(inputs.env_id)
    config = (
        config
        .environment(inputs.env_id, env_config=env["env_config"])
        .framework("torch", torch_compile_learner=resources.torch_compile_learner)
        .env_runners(
            num_env_runners=resources.num_env_runners,
            num_envs_per_env_runner=resources.num_envs_per_env_runner,
            num_cpus_per_env_runner=resources.num_cpus_per_env_runner,
            rollout_fragment_length=runners["rollout_fragment_length"],
            gym_env_vectorize_mode="vector_entry_point" if inputs.has_vector_env else "sync",
        )
        .learners(num_learners=resources.num_learners, num_gpus_per_learner=resources.num_gpus_per_learner)
        .resources(custom_resources_for_main_process=dict(resources.custom_resources))
        .rl_module(model_config=sections["rl_module"])
        .reporting(**{k: v for k, v in sections["reporting"].items() if v is not None})
        .debugging(seed=inputs.seed)
        .callbacks(**_callbacks(inputs))
    )
    if evaluation["evaluation_interval"]:
        config.evaluation(
            evaluation_interval=evaluation["evaluation_interval"],
            evaluation_duration=evaluation["evaluation_duration"],
            evaluation_duration_unit=evaluation["evaluation_duration_unit"],
            evaluation_num_env_runners=0,
            evaluation_config=type(config).overrides(
                env_config={**env["env_config"], **evaluation["env_config"]}, explore=False,
                num_envs_per_env_runner=_evaluation_envs(evaluation, config.num_envs_per_env_runner)),
        )
    return config
