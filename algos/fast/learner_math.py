"""One minibatch update of FastDQN and FastSAC in plain torch: the learners' gradient steps, and torch-only replicas
of the RLModules RLlib builds for them, so the update can be timed and checked without Ray.

The learners (`algos.dqn.fast_learner`, `algos.sac.fast_learner`) call `plain_step` and `sac_step` themselves; their
forward passes run RLlib's module. `DQNNet` and `SACNet` are that module's layers as RLlib 2.60's catalogs build them
from the platform's `rl_module` section (`fcnet_hiddens`, `fcnet_activation`, `head_fcnet_hiddens`), with state-dict
keys that are RLlib's without `.net.mlp` (and `target_` for `_target_`), and `DQNUpdate` / `SACUpdate` run what one
iteration of the learners' minibatch loop runs (forward under the preset's autocast, loss from `algos.fast.losses`, the
step, SAC's soft target update). `experiments.benchmark learner` times them; `tests/unit/test_learner_math.py` checks
them against RLlib's learners on one batch (same loss, gradients and weights after the step).

Plain torch (no Ray, pydantic or mlflow), like `algos.fast.losses`.
"""
from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Sequence

import torch
from torch import nn

from algos.fast.losses import (
    NEXT_OBS,
    OBS,
    QF_NEXT_PREDS,
    QF_PREDS,
    QF_TARGET_NEXT_PREDS,
    SACLosses,
    SACNets,
    Tensors,
    dqn_loss,
    polyak,
    sac_forward,
    sac_loss,
)

# RLlib's activation names (rl_module.fcnet_activation); "linear" adds no layer, as in RLlib's TorchMLP.
ACTIVATIONS: dict[str, type[nn.Module] | None] = {"relu": nn.ReLU, "tanh": nn.Tanh, "swish": nn.SiLU, "linear": None}
# RLlib's DefaultModelConfig fusion net of SAC's Q encoder, which conf/sac_btc.yaml keeps (rl_module.fusionnet_hiddens).
FUSION_HIDDENS, FUSION_ACTIVATION = (256, 256), "tanh"
# RLlib's SAC optimizers by name, and which of SACLosses' fields each one minimizes.
SAC_OPTIMIZER_LOSSES = {"qf": "critic", "qf_twin": "critic_twin", "policy": "actor", "alpha": "alpha"}


def plain_step(optimizer: torch.optim.Optimizer, clip: float | None) -> Callable[[torch.Tensor], None]:
    """FastDQN's gradient step (one optimizer, global-norm clipping): zero, backward, clip, step; a step whose gradient
    norm is not finite is skipped, as RLlib skips it."""
    params = [p for group in optimizer.param_groups for p in group["params"]]

    def step(loss: torch.Tensor) -> None:
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, clip, foreach=True) if clip else loss.detach()
        if torch.isfinite(norm):
            optimizer.step()

    return step


def sac_step(optimizers: Iterable[tuple[str, torch.optim.Optimizer]],
             clip: float | None) -> Callable[[SACLosses, float], None]:
    """FastSAC's gradient step: one backward pass of the losses' sum (x `loss_weight`), then each optimizer's own
    global-norm clip and step, skipped where its gradient norm (or its loss, unclipped) is not finite."""
    groups = [(SAC_OPTIMIZER_LOSSES[name], optimizer, [p for group in optimizer.param_groups for p in group["params"]])
              for name, optimizer in optimizers]

    def step(losses: SACLosses, loss_weight: float) -> None:
        for _, optimizer, _ in groups:
            optimizer.zero_grad(set_to_none=True)
        total = losses.total()
        (total if loss_weight == 1.0 else total * loss_weight).backward()
        for loss_name, optimizer, params in groups:
            norm = (torch.nn.utils.clip_grad_norm_(params, clip, foreach=True) if clip
                    else getattr(losses, loss_name).detach())
            if torch.isfinite(norm):
                optimizer.step()

    return step


def mlp(sizes: Sequence[int], activation: str, *, last: bool) -> nn.Sequential:
    """RLlib's TorchMLP: Linear layers through `sizes`, the activation after each hidden one (and after the last
    when `last`: an encoder's output is activated, a head's is linear)."""
    act, layers = ACTIVATIONS[activation], []
    for index, (inputs, outputs) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        layers.append(nn.Linear(inputs, outputs))
        if act is not None and (last or index < len(sizes) - 2):
            layers.append(act())
    return nn.Sequential(*layers)


