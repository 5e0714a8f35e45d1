"""The FastSAC learner: RLlib's SAC torch learner with one call that runs many minibatch updates.

RLlib's SAC update pays, per minibatch, for the learner connectors that turn replayed episodes into a batch, a
tensor conversion, two policy passes where one does, four backward passes (one per optimizer, each retaining the
graph) and a state-dict round trip per target network: 20-30 ms per update of a [64, 64] net on 2 cores, most of it
not the networks. `update_minibatches` converts the whole multi-minibatch batch once and then, per minibatch:

- the forward pass of RLlib's continuous SAC (`algos.fast.losses.sac_forward`: the module's own encoders and heads, one
  policy pass over obs and next obs, the critics frozen while the actor's loss reads Q, the random draws in RLlib's
  order);
- RLlib's SAC loss (`algos.fast.losses.sac_loss`, same arithmetic). Each of its four losses reaches only its own
  optimizer's parameters (the critics' targets and the actor's Q are detached or frozen, alpha's loss reads a
  detached log-probability), so ONE backward pass of their sum gives each optimizer exactly the gradient RLlib's
  four passes give;
- each optimizer's step (RLlib's per-optimizer global-norm clip where `grad_clip` is set; a step whose gradient is
  not finite is skipped, as RLlib skips it);
- the soft target update after every gradient step, as RLlib's SAC does (target_network_update_freq 0), with the
  same arithmetic in two fused calls (`algos.fast.losses.polyak`).

Metrics are logged once per call. Several learners run RLlib's own `forward_train` through the DDP wrapper, which is
what makes the backward pass all-reduce. `tests/unit/test_fast_sac_learner.py` checks loss and gradients against
`SACTorchLearner` on one batch.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from ray.rllib.algorithms.dqn.dqn_learner import DQNLearner
from ray.rllib.algorithms.sac.sac_learner import (
    LOGPS_KEY,
    QF_LOSS_KEY,
    QF_MAX_KEY,
    QF_MEAN_KEY,
    QF_MIN_KEY,
    QF_TWIN_LOSS_KEY,
    TD_ERROR_MEAN_KEY,
)
from ray.rllib.algorithms.sac.torch.sac_torch_learner import SACTorchLearner
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import POLICY_LOSS_KEY
from ray.rllib.core.models.base import ENCODER_OUT
from ray.rllib.utils.metrics import LAST_TARGET_UPDATE_TS, NUM_ENV_STEPS_SAMPLED_LIFETIME, NUM_TARGET_UPDATES

from algos.fast.learner import FastLearnerMixin
from algos.fast.learner_math import sac_step
from algos.fast.losses import LOGP_RESAMPLED, Q_CURR, SACLosses, SACNets, polyak, sac_forward, sac_loss


class FastSACTorchLearner(FastLearnerMixin, SACTorchLearner):
    def update_minibatches(self, columns: dict[str, np.ndarray], *, minibatch_size: int,
                           timesteps: dict[str, Any], loss_weight: float = 1.0) -> tuple[dict[str, Any], np.ndarray]:
        """One gradient step per `minibatch_size` consecutive items of `columns`; returns the reduced metrics and
        every item's |TD error| (in the order of `columns`; the twin critics' mean, as RLlib's). `loss_weight` scales
        this learner's losses: an uneven slice of a data-parallel update counts by its share."""
        mid = DEFAULT_MODULE_ID
        config = self.config.get_config_for_module(mid)
        if getattr(self.config, "mixed_precision", "none") == "fp16":
            raise ValueError("FastSAC has no fp16 grad scaler for its four optimizers: use mixed_precision bf16 "
                             "or none")
        tensors = self._begin_call(columns, timesteps)
        count = len(tensors[Columns.OBS])
        td_errors = torch.empty(count, device=self._device)
        forward, step = self._forward_for(mid), self._step_for(mid, config)
        targets, mains = self._target_pairs(mid)
        log_alpha, target_entropy = self.curr_log_alpha[mid], self.target_entropy[mid]
        history: list[SACLosses] = []
        q_curr, logps = [], []
        for start in range(0, count - minibatch_size + 1, minibatch_size):
            stop = start + minibatch_size
            minibatch = {key: value[start:stop] for key, value in tensors.items()}
            with self._precision():
                fwd_out = forward(minibatch)
                losses = sac_loss(fwd_out, minibatch, log_alpha=log_alpha, target_entropy=target_entropy,
                                  gamma=config.gamma)
            step(losses, loss_weight)
            polyak(targets, mains, config.tau)
            td_errors[start:stop] = losses.td_error
            history.append(SACLosses(*(None if loss is None else loss.detach() for loss in losses)))
            q_curr.append(fwd_out[Q_CURR].detach())
            logps.append(fwd_out[LOGP_RESAMPLED].detach().mean())
        trained = len(history) * minibatch_size
        self._log_once(mid, history, torch.cat(q_curr), torch.stack(logps), td_errors[:trained], timesteps)
        self._log_steps(mid, minibatch_size, trained)
        # Learner's own bookkeeping (learning-rate logs and schedules); DQNLearner's target update is done above.
        super(DQNLearner, self).after_gradient_based_update(timesteps=timesteps)
        return self.metrics.reduce(), td_errors[:trained].cpu().numpy()

    def configure_optimizers_for_module(self, module_id: str, config: Any = None) -> None:
        """RLlib's four SAC optimizers (Adam, eps 1e-7, the same parameters and learning rates) with torch's fused
        kernel: one kernel per optimizer instead of a Python loop over its tensors. The same update rule."""
        module = self._module[module_id]
        groups = {"qf": (module.qf_encoder, module.qf, config.critic_lr)}
        if config.twin_q:
            groups["qf_twin"] = (module.qf_twin_encoder, module.qf_twin, config.critic_lr)
        groups["policy"] = (module.pi_encoder, module.pi, config.actor_lr)
        for name, (encoder, head, lr) in groups.items():
            params = self.get_parameters(encoder) + self.get_parameters(head)
            self.register_optimizer(module_id=module_id, optimizer_name=name, params=params, lr_or_lr_schedule=lr,
                                    optimizer=torch.optim.Adam(params, eps=1e-7, fused=True))
        temperature = self.curr_log_alpha[module_id]
        self.register_optimizer(module_id=module_id, optimizer_name="alpha", params=[temperature],
                                lr_or_lr_schedule=config.alpha_lr,
                                optimizer=torch.optim.Adam([temperature], eps=1e-7, fused=True))

    def _forward_for(self, mid: str) -> Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]]:
        """One learner: `sac_forward` over the module's own nets. Several: RLlib's `forward_train` through DDP."""
        if self.config.num_learners > 1:
            return lambda minibatch: self.module.forward_train({mid: minibatch})[mid]
        module = self.module[mid].unwrapped()

        def critic_of(encoder: torch.nn.Module, head: torch.nn.Module) -> Callable:
            return lambda obs, actions: module._qf_forward_train_helper(
                {Columns.OBS: obs, Columns.ACTIONS: actions}, encoder, head)

        twin = module.twin_q
        critic_params = [p for net in (module.qf_encoder, module.qf) for p in net.parameters()]
        if twin:
            critic_params += [p for net in (module.qf_twin_encoder, module.qf_twin) for p in net.parameters()]
        nets = SACNets(
            pi=lambda obs: module.pi(module.pi_encoder({Columns.OBS: obs})[ENCODER_OUT]),
            critic=critic_of(module.qf_encoder, module.qf),
            critic_twin=critic_of(module.qf_twin_encoder, module.qf_twin) if twin else None,
            target=lambda obs, actions: module.forward_target({Columns.OBS: obs, Columns.ACTIONS: actions}),
            critic_params=critic_params)
        return self._compiled(lambda minibatch: sac_forward(nets, minibatch))

    def _target_pairs(self, mid: str) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The target networks' parameters and the online ones they track, in matching order."""
        pairs = self.module[mid].unwrapped().get_target_network_pairs()
        return ([p for _, target in pairs for p in target.parameters()],
                [p for main, _ in pairs for p in main.parameters()])

    def _step_for(self, mid: str, config: Any) -> Callable[[SACLosses, float], None]:
        """One backward pass of the losses' sum, then each optimizer's step on its own parameters
        (`algos.fast.learner_math.sac_step`)."""
        if self._grad_scalers is not None or self._lr_scheduler_classes is not None or (
                config.grad_clip is not None and config.grad_clip_by != "global_norm"):
            raise ValueError("FastSAC steps with global-norm clipping, no lr schedule and no grad scaler: set "
                             "training.implementation: rllib for other settings")
        return sac_step(self.get_optimizers_for_module(mid), config.grad_clip)

    def _log_once(self, mid: str, history: list[SACLosses], q_curr: torch.Tensor, logps: torch.Tensor,
                  td_errors: torch.Tensor, timesteps: dict[str, Any]) -> None:
        """What RLlib's SAC loss and target update log, once per call instead of once per minibatch."""
        alpha = torch.exp(self.curr_log_alpha[mid].detach())
        last = history[-1]
        values = {
            POLICY_LOSS_KEY: torch.stack([h.actor for h in history]).mean().item(),
            QF_LOSS_KEY: torch.stack([h.critic for h in history]).mean().item(),
            "alpha_loss": torch.stack([h.alpha for h in history]).mean().item(),
            "alpha_value": alpha[0].item(), "log_alpha_value": torch.log(alpha)[0].item(),
            "target_entropy": float(self.target_entropy[mid]), LOGPS_KEY: logps.mean().item(),
            QF_MEAN_KEY: q_curr.mean().item(), QF_MAX_KEY: q_curr.max().item(), QF_MIN_KEY: q_curr.min().item(),
            TD_ERROR_MEAN_KEY: td_errors.mean().item(), self.TOTAL_LOSS_KEY: last.total().item(),
        }
        if last.critic_twin is not None:
            values[QF_TWIN_LOSS_KEY] = torch.stack([h.critic_twin for h in history]).mean().item()
        self.metrics.log_dict(values, key=mid, window=1)
        self.metrics.log_value((mid, NUM_TARGET_UPDATES), len(history), reduce="lifetime_sum")
        self.metrics.log_value((mid, LAST_TARGET_UPDATE_TS), timesteps.get(NUM_ENV_STEPS_SAMPLED_LIFETIME, 0),
                               window=1)
