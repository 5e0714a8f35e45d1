"""SB3's SAC policy with RLlib's Q network, so the `train` benchmark's SAC peer runs the same network as FastSAC.

RLlib's SAC Q network for Box actions is a multi-stream encoder: an MLP per stream (the action, the observation; both
`fcnet_hiddens`), their concatenation through the fusion layers (`fusionnet_hiddens`, tanh, each after the first also
fed the concatenation), an output layer back to the encoder's width, then the Q head. SB3's critic is one MLP over
observation and action concatenated. `algos.fast.learner_math.QEncoder` is RLlib's encoder in plain torch (held equal to
RLlib's by tests/unit/test_learner_math.py); here it replaces each of SB3's critics (and their targets), so only the
two libraries' training loops differ. The actor is SB3's own, the same shape as RLlib's (an MLP of `net_arch`, then
the mean and log-std). Imported only once stable-baselines3 is known to be installed (common.require).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from stable_baselines3.common.policies import ContinuousCritic
from stable_baselines3.common.preprocessing import get_action_dim
from stable_baselines3.sac.policies import SACPolicy
from torch import nn

from algos.fast.learner_math import QEncoder, mlp


class MultiStreamQ(nn.Module):
    """One of SB3's critics as RLlib builds it: SB3 hands it the observation's features and the action concatenated."""

    def __init__(self, obs_dim: int, action_dim: int, hiddens: Sequence[int], activation: str,
                 fusion: Sequence[int], head_hiddens: Sequence[int] = ()) -> None:
        super().__init__()
        self.obs_dim = obs_dim
        self.encoder = QEncoder(obs_dim, action_dim, hiddens, activation, fusion)
        self.head = mlp([hiddens[-1], *head_hiddens, 1], "relu", last=False)

    def forward(self, features_and_action: torch.Tensor) -> torch.Tensor:
        obs, action = features_and_action[:, :self.obs_dim], features_and_action[:, self.obs_dim:]
        return self.head(self.encoder(obs, action))


def policy_class(q_network: dict[str, Any]) -> type[SACPolicy]:
    """SB3's SACPolicy whose critics are `MultiStreamQ(**q_network)` (hiddens, activation, fusion, head_hiddens)."""

    class RLlibQPolicy(SACPolicy):
        def make_critic(self, features_extractor: Any = None) -> ContinuousCritic:
            critic = super().make_critic(features_extractor)
            obs_dim, action_dim = critic.features_extractor.features_dim, get_action_dim(self.action_space)
            for index in range(len(critic.q_networks)):
                net = MultiStreamQ(obs_dim, action_dim, **q_network).to(self.device)
                critic.add_module(f"qf{index}", net)  # replaces SB3's MLP under the same name
                critic.q_networks[index] = net
            return critic

    return RLlibQPolicy