class DQNNet(nn.Module):
    """RLlib's DefaultDQNTorchRLModule, expected Q: an MLP encoder, the advantage head `af` (Q itself without
    dueling), the value head `vf` when dueling, and a target copy of each."""

    def __init__(self, obs_dim: int, actions: int, hiddens: Sequence[int], activation: str = "relu",
                 head_hiddens: Sequence[int] = (), dueling: bool = True) -> None:
        super().__init__()
        for prefix in ("", "target_"):
            setattr(self, f"{prefix}encoder", mlp([obs_dim, *hiddens], activation, last=True))
            setattr(self, f"{prefix}af", mlp([hiddens[-1], *head_hiddens, actions], "relu", last=False))
            setattr(self, f"{prefix}vf", mlp([hiddens[-1], *head_hiddens, 1], "relu", last=False) if dueling else None)

    def q_values(self, obs: torch.Tensor, *, target: bool = False) -> torch.Tensor:
        """Q per action; dueling: advantages centered on their mean (RLlib's NaN-aware mean), plus the value."""
        prefix = "target_" if target else ""
        latent = getattr(self, f"{prefix}encoder")(obs)
        advantages, value_head = getattr(self, f"{prefix}af")(latent), getattr(self, f"{prefix}vf")
        if value_head is None:
            return advantages
        centered = advantages - torch.nan_to_num(advantages, neginf=torch.nan).nanmean(dim=-1, keepdim=True)
        return centered + value_head(latent)

    def forward_train(self, batch: Tensors, double_q: bool) -> Tensors:
        """FastDQN's forward: one online pass over obs and next obs (double Q), the target's under no_grad."""
        obs, next_obs = batch[OBS], batch[NEXT_OBS]
        if double_q:
            q_now, q_next = self.q_values(torch.cat([obs, next_obs])).chunk(2)
        else:
            q_now, q_next = self.q_values(obs), None
        with torch.no_grad():
            q_target = self.q_values(next_obs, target=True)
        return {QF_PREDS: q_now, QF_NEXT_PREDS: q_next, QF_TARGET_NEXT_PREDS: q_target}


class QEncoder(nn.Module):
    """RLlib's TorchMultiStreamEncoder, SAC's Q encoder for Box actions: an MLP per stream (actions, obs; in that
    order), their concatenation through the fusion layers (`fusion`: rl_module.fusionnet_hiddens), each after the
    first also fed the concatenation."""

    def __init__(self, obs_dim: int, action_dim: int, hiddens: Sequence[int], activation: str,
                 fusion: Sequence[int] = FUSION_HIDDENS) -> None:
        super().__init__()
        self.base_encoders = nn.ModuleDict({"actions": mlp([action_dim, *hiddens], activation, last=True),
                                            "obs": mlp([obs_dim, *hiddens], activation, last=True)})
        embed = 2 * hiddens[-1]
        inputs = [embed, *(size + embed for size in fusion[:-1])]
        self.fusion_layers = nn.ModuleList(nn.Linear(i, o) for i, o in zip(inputs, fusion, strict=True))
        self.output_layer = nn.Linear(fusion[-1] + embed, hiddens[-1])
        self.activation = ACTIVATIONS[FUSION_ACTIVATION]()

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        embeds = torch.cat([self.base_encoders["actions"](actions), self.base_encoders["obs"](obs)], dim=-1)
        out = self.activation(self.fusion_layers[0](embeds))
        for layer in self.fusion_layers[1:]:
            out = self.activation(layer(torch.cat([out, embeds], dim=-1)))
        return self.activation(self.output_layer(torch.cat([out, embeds], dim=-1)))


