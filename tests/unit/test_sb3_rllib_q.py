"""The `train` benchmark's SAC peer runs RLlib's Q network: SB3's SAC with `sb3_rllib_q.policy_class` has critics that,
given the weights of the Q network RLlib builds for the same rl_module section (a non-default fusion net here, so the
section is seen to reach both), give RLlib's Q values. Built locally, no Ray session; skipped without the peer."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

pytest.importorskip("stable_baselines3", reason='the peer is not installed: pip install -e ".[bench]"')

OBS_DIM = 193  # trading/Spot-v0 with window 24 and continuous positions (conf/sac_btc.yaml)
MODULE = {"fcnet_hiddens": [128, 128], "fcnet_activation": "relu", "head_fcnet_hiddens": [],
          "fusionnet_hiddens": [64, 32]}


class _Box(gym.Env):
    observation_space = gym.spaces.Box(-10.0, 10.0, (OBS_DIM,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)


def _rllib_q_module():
    """RLlib's SAC module for these spaces and this rl_module section, as its algorithm config builds it."""
    from ray.rllib.algorithms.sac import SACConfig

    torch.manual_seed(0)
    spaces = (_Box.observation_space, _Box.action_space)
    config = SACConfig().environment(observation_space=spaces[0], action_space=spaces[1]).rl_module(
        model_config=MODULE)
    return config.get_rl_module_spec(spaces={"__env__": spaces, "default_policy": spaces}).build()


def _sb3_critic():
    from stable_baselines3 import SAC

    from experiments.benchmark.sb3_rllib_q import policy_class

    q_network = {"hiddens": MODULE["fcnet_hiddens"], "activation": MODULE["fcnet_activation"],
                 "fusion": MODULE["fusionnet_hiddens"], "head_hiddens": MODULE["head_fcnet_hiddens"]}
    return SAC(policy_class(q_network), _Box(), policy_kwargs={"net_arch": MODULE["fcnet_hiddens"]},
               device="cpu", learning_starts=0).critic


def _rllib_weights_in_sb3_names(module) -> dict[str, torch.Tensor]:
    """RLlib's Q network and its twin (each an encoder and a head) as SB3's two critics' state dict."""
    renames = {"qf_encoder.": "qf0.encoder.", "qf.": "qf0.head.", "qf_twin_encoder.": "qf1.encoder.",
               "qf_twin.": "qf1.head."}
    state = {}
    for key, value in module.state_dict().items():
        name = key.replace(".net.mlp", "").removeprefix("_")
        if name.endswith("log_std_clip_param_const"):  # a constant of RLlib's heads that a Q head never reads
            continue
        for rllib, sb3 in renames.items():
            if name.startswith(rllib):
                state[sb3 + name.removeprefix(rllib)] = value
    return state


def test_the_sb3_peer_critics_are_rllibs_q_networks():
    from ray.rllib.core.columns import Columns

    module, critic = _rllib_q_module(), _sb3_critic()
    weights = _rllib_weights_in_sb3_names(module)
    assert {key: value.shape for key, value in critic.state_dict().items()} == {
        key: value.shape for key, value in weights.items()}  # the same layers, and no other
    critic.load_state_dict(weights)
    rng = np.random.default_rng(0)
    obs = torch.as_tensor(rng.normal(size=(32, OBS_DIM)).astype(np.float32))
    actions = torch.as_tensor(rng.uniform(-1, 1, (32, 1)).astype(np.float32))
    with torch.no_grad():
        first, twin = (q.squeeze(-1) for q in critic(obs, actions))
        torch.testing.assert_close(torch.minimum(first, twin),  # RLlib's Q of a twin-Q module: the smaller
                                   module.compute_q_values({Columns.OBS: obs, Columns.ACTIONS: actions}))
    assert not torch.allclose(first, twin)  # two critics, each with its own weights: the minimum saw both
