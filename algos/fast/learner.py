"""What the fast learners (FastDQN's, algos/dqn/fast_learner.py; FastSAC's, algos/sac/fast_learner.py) share around
their own update loop: one tensor conversion per call, the preset's autocast and compile knobs, and the step counts
logged once instead of once per minibatch."""
from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.utils.metrics import (
    ALL_MODULES,
    MODULE_TRAIN_BATCH_SIZE_MEAN,
    NUM_MODULE_STEPS_TRAINED,
    NUM_MODULE_STEPS_TRAINED_LIFETIME,
)

# The columns the loss reads (the replay buffer's batch also carries truncateds and indices).
LOSS_COLUMNS = (Columns.OBS, Columns.NEXT_OBS, Columns.ACTIONS, Columns.REWARDS, Columns.TERMINATEDS,
                "n_step", "weights")


class FastLearnerMixin:
    """Mixed into an RLlib torch learner whose `update_minibatches` runs many minibatch steps per call."""

    def _begin_call(self, columns: dict[str, np.ndarray], timesteps: dict[str, Any]) -> dict[str, torch.Tensor]:
        """What `Learner.update` does before its minibatches (the before-update hook, a new weights version), and the
        loss's columns as tensors, converted once for the whole call."""
        self.before_gradient_based_update(timesteps=timesteps)
        self._weights_seq_no += 1
        return {key: torch.from_numpy(np.ascontiguousarray(columns[key])).to(self._device) for key in LOSS_COLUMNS}

    def _compiled(self, forward: Callable) -> Callable:
        """torch.compile of the forward pass when the preset asks for it (RLlib's settings pick backend and mode),
        compiled once per learner."""
        if not self.config.torch_compile_learner:
            return forward
        if getattr(self, "_compiled_forward", None) is None:
            self._compiled_forward = torch.compile(forward, backend=self.config.torch_compile_learner_dynamo_backend,
                                                   mode=self.config.torch_compile_learner_dynamo_mode)
        return self._compiled_forward

    def _precision(self) -> contextlib.AbstractContextManager:
        """Autocast for the forward pass and loss when the preset asks for mixed precision (bf16, or fp16
        whose gradients the plain step scales); RLlib 2.60's learner has no autocast of its own."""
        precision = getattr(self.config, "mixed_precision", "none")
        if precision == "none":
            return contextlib.nullcontext()
        return torch.autocast(self._device.type, dtype=torch.bfloat16 if precision == "bf16" else torch.float16)

    def _log_steps(self, mid: str, minibatch_size: int, trained: int) -> None:
        """The step counts `Learner.update` logs, once per call instead of once per minibatch."""
        self.metrics.log_value((mid, MODULE_TRAIN_BATCH_SIZE_MEAN), minibatch_size, reduce="mean")
        for key in (mid, ALL_MODULES):
            self.metrics.log_value((key, NUM_MODULE_STEPS_TRAINED), trained, reduce="sum")
            self.metrics.log_value((key, NUM_MODULE_STEPS_TRAINED_LIFETIME), trained, reduce="lifetime_sum",
                                   with_throughput=True)