class SACNet(nn.Module):
    """RLlib's DefaultSACTorchRLModule for Box actions: the policy (MLP encoder, head giving the squashed Gaussian's
    mean and log std), the critic and its twin (QEncoder, one-output head) and a target copy of each critic."""

    def __init__(self, obs_dim: int, action_dim: int, hiddens: Sequence[int], activation: str = "relu",
                 head_hiddens: Sequence[int] = (), twin_q: bool = True) -> None:
        super().__init__()
        critics = ("qf", "qf_twin") if twin_q else ("qf",)
        self.pi_encoder = mlp([obs_dim, *hiddens], activation, last=True)
        for name in critics:
            setattr(self, f"{name}_encoder", QEncoder(obs_dim, action_dim, hiddens, activation))
        self.pi = mlp([hiddens[-1], *head_hiddens, 2 * action_dim], "relu", last=False)
        for name in critics:
            setattr(self, name, mlp([hiddens[-1], *head_hiddens, 1], "relu", last=False))
        for name in critics:
            setattr(self, f"target_{name}_encoder", QEncoder(obs_dim, action_dim, hiddens, activation))
            setattr(self, f"target_{name}", mlp([hiddens[-1], *head_hiddens, 1], "relu", last=False))
        self.critics = critics

    def critic(self, name: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
        encoder, head = getattr(self, f"{name}_encoder"), getattr(self, name)
        return lambda obs, actions: head(encoder(obs, actions)).squeeze(-1)

    def nets(self) -> SACNets:
        """The callables `algos.fast.losses.sac_forward` runs, as FastSAC's learner builds them from RLlib's module."""
        targets = [self.critic(f"target_{name}") for name in self.critics]
        twin = self.critic("qf_twin") if len(self.critics) > 1 else None

        def target(obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
            q = targets[0](obs, actions)
            return q if twin is None else torch.min(q, targets[1](obs, actions))

        return SACNets(pi=lambda obs: self.pi(self.pi_encoder(obs)), critic=self.critic("qf"), critic_twin=twin,
                       target=target, critic_params=[p for name in self.critics for net in (f"{name}_encoder", name)
                                                     for p in getattr(self, net).parameters()])

    def target_pairs(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The target critics' parameters and the online ones they track, in matching order."""
        names = [net for name in self.critics for net in (f"{name}_encoder", name)]
        return ([p for net in names for p in getattr(self, f"target_{net}").parameters()],
                [p for net in names for p in getattr(self, net).parameters()])


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """FastLearnerMixin._precision for "none" and "bf16" (fp16 needs FastDQN's grad scaler: not replicated)."""
    if precision == "none":
        return contextlib.nullcontext()
    if precision != "bf16":
        raise ValueError(f"precision {precision!r}: none or bf16")
    return torch.autocast(device.type, dtype=torch.bfloat16)


def compiled(forward: Callable, compile_forward: bool) -> Callable:
    """torch.compile of the forward pass with RLlib's default settings (inductor, default mode), as the learners
    compile it; static shapes, as a learner sees one minibatch size."""
    return torch.compile(forward, backend="inductor", dynamic=False) if compile_forward else forward


class DQNUpdate:
    """One iteration of FastDQN's minibatch loop on a DQNNet: forward and loss (under autocast), the plain step (the
    fused Adam RLlib's optimizer is in FastDQN: all of the module's parameters). The target network is not touched:
    FastDQN copies it every target_network_update_freq env steps, not per update."""

    def __init__(self, net: DQNNet, *, lr: float = 5e-4, gamma: float = 0.99, double_q: bool = True,
                 huber: bool = True, grad_clip: float | None = 40.0, precision: str = "none",
                 compile_forward: bool = False) -> None:
        self.gamma, self.double_q, self.huber, self.precision = gamma, double_q, huber, precision
        self.step = plain_step(torch.optim.Adam(net.parameters(), lr=lr, fused=True), grad_clip)
        self.forward = compiled(lambda batch: net.forward_train(batch, double_q), compile_forward)

    def loss(self, batch: Tensors) -> tuple[torch.Tensor, torch.Tensor]:
        """(loss, |TD error| per item)."""
        with autocast(self.precision, batch[OBS].device):
            loss, td_error, _ = dqn_loss(self.forward(batch), batch, gamma=self.gamma, double_q=self.double_q,
                                         huber=self.huber)
        return loss, td_error

    def __call__(self, batch: Tensors) -> torch.Tensor:
        """One update; returns |TD error| per item (the priorities FastDQN hands back to replay)."""
        loss, td_error = self.loss(batch)
        self.step(loss)
        return td_error


class SACUpdate:
    """One iteration of FastSAC's minibatch loop on a SACNet: `sac_forward` and `sac_loss` (under autocast), the SAC
    step over FastSAC's four fused Adam optimizers (eps 1e-7), then the soft target update."""

    def __init__(self, net: SACNet, *, lr: float = 3e-4, gamma: float = 0.99, tau: float = 5e-3,
                 initial_alpha: float = 0.2, target_entropy: float | None = None, grad_clip: float | None = None,
                 precision: str = "none", compile_forward: bool = False) -> None:
        device = next(net.parameters()).device
        self.gamma, self.tau, self.precision = gamma, tau, precision
        self.log_alpha = torch.tensor([math.log(initial_alpha)], device=device, requires_grad=True)
        action_dim = net.pi[-1].out_features // 2  # "auto": minus the number of action dimensions
        self.target_entropy = torch.tensor(-float(action_dim) if target_entropy is None else target_entropy,
                                           device=device)
        # RLlib's order and parameters: each critic with its encoder, the policy with its encoder, then alpha.
        groups = {name: [*getattr(net, f"{name}_encoder").parameters(), *getattr(net, name).parameters()]
                  for name in net.critics}
        groups["policy"] = [*net.pi_encoder.parameters(), *net.pi.parameters()]
        groups["alpha"] = [self.log_alpha]
        self.step = sac_step([(name, torch.optim.Adam(params, lr=lr, eps=1e-7, fused=True))
                              for name, params in groups.items()], grad_clip)
        self.targets, self.mains = net.target_pairs()
        nets = net.nets()
        self.forward = compiled(lambda batch: sac_forward(nets, batch), compile_forward)

    def losses(self, batch: Tensors) -> SACLosses:
        """The four losses and |TD error| per item."""
        with autocast(self.precision, batch[OBS].device):
            return sac_loss(self.forward(batch), batch, log_alpha=self.log_alpha, target_entropy=self.target_entropy,
                            gamma=self.gamma)

    def __call__(self, batch: Tensors) -> torch.Tensor:
        """One update; returns |TD error| per item (the twin critics' mean)."""
        losses = self.losses(batch)
        self.step(losses, 1.0)
        polyak(self.targets, self.mains, self.tau)
        return losses.td_error

