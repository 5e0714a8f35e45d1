"""`Direct`: RLlib's PPO algorithm object (its RLModule, checkpoints, greedy evaluation and weight sync) whose
training step is the direct update (algos/direct/learner.py) instead of sampling and PPO's loss. No env runner
samples: the learner reads the fold's train data itself; the evaluation runner walks the validation part as for
any algorithm. Each iteration counts the decisions its mini-batches covered as its env steps."""
from __future__ import annotations

from functools import partial
from typing import Any

from ray.rllib.algorithms.ppo import PPO, PPOConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.utils.metrics import (
    ENV_RUNNER_RESULTS,
    LEARNER_RESULTS,
    LEARNER_UPDATE_TIMER,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    TIMERS,
)

from algos.direct.learner import DirectTorchLearner, update_direct


class DirectConfig(PPOConfig):
    def __init__(self, algo_class: type | None = None) -> None:
        super().__init__(algo_class=algo_class or Direct)
        self.direct_updates_per_iteration = 50
        self.direct_batch_start = "geometric"
        self.direct_geometric_bias = 0.005

    def direct(self, *, updates_per_iteration: int, batch_start: str, geometric_bias: float) -> "DirectConfig":
        self.direct_updates_per_iteration = updates_per_iteration
        self.direct_batch_start = batch_start
        self.direct_geometric_bias = geometric_bias
        return self

    def get_default_learner_class(self) -> type:
        return DirectTorchLearner


class Direct(PPO):
    @classmethod
    def get_default_config(cls) -> DirectConfig:
        return DirectConfig()

    def training_step(self) -> None:
        config = self.config
        updates = int(config.direct_updates_per_iteration)
        with self.metrics.log_time((TIMERS, LEARNER_UPDATE_TIMER)):
            replies = self.learner_group.foreach_learner(partial(update_direct, updates=updates))
        results: list[dict[str, Any]] = []
        for reply in replies:
            if not reply.ok:
                raise reply.get()
            results.append(reply.get())
        self.metrics.log_dict(results[0], key=(LEARNER_RESULTS, DEFAULT_MODULE_ID), window=1)
        self.metrics.log_value((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME),
                               updates * config.train_batch_size_per_learner, reduce="lifetime_sum")
