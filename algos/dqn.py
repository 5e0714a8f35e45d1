"""Build an RLlib (new API stack) `DQNConfig` from an experiment file and a resource plan.

The YAML sections mirror the builder methods, so this is a translation: each section
becomes one builder call. Search-space domains are substituted at their dotted paths
before translation, so Tune resolves them per trial. Resources (learners, GPUs, env
runners, batch size) come from the hardware plan unless the experiment sets them.
"""
from __future__ import annotations

import copy
import logging
import math
import numbers
from functools import partial
from typing import Any

import gymnasium as gym
from ray.rllib.algorithms.dqn import DQNConfig
from ray.tune.registry import register_env

import envs
from envs.errors import InputError
from experiments.config import ExperimentConfig
from experiments.hardware import ResourcePlan

REPLAY_BUFFERS = {"prioritized": "PrioritizedEpisodeReplayBuffer", "uniform": "EpisodeReplayBuffer"}
# Every result carries the value of `tune.metric` under this top-level key. Tune's keep-K checkpoint
# bookkeeping looks its score attribute up in the *unflattened* result
# (ray/train/_internal/checkpoint_manager.py, `score_attr in checkpoint_result.metrics`), so a nested
# metric such as evaluation/env_runners/episode_return_mean is never found there and the newest
# checkpoints are kept instead of the best. A flat copy is found.
SELECTION_SCORE = "selection_score"


class _NewApiStackNotice(logging.Filter):
    """Drops RLlib's 400-character "You are running DQN on the new API stack!" warning, which every config
    validation logs once per process: the new API stack is the only one we build (the old stack's DQN does
    not build in Ray 2.60), so it tells our users nothing. Other RLlib config warnings pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "on the new API stack! This is the new default" not in record.getMessage()


logging.getLogger("ray.rllib.algorithms.algorithm_config").addFilter(_NewApiStackNotice())


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


def _set_path(tree: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    for part in parents:
        tree = tree.setdefault(part, {})
    tree[leaf] = value


def lookup(result: dict[str, Any], metric: str) -> Any:
    """The value at a "/"-separated metric path of a nested result, or None."""
    node: Any = result
    for part in metric.split("/"):
        if not isinstance(node, dict) or part not in node:
            return result.get(metric)  # a flat key that itself contains "/"
        node = node[part]
    return node


def copy_selection_score(metric: str, mode: str, *, result: dict[str, Any], **_: Any) -> None:
    """RLlib `on_train_result` callback: put `metric` at the top level of the result (see SELECTION_SCORE).

    An iteration without the metric (no evaluation ran) gets the worst possible score, so it never
    displaces a scored checkpoint."""
    value = lookup(result, metric)
    scored = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    result[SELECTION_SCORE] = float(value) if scored else (float("-inf") if mode == "max" else float("inf"))


def _first(*values: Any) -> Any:
    return next(v for v in values if v is not None)


def _planned_batch_and_lr(batch: Any, lr: Any, plan: ResourcePlan, num_learners: int) -> tuple[Any, Any]:
    """The per-learner batch and the lr of one trial: the experiment's update batch (or the preset's
    large_batch when opted in, with its lr rule) split over the data-parallel learners. A searched batch
    or lr (a Tune domain) passes through: config validation allows that only with one learner and no scaling."""
    if not isinstance(batch, int):
        return batch, lr
    if plan.lr_rule is not None and plan.experiment_batch != batch:
        raise ValueError(f"the plan was resolved for batch {plan.experiment_batch}, the experiment has {batch}")
    total = plan.batch_plan.batch if plan.lr_rule is not None else batch
    learners = max(num_learners, 1)
    if total % learners:
        raise InputError(f"the update batch {total} cannot be split over {learners} learners: set "
                         f"training.train_batch_size_per_learner to a multiple of {learners}")
    return total // learners, (lr * plan.lr_scale if plan.lr_scale != 1.0 else lr)


def _evaluation_envs(evaluation: dict[str, Any], training_envs: int) -> int:
    """Envs stepped by the greedy evaluation: no more than the episodes it counts. RLlib steps every
    env of the runner until `evaluation_duration` episodes finish, so 32 training envs would walk a
    deterministic validation split 32 times to count one episode."""
    if evaluation["evaluation_duration_unit"] == "episodes":
        return max(1, min(evaluation["evaluation_duration"], training_envs))
    return training_envs


def trainable(exp: ExperimentConfig) -> Any:
    """What Tune runs: RLlib's registered "DQN", or the FastDQN class."""
    if exp.training.implementation == "fast":
        from algos.fast_dqn import FastDQN

        return FastDQN
    return "DQN"


