"""`algos.learner_math` runs the update FastDQN's and FastSAC's learners run, without Ray: its torch-only replicas of
RLlib's modules (built as the platform configures them: conf/dqn_btc.yaml, conf/sac_btc.yaml) take RLlib's weights
key for key, give RLlib's loss and gradients on one batch, and one update moves every weight as one minibatch of the
learner's `update_minibatches` does (learners built locally, no Ray session)."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

MID = "default_policy"
MODEL = {"fcnet_hiddens": [128, 128], "fcnet_activation": "relu", "head_fcnet_hiddens": []}  # the rl_module section
OBS_DIM = 194  # trading/Spot-v0 with window 24 (conf/dqn_btc.yaml)
TIMESTEPS = {"num_env_steps_sampled_lifetime": 0}


def _spaces(action_space: gym.Space) -> dict[str, tuple[gym.Space, gym.Space]]:
    obs_space = gym.spaces.Box(-10.0, 10.0, (OBS_DIM,), np.float32)
    return {"__env__": (obs_space, action_space), MID: (obs_space, action_space)}


def _learner(config, action_space: gym.Space):
    """An RLlib learner, built once (`build_learner` builds it: a second `build()` would give SAC a new log alpha
    that its alpha optimizer does not hold)."""
    return config.environment(observation_space=_spaces(action_space)[MID][0], action_space=action_space
                              ).rl_module(model_config=MODEL).build_learner(env=None, spaces=_spaces(action_space))


def _replica_state(rllib_state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """RLlib's state-dict keys as the replicas spell them (the heads' unused log-std clip constants dropped)."""
    return {key.replace(".net.mlp", "").removeprefix("_"): value.clone() for key, value in rllib_state.items()
            if not key.endswith("log_std_clip_param_const")}


def _columns(size: int, seed: int, continuous: bool) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    actions = (rng.uniform(-1, 1, (size, 1)).astype(np.float32) if continuous
               else rng.integers(0, 2, size).astype(np.int64))
    return {"obs": rng.normal(size=(size, OBS_DIM)).astype(np.float32),
            "new_obs": rng.normal(size=(size, OBS_DIM)).astype(np.float32), "actions": actions,
            "rewards": rng.normal(size=size).astype(np.float32),
            "terminateds": (rng.random(size) < 0.2).astype(np.float32),
            "n_step": rng.integers(1, 4, size).astype(np.float32),
            "weights": rng.uniform(0.5, 1.5, size).astype(np.float32)}


def _tensors(columns: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {key: torch.from_numpy(value) for key, value in columns.items()}


def _perturbed(state: dict[str, torch.Tensor], key: str) -> dict[str, torch.Tensor]:
    state[key][0, 0] += 0.5
    return state


def _gradient(learner, gradients: dict, param: torch.Tensor) -> torch.Tensor | None:
    """RLlib's gradient of `param` (compute_gradients keys them by the learner's parameter references)."""
    refs = [ref for ref, registered in learner._params.items() if registered is param]
    return gradients.get(refs[0]) if refs else None


def _assert_same_gradients(learner, gradients: dict, replica: torch.nn.Module) -> None:
    """Every parameter RLlib has a gradient for has the same gradient in the replica; the others (targets) none."""
    replica_params = dict(replica.named_parameters())
    named = dict(learner.module[MID].named_parameters())
    compared = 0
    for name, param in named.items():
        expected, got = _gradient(learner, gradients, param), replica_params[name.replace(".net.mlp", "").lstrip("_")]
        if expected is None:
            assert got.grad is None, name
        else:
            torch.testing.assert_close(got.grad, expected, rtol=1e-5, atol=1e-6)
            compared += 1
    assert compared >= 6


def _assert_same_weights(learner, replica: torch.nn.Module) -> None:
    for key, value in _replica_state(learner.module[MID].state_dict()).items():
        torch.testing.assert_close(replica.state_dict()[key], value, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("grad_clip", [40.0, 0.05])
def test_dqn_replica_gives_rllibs_loss_gradients_and_update(grad_clip):
    from algos.fast_dqn import FastDQNConfig
    from algos.learner_math import DQNNet, DQNUpdate

    torch.manual_seed(0)
    learner = _learner(FastDQNConfig().training(double_q=True, dueling=True, td_error_loss_fn="huber",
                                                grad_clip=grad_clip, gamma=0.99, lr=5e-4), gym.spaces.Discrete(2))
    net = DQNNet(OBS_DIM, 2, MODEL["fcnet_hiddens"], "relu", dueling=True)
    net.load_state_dict(_replica_state(learner.module[MID].state_dict()))
    update = DQNUpdate(net, lr=5e-4, gamma=0.99, double_q=True, huber=True, grad_clip=grad_clip)
    columns = _columns(64, seed=1, continuous=False)
    batch = _tensors(columns)

    # RLlib's own forward_train and loss (not FastDQN's), and its gradients.
    config = learner.config.get_config_for_module(MID)
    stock_loss = learner.compute_loss_for_module(module_id=MID, config=config, batch=batch,
                                                 fwd_out=learner.module[MID].forward_train(batch))
    gradients = learner.compute_gradients({MID: stock_loss})
    loss, _ = update.loss(batch)
    assert loss.item() == pytest.approx(stock_loss.item(), rel=1e-5)
    loss.backward()
    _assert_same_gradients(learner, gradients, net)
    # The comparison has power: a perturbed weight gives another loss.
    perturbed = DQNNet(OBS_DIM, 2, MODEL["fcnet_hiddens"], "relu", dueling=True)
    perturbed.load_state_dict(_perturbed(_replica_state(learner.module[MID].state_dict()), "encoder.0.weight"))
    assert DQNUpdate(perturbed).loss(batch)[0].item() != pytest.approx(stock_loss.item(), rel=1e-4)

    # One update = one minibatch of FastDQN's loop (clip, fused Adam; the target network stays).
    _, stock_td = learner.update_minibatches(columns, minibatch_size=64, timesteps=TIMESTEPS)
    before = {key: value.clone() for key, value in net.state_dict().items()}
    td_error = update(batch)
    np.testing.assert_allclose(td_error.numpy(), stock_td, rtol=1e-5, atol=1e-6)
    _assert_same_weights(learner, net)
    moved = {key for key, value in net.state_dict().items() if not torch.equal(value, before[key])}
    assert moved == {key for key in before if not key.startswith("target_")}


def test_sac_replica_gives_rllibs_losses_gradients_and_update():
    from ray.rllib.algorithms.sac.sac_learner import QF_LOSS_KEY, QF_TWIN_LOSS_KEY
    from ray.rllib.core.learner.learner import POLICY_LOSS_KEY

    from algos.fast_sac import FastSACConfig
    from algos.learner_math import SACNet, SACUpdate

    torch.manual_seed(0)
    learner = _learner(FastSACConfig().training(twin_q=True, gamma=0.99, tau=5e-3, initial_alpha=0.2,
                                                actor_lr=3e-4, critic_lr=3e-4, alpha_lr=3e-4),
                       gym.spaces.Box(-1.0, 1.0, (1,), np.float32))
    net = SACNet(OBS_DIM, 1, MODEL["fcnet_hiddens"], "relu", twin_q=True)
    net.load_state_dict(_replica_state(learner.module[MID].state_dict()))
    update = SACUpdate(net, lr=3e-4, gamma=0.99, tau=5e-3, initial_alpha=0.2)
    torch.testing.assert_close(update.log_alpha, learner.curr_log_alpha[MID].detach())
    columns = _columns(64, seed=2, continuous=True)
    batch = _tensors(columns)

    # RLlib's own forward_train, loss and four backward passes, against the replica's one pass of the losses' sum.
    config = learner.config.get_config_for_module(MID)
    torch.manual_seed(7)
    stock_total = learner.compute_loss_for_module(module_id=MID, config=config, batch=batch,
                                                  fwd_out=learner.module[MID].forward_train(batch))
    stock = {key: learner._temp_losses[(MID, key)].item() for key in (POLICY_LOSS_KEY, QF_LOSS_KEY, QF_TWIN_LOSS_KEY)}
    gradients = learner.compute_gradients({MID: stock_total})
    torch.manual_seed(7)
    losses = update.losses(batch)
    assert losses.actor.item() == pytest.approx(stock[POLICY_LOSS_KEY], rel=1e-5)
    assert losses.critic.item() == pytest.approx(stock[QF_LOSS_KEY], rel=1e-5)
    assert losses.critic_twin.item() == pytest.approx(stock[QF_TWIN_LOSS_KEY], rel=1e-5)
    losses.total().backward()
    _assert_same_gradients(learner, gradients, net)
    torch.testing.assert_close(update.log_alpha.grad, _gradient(learner, gradients, learner.curr_log_alpha[MID]),
                               rtol=1e-5, atol=1e-7)
    # The comparison has power: a perturbed weight gives another critic loss.
    perturbed = SACNet(OBS_DIM, 1, MODEL["fcnet_hiddens"], "relu", twin_q=True)
    perturbed.load_state_dict(_perturbed(_replica_state(learner.module[MID].state_dict()),
                                         "qf_encoder.fusion_layers.0.weight"))
    torch.manual_seed(7)
    assert SACUpdate(perturbed).losses(batch).critic.item() != pytest.approx(stock[QF_LOSS_KEY], rel=1e-4)

    # One update = one minibatch of FastSAC's loop (four fused Adam steps, then the soft target update).
    torch.manual_seed(11)
    _, stock_td = learner.update_minibatches(columns, minibatch_size=64, timesteps=TIMESTEPS)
    before = {key: value.clone() for key, value in net.state_dict().items()}
    torch.manual_seed(11)
    td_error = update(batch)
    np.testing.assert_allclose(td_error.numpy(), stock_td, rtol=1e-5, atol=1e-6)
    _assert_same_weights(learner, net)
    torch.testing.assert_close(update.log_alpha, learner.curr_log_alpha[MID].detach(), rtol=1e-6, atol=1e-7)
    assert all(not torch.equal(value, before[key]) for key, value in net.state_dict().items())
    assert update.log_alpha.item() != pytest.approx(np.log(0.2), abs=1e-6)
