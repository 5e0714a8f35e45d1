"""Experiment + hardware plan -> the algorithm's RLlib config, through the algorithm table.

The platform settles what depends on the hardware (resources the experiment left unset, the batch per
learner and the lr of a preset's batch scaling) and hands the algorithm's builder plain values
(`algos.inputs.BuildInputs`); search domains are placed at their dotted paths first, so Tune resolves
them per trial.
"""
from __future__ import annotations

import copy
from typing import Any

from algos.inputs import BuildInputs, Resources, SelectionRule, slice_sizes
from algos.tree_path import set_value
from experiments.config.experiment import ExperimentConfig
from experiments.hardware import ResourcePlan
from experiments.hardware.batch import check_split


def _first(*values: Any) -> Any:
    return next(v for v in values if v is not None)


def planned_batch_and_lr(batch: Any, lr: Any, plan: ResourcePlan, num_learners: int,
                         exp: ExperimentConfig) -> tuple[Any, Any, int | None]:
    """The per-learner batch (the largest slice), the lr and, when the slices are uneven, the whole update batch
    of one trial: the experiment's update batch (or the preset's large_batch when opted in, with its lr rule)
    split over the data-parallel learners. A searched batch or lr (a Tune domain) passes through: config
    validation allows that only with one learner and no scaling."""
    if not isinstance(batch, int):
        return batch, lr, None
    if plan.lr_rule is not None and plan.experiment_batch != batch:
        raise ValueError(f"the plan was resolved for batch {plan.experiment_batch}, the experiment has {batch}")
    total = plan.batch_plan.batch if plan.lr_rule is not None else batch
    learners = max(num_learners, 1)
    check_split(total, learners, exp.spec.splits_batch_unevenly(exp.training), exp.algorithm,
                "training.train_batch_size_per_learner")
    sizes = slice_sizes(total, learners)
    return sizes[0], (lr * plan.lr_scale if plan.lr_scale != 1.0 else lr), None if total % learners == 0 else total


def build_inputs(exp: ExperimentConfig, plan: ResourcePlan, domains: dict[str, Any] | None = None,
                 seed: Any = None) -> BuildInputs:
    """The plain values the algorithm's builder gets."""
    sections = copy.deepcopy(exp.model_dump(include={"environment", "env_runners", "learners", "training",
                                                     "rl_module", "evaluation", "reporting"}))
    for dotted, domain in (domains or {}).items():
        set_value(sections, dotted, domain, create=True)
    runners, learners, training = sections["env_runners"], sections["learners"], sections["training"]
    num_learners = _first(learners["num_learners"], plan.num_learners)
    training["train_batch_size_per_learner"], training["lr"], update_batch = planned_batch_and_lr(
        training["train_batch_size_per_learner"], training["lr"], plan, num_learners, exp)
    resources = Resources(
        num_env_runners=_first(runners["num_env_runners"], plan.num_env_runners),
        num_envs_per_env_runner=_first(runners["num_envs_per_env_runner"], plan.num_envs_per_env_runner),
        num_cpus_per_env_runner=_first(runners["num_cpus_per_env_runner"], plan.num_cpus_per_env_runner),
        num_learners=num_learners,
        num_gpus_per_learner=_first(learners["num_gpus_per_learner"], plan.num_gpus_per_learner),
        mixed_precision=plan.mixed_precision,
        torch_compile_learner=plan.torch_compile_learner,
        custom_resources=dict(exp.tune.trial_resources),
        update_batch_size=update_batch,
    )
    env_id = exp.environment.env
    select = exp.tune.checkpoint.select
    rule = SelectionRule(select.smooth, exp.spec.exploration_steps(exp.training) if select.after_exploration else 0)
    return BuildInputs(env_id=env_id, sections=sections, resources=resources, metric=exp.tune.metric,
                       mode=exp.tune.mode, seed=seed, has_vector_env=exp.family.has_vector_env, selection=rule,
                       warm_start=exp.warm_start, algorithm=exp.algorithm,
                       system_metrics_interval_s=exp.tracking.system_metrics_interval_s if exp.tracking.system_metrics
                       else None)


def build_config(exp: ExperimentConfig, plan: ResourcePlan, domains: dict[str, Any] | None = None,
                 seed: Any = None) -> Any:
    """The full RLlib AlgorithmConfig of one trial (or, with Tune domains inside, of a whole sweep)."""
    return exp.spec.learner.build(build_inputs(exp, plan, domains, seed))


def trainable(exp: ExperimentConfig) -> Any:
    """What Tune runs for this experiment (a registered algorithm name or an Algorithm class)."""
    return exp.spec.learner.trainable(exp.training.model_dump())
