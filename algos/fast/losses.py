"""The fast learners' update math in plain torch: DQN's and SAC's losses and SAC's forward pass.

Plain torch (no Ray) so that `experiments.benchmark learner` times exactly the arithmetic the FastDQN and FastSAC
learners run, on any machine with torch, without importing Ray. The learners (`algos.dqn.fast_learner`,
`algos.sac.fast_learner`) call these functions on RLlib's own RLModule; `tests/unit/test_fast_learner.py` and
`tests/unit/test_fast_sac_learner.py` check them against RLlib's `compute_loss_for_module` on the same batch.

Batch keys are RLlib's column names (`Columns.OBS` is "obs", ...), spelled out here so nothing imports Ray.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch

OBS, NEXT_OBS, ACTIONS, REWARDS, TERMINATEDS = "obs", "new_obs", "actions", "rewards", "terminateds"
N_STEP, WEIGHTS = "n_step", "weights"
# RLlib's forward_train output keys (ray.rllib.algorithms.dqn.dqn_learner, ray.rllib.algorithms.sac.sac_learner).
QF_PREDS, QF_NEXT_PREDS, QF_TARGET_NEXT_PREDS = "qf_preds", "qf_next_preds", "qf_target_next_preds"
QF_TWIN_PREDS, Q_TARGET_NEXT, Q_CURR = "qf_twin_preds", "q_target_next", "q_curr"
LOGP_RESAMPLED, LOGP_NEXT_RESAMPLED = "logp_resampled", "logp_next_resampled"
# RLlib's clamp of the squashed Gaussian's log std (ray.rllib.utils.numpy.MIN/MAX_LOG_NN_OUTPUT).
MIN_LOG_STD, MAX_LOG_STD = -5.0, 2.0

Tensors = dict[str, torch.Tensor]


def dqn_loss(fwd_out: Tensors, batch: Tensors, *, gamma: float, double_q: bool,
             huber: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loss, |TD error| per item, selected Q per item): RLlib's expected-Q DQN loss, same arithmetic."""
    q_selected = torch.nan_to_num(
        torch.gather(fwd_out[QF_PREDS], -1, batch[ACTIONS].long().unsqueeze(-1)), neginf=0.0).squeeze(-1)
    q_target_next = fwd_out[QF_TARGET_NEXT_PREDS]
    chooser = fwd_out[QF_NEXT_PREDS] if double_q else q_target_next
    best = torch.argmax(chooser, dim=-1, keepdim=True)
    q_next_best = torch.nan_to_num(torch.gather(q_target_next, -1, best), neginf=0.0).squeeze(-1)
    target = (batch[REWARDS] + gamma ** batch[N_STEP] * (1.0 - batch[TERMINATEDS].float()) * q_next_best).detach()
    loss_fn = torch.nn.functional.huber_loss if huber else torch.nn.functional.mse_loss
    loss = torch.mean(batch[WEIGHTS] * loss_fn(q_selected, target, reduction="none"))
    return loss, torch.abs(q_selected - target).detach(), q_selected.detach()


def squashed_gaussian_sample(logits: torch.Tensor, *, reparameterized: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(action in [-1, 1], its log-probability) drawn from RLlib's squashed Gaussian (TorchSquashedGaussian's
    `rsample_and_logp` / `sample_and_logp`: the same clamp, draw, tanh and Jacobian, so the same random stream gives
    the same numbers)."""
    loc, log_std = logits.chunk(2, dim=-1)
    normal = torch.distributions.Normal(loc, torch.clamp(log_std, MIN_LOG_STD, MAX_LOG_STD).exp(),
                                        validate_args=False)
    unsquashed = normal.rsample() if reparameterized else normal.sample()
    action = torch.clamp((torch.tanh(unsquashed) + 1.0) / 2.0 * 2.0 - 1.0, -1.0, 1.0)
    jacobian = 2.0 * (math.log(2.0) - unsquashed - torch.nn.functional.softplus(-2.0 * unsquashed))
    return action, normal.log_prob(unsquashed).sum(-1) - jacobian.sum(-1)


class SACNets(NamedTuple):
    """SAC's networks as callables: pi(obs) -> the Gaussian's inputs; q(obs, actions) -> Q per item (the twin's
    minimum where there is a twin); the online critics alone (`critic`, `critic_twin`, None without a twin); the
    target critics' minimum; and the critics' parameters, frozen while the actor's loss reads Q."""

    pi: Callable[[torch.Tensor], torch.Tensor]
    critic: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    critic_twin: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None
    target: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    critic_params: list[torch.nn.Parameter]