def build_dqn_config(exp: ExperimentConfig, plan: ResourcePlan,
                     domains: dict[str, Any] | None = None, seed: Any = None) -> DQNConfig:
    """The full DQNConfig for one trial (or, with Tune domains inside, for a whole sweep)."""
    sections = copy.deepcopy(exp.model_dump())
    for dotted, domain in (domains or {}).items():
        _set_path(sections, dotted, domain)
    env, runners, learners = sections["environment"], sections["env_runners"], sections["learners"]
    training, module, evaluation = sections["training"], sections["rl_module"], sections["evaluation"]
    implementation = training.pop("implementation")
    replay = training.pop("replay_buffer")
    replay_config: dict[str, Any] = {"type": REPLAY_BUFFERS[replay["type"]], "capacity": replay["capacity"]}
    if replay["type"] == "prioritized":
        replay_config.update(alpha=replay["alpha"], beta=replay["beta"])
        if implementation == "fast":  # FastDQN anneals beta; RLlib's buffer keeps it fixed
            replay_config.update(beta_final=replay["beta_final"], beta_annealing_steps=replay["beta_annealing_steps"])
    training["epsilon"] = [list(point) for point in training["epsilon"]]
    num_learners = _first(learners["num_learners"], plan.num_learners)
    training.pop("batch_scaling")  # already applied by the plan (experiments/hardware/batch.py)
    training["train_batch_size_per_learner"], training["lr"] = _planned_batch_and_lr(
        training["train_batch_size_per_learner"], training["lr"], plan, num_learners)
    optional = {k: training.pop(k) for k in ("training_intensity", "grad_clip")}
    per_call = training.pop("env_steps_per_learner_call")
    base = DQNConfig()
    if implementation == "fast":
        from algos.fast_dqn import FastDQNConfig

        base = FastDQNConfig().fast(env_steps_per_learner_call=per_call, mixed_precision=plan.mixed_precision)

    register_environment(env["env"])
    config = (
        base
        .environment(env["env"], env_config=env["env_config"])
        .framework("torch", torch_compile_learner=plan.torch_compile_learner)
        .env_runners(
            num_env_runners=_first(runners["num_env_runners"], plan.num_env_runners),
            num_envs_per_env_runner=_first(runners["num_envs_per_env_runner"], plan.num_envs_per_env_runner),
            num_cpus_per_env_runner=_first(runners["num_cpus_per_env_runner"], plan.num_cpus_per_env_runner),
            rollout_fragment_length=runners["rollout_fragment_length"],
            gym_env_vectorize_mode="vector_entry_point" if envs.has_vector_env(env["env"]) else "sync",
        )
        .learners(
            num_learners=num_learners,
            num_gpus_per_learner=_first(learners["num_gpus_per_learner"], plan.num_gpus_per_learner),
        )
        .training(replay_buffer_config=replay_config,
                  **training, **{k: v for k, v in optional.items() if v is not None})
        .rl_module(model_config=module)
        .reporting(**{k: v for k, v in sections["reporting"].items() if v is not None})
        .debugging(seed=seed)
        .callbacks(on_train_result=partial(copy_selection_score, exp.tune.metric, exp.tune.mode))
    )
    if evaluation["evaluation_interval"]:
        config.evaluation(
            evaluation_interval=evaluation["evaluation_interval"],
            evaluation_duration=evaluation["evaluation_duration"],
            evaluation_duration_unit=evaluation["evaluation_duration_unit"],
            evaluation_num_env_runners=0,
            evaluation_config=base.overrides(
                env_config={**env["env_config"], **evaluation["env_config"]}, explore=False,
                num_envs_per_env_runner=_evaluation_envs(evaluation, config.num_envs_per_env_runner)),
        )
    return config
