"""The FastDQN learner: RLlib's DQN torch learner with one call that runs many minibatch updates.

`Learner.update()` pays, per minibatch, for slicing a SampleBatch, converting it to tensors, the
loss's ~10 metric log calls and a per-step bookkeeping pass: about as much as the torch step itself
for a [128, 128] network on CPU. `update_minibatches` converts the whole multi-minibatch batch to
tensors once, runs the minibatch steps in order in a tight loop (RLlib's own `forward_train`, so DDP
and a compiled forward still apply; the gradient step is RLlib's, or the same arithmetic in four
torch calls when nothing but global-norm clipping is configured), logs the metrics once, updates
the target network as `Learner.update` does, and returns every item's TD error, in order, for
prioritized replay.

The GPU presets' knobs act here: `mixed_precision` (autocast of the forward pass and loss, bf16, or fp16
with a grad scaler; RLlib 2.60's learner has no autocast) and `torch_compile_learner` (torch.compile of
the forward pass with RLlib's dynamo backend and mode settings).

The loss is RLlib's DQN loss (expected Q, not distributional) without its per-call metric logging;
`tests/unit/test_fast_learner.py` checks it against `DQNTorchLearner.compute_loss_for_module`.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from ray.rllib.algorithms.dqn.dqn_learner import (
    QF_LOSS_KEY,
    QF_MAX_KEY,
    QF_MEAN_KEY,
    QF_MIN_KEY,
    QF_NEXT_PREDS,
    QF_PREDS,
    QF_TARGET_NEXT_PREDS,
    TD_ERROR_MEAN_KEY,
)
from ray.rllib.algorithms.dqn.torch.dqn_torch_learner import DQNTorchLearner
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns

from algos.fast.learner import FastLearnerMixin
from algos.fast.learner_math import plain_step
from algos.fast.losses import dqn_loss


class FastDQNTorchLearner(FastLearnerMixin, DQNTorchLearner):
    def update_minibatches(self, columns: dict[str, np.ndarray], *, minibatch_size: int,
                           timesteps: dict[str, Any], loss_weight: float = 1.0) -> tuple[dict[str, Any], np.ndarray]:
        """One gradient step per `minibatch_size` consecutive items of `columns`; returns the reduced
        metrics and every item's |TD error| (in the order of `columns`). `loss_weight` scales this learner's
        loss: an uneven slice of a data-parallel update counts by its share (algos.inputs.slice_weights)."""
        mid = DEFAULT_MODULE_ID
        config = self.config.get_config_for_module(mid)
        if config.num_atoms > 1:
            raise ValueError("FastDQN's learner has the expected-Q loss only: set num_atoms 1 or use "
                             "training.implementation: rllib")
        tensors = self._begin_call(columns, timesteps)
        count = len(tensors[Columns.OBS])
        td_errors = torch.empty(count, device=self._device)
        q_selected = torch.empty(count, device=self._device)
        losses = []
        huber = config.td_error_loss_fn == "huber"
        step = self._plain_step_for(mid, config) or self._rllib_step
        forward = self._forward_for(mid)
        for start in range(0, count - minibatch_size + 1, minibatch_size):
            stop = start + minibatch_size
            minibatch = {key: value[start:stop] for key, value in tensors.items()}
            with self._precision():
                loss, td_errors[start:stop], q_selected[start:stop] = dqn_loss(
                    forward(minibatch), minibatch, gamma=config.gamma, double_q=config.double_q, huber=huber)
            step(loss if loss_weight == 1.0 else loss * loss_weight)
            losses.append(loss.detach())
        trained = len(losses) * minibatch_size
        self._log_once(mid, torch.stack(losses), q_selected[:trained], td_errors[:trained], minibatch_size, trained)
        self.after_gradient_based_update(timesteps=timesteps)
        return self.metrics.reduce(), td_errors[:trained].cpu().numpy()

    def configure_optimizers_for_module(self, module_id: str, config: Any = None) -> None:
        """RLlib's default optimizer (Adam over the module's parameters, lr from `config.lr`) with torch's
        fused kernel: one kernel for all parameter tensors instead of a Python loop over them (measured
        250 -> 80 us per step for a [128, 128] dueling network on CPU). The same update rule."""
        params = self.get_parameters(self._module[module_id])
        self.register_optimizer(module_id=module_id, optimizer=torch.optim.Adam(params, fused=True),
                                params=params, lr_or_lr_schedule=config.lr)

    def _forward_for(self, mid: str) -> Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]]:
        """The Q values the loss needs. One learner: the module's own QNet/TargetNetwork API calls, with
        the target network under no_grad (RLlib's `forward_train` builds a graph for it that the loss
        then detaches; same values, ~40% less forward time). Several learners: `forward_train` through
        the DDP wrapper, which is what makes the backward pass all-reduce the gradients."""
        if self.config.num_learners > 1:
            return lambda minibatch: self.module.forward_train({mid: minibatch})[mid]
        module = self.module[mid].unwrapped()

        double_q = self.config.get_config_for_module(mid).double_q

        def forward(minibatch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
            obs, next_obs = minibatch[Columns.OBS], minibatch[Columns.NEXT_OBS]
            if double_q:  # the online network picks the next action: one pass over obs and next obs
                q_now, q_next = module.compute_q_values({Columns.OBS: torch.cat([obs, next_obs])})[QF_PREDS].chunk(2)
            else:
                q_now, q_next = module.compute_q_values({Columns.OBS: obs})[QF_PREDS], None
            with torch.no_grad():
                q_target = module.forward_target({Columns.OBS: next_obs})[QF_PREDS]
            return {QF_PREDS: q_now, QF_NEXT_PREDS: q_next, QF_TARGET_NEXT_PREDS: q_target}

        return self._compiled(forward)

    def _rllib_step(self, loss: torch.Tensor) -> None:
        """RLlib's gradient step: grad scalers (fp16), lr schedulers, every clipping mode, NaN guards."""
        gradients = self.compute_gradients({DEFAULT_MODULE_ID: loss})
        self.apply_gradients(self.postprocess_gradients(gradients))

    def _plain_step_for(self, mid: str, config: Any) -> Callable[[torch.Tensor], None] | None:
        """The same step in four torch calls, for the common case (one optimizer, global-norm clipping,
        no lr schedule): RLlib's path checks every gradient tensor for NaN twice and clips in a Python
        loop, which costs as much as the backward pass of a small network on CPU. A step whose gradient
        norm is not finite is skipped, as RLlib skips it (`algos.fast.learner_math.plain_step`; with fp16, the
        grad scaler's step skips it)."""
        optimizers = self.get_optimizers_for_module(mid)
        plain = (len(optimizers) == 1 and self._grad_scalers is None and self._lr_scheduler_classes is None
                 and (config.grad_clip is None or config.grad_clip_by == "global_norm"))
        fp16 = getattr(self.config, "mixed_precision", "none") == "fp16"
        if not plain:
            if fp16:
                raise ValueError("mixed_precision fp16 needs FastDQN's plain gradient step: one optimizer, "
                                 "global-norm clipping, no lr schedule")
            return None
        optimizer, clip = optimizers[0][1], config.grad_clip
        if not fp16:
            return plain_step(optimizer, clip)
        if getattr(self, "_grad_scaler", None) is None:  # kept across calls: it adapts its scale
            self._grad_scaler = torch.amp.GradScaler(self._device.type)
        scaler = self._grad_scaler
        params = [p for group in optimizer.param_groups for p in group["params"]]

        def scaled_step(loss: torch.Tensor) -> None:
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            if clip:
                torch.nn.utils.clip_grad_norm_(params, clip, foreach=True)
            scaler.step(optimizer)  # skips the step itself when the unscaled gradients are not finite
            scaler.update()

        return scaled_step

    def _log_once(self, mid: str, losses: torch.Tensor, q_selected: torch.Tensor, td_errors: torch.Tensor,
                  minibatch_size: int, trained: int) -> None:
        """What `Learner.update` and the DQN loss log, once per call instead of once per minibatch."""
        self.metrics.log_dict({
            QF_LOSS_KEY: losses.mean().item(), QF_MEAN_KEY: q_selected.mean().item(),
            QF_MAX_KEY: q_selected.max().item(), QF_MIN_KEY: q_selected.min().item(),
            TD_ERROR_MEAN_KEY: td_errors.mean().item(), self.TOTAL_LOSS_KEY: losses[-1].item(),
        }, key=mid, window=1)
        self._log_steps(mid, minibatch_size, trained)