def sac_forward(nets: SACNets, batch: Tensors) -> Tensors:
    """What RLlib's continuous SAC `_forward_train` returns, from one policy pass over obs and next obs together
    (RLlib runs two): the critics on the stored actions, a reparameterized action now (its Q with the critics frozen,
    so the actor's loss moves the actor only) and a sampled next action valued by the target critics. The random
    draws come in RLlib's order (now, then next)."""
    obs, next_obs = batch[OBS], batch[NEXT_OBS]
    logits, logits_next = nets.pi(torch.cat([obs, next_obs])).chunk(2)
    out = {QF_PREDS: nets.critic(obs, batch[ACTIONS])}
    if nets.critic_twin is not None:
        out[QF_TWIN_PREDS] = nets.critic_twin(obs, batch[ACTIONS])
    actions_now, out[LOGP_RESAMPLED] = squashed_gaussian_sample(logits, reparameterized=True)
    with torch.no_grad():
        actions_next, out[LOGP_NEXT_RESAMPLED] = squashed_gaussian_sample(logits_next, reparameterized=False)
    for param in nets.critic_params:
        param.requires_grad_(False)
    try:
        out[Q_CURR] = _min_q(nets, obs, actions_now)
    finally:
        for param in nets.critic_params:
            param.requires_grad_(True)
    with torch.no_grad():
        out[Q_TARGET_NEXT] = nets.target(next_obs, actions_next)
    return out


def _min_q(nets: SACNets, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    q = nets.critic(obs, actions)
    return q if nets.critic_twin is None else torch.min(q, nets.critic_twin(obs, actions))


class SACLosses(NamedTuple):
    """SAC's four losses (the twin's is None without a twin), each reaching only its own optimizer's parameters, so
    one backward pass of their sum gives each optimizer the gradient of its own loss; and |TD error| per item."""

    actor: torch.Tensor
    critic: torch.Tensor
    critic_twin: torch.Tensor | None
    alpha: torch.Tensor
    td_error: torch.Tensor

    def total(self) -> torch.Tensor:
        total = self.actor + self.critic + self.alpha
        return total if self.critic_twin is None else total + self.critic_twin


def sac_loss(fwd_out: Tensors, batch: Tensors, *, log_alpha: torch.Tensor, target_entropy: torch.Tensor | float,
             gamma: float) -> SACLosses:
    """RLlib's continuous SAC loss (SACTorchLearner._compute_loss_for_module_continuous), same arithmetic."""
    alpha = torch.exp(log_alpha).detach()
    q_next = (1.0 - batch[TERMINATEDS].float()) * (fwd_out[Q_TARGET_NEXT] - alpha * fwd_out[LOGP_NEXT_RESAMPLED])
    target = (batch[REWARDS] + (gamma ** batch[N_STEP]) * q_next).detach()
    huber = torch.nn.functional.huber_loss
    td_error = torch.abs(fwd_out[QF_PREDS] - target)
    critic = torch.mean(batch[WEIGHTS] * huber(fwd_out[QF_PREDS], target, reduction="none", delta=1.0))
    twin = None
    if QF_TWIN_PREDS in fwd_out:
        td_error = (td_error + torch.abs(fwd_out[QF_TWIN_PREDS] - target)) * 0.5
        twin = torch.mean(batch[WEIGHTS] * huber(fwd_out[QF_TWIN_PREDS], target, reduction="none", delta=1.0))
    actor = torch.mean(alpha * fwd_out[LOGP_RESAMPLED] - fwd_out[Q_CURR])
    alpha_loss = -torch.mean(log_alpha * (fwd_out[LOGP_RESAMPLED].detach() + target_entropy))
    return SACLosses(actor, critic, twin, alpha_loss, td_error.detach())


def polyak(targets: list[torch.Tensor], mains: list[torch.Tensor], tau: float) -> None:
    """target = tau * main + (1 - tau) * target for every pair, in place: RLlib's `update_target_network`
    arithmetic in two fused calls instead of a state-dict round trip per network."""
    with torch.no_grad():
        torch._foreach_mul_(targets, 1.0 - tau)
        torch._foreach_add_(targets, torch._foreach_mul(mains, tau))
