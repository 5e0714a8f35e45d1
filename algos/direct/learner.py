"""The direct learner's update, run inside RLlib's learner (local, or each remote one): its module, its optimizer,
its device and its gradient clipping are RLlib's, so a GPU preset trains it on the GPU and a checkpoint restores it.

The problem (the fold's train data, the memory, the loss) is the env family's (algos/families/direct_problems.py),
built once per learner from the trial's env_config."""
from __future__ import annotations

from typing import Any

import numpy as np
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core import DEFAULT_MODULE_ID

import envs
from algos.families.direct_problems import problem_class


class DirectTorchLearner(PPOTorchLearner):
    """PPO's torch learner (its module and optimizer) with the direct update instead of PPO's loss."""

    def update_direct(self, updates: int) -> dict[str, float]:
        """`updates` gradient steps, each on one sampled mini-batch; the mean of their statistics."""
        problem = self._direct_problem()
        module = self.module[DEFAULT_MODULE_ID]
        stats: list[dict[str, float]] = []
        for _ in range(updates):
            loss, step_stats = problem.step(module)
            gradients = self.postprocess_gradients(self.compute_gradients({DEFAULT_MODULE_ID: loss}))
            self.apply_gradients(gradients)
            stats.append({"total_loss": float(loss.detach()), **step_stats})
        return {key: float(np.mean([s[key] for s in stats])) for key in stats[0]}

    def _direct_problem(self) -> Any:
        problem = getattr(self, "_problem", None)
        if problem is None:
            config = self.config
            env = envs.make_env(config.env, dict(config.env_config)).unwrapped
            problem = problem_class(envs.family(config.env))(
                env, config.train_batch_size_per_learner, config.direct_batch_start, config.direct_geometric_bias,
                config.seed, self.device)
            self._problem = problem
        return problem


def update_direct(learner: DirectTorchLearner, updates: int) -> dict[str, float]:
    """The function each learner runs (module level, so it pickles to remote learners)."""
    return learner.update_direct(updates)
