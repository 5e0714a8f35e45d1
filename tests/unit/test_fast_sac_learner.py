"""FastSAC's learner computes what RLlib's SAC learner computes: on one batch, from the same weights and the same
random stream, `algos.fast.losses.sac_forward` + `sac_loss` give RLlib's four losses and TD errors, and FastSAC's one
backward pass gives every optimizer the gradient RLlib's four backward passes give; a call of
`update_minibatches` then moves the weights as RLlib's optimizers would (no Ray session: learners built locally)."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

MID = "default_policy"
OBS_SPACE = gym.spaces.Box(-2.0, 2.0, (4,), np.float32)
ACTION_SPACE = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


def _learner(fast: bool, twin_q: bool, grad_clip: float | None = None):
    from ray.rllib.algorithms.sac import SACConfig

    from algos.sac.fast_sac import FastSACConfig

    config = (FastSACConfig() if fast else SACConfig()).environment(
        observation_space=OBS_SPACE, action_space=ACTION_SPACE).training(
        twin_q=twin_q, gamma=0.97, initial_alpha=0.5, grad_clip=grad_clip, actor_lr=1e-3, critic_lr=2e-3,
        alpha_lr=3e-3).rl_module(model_config={"fcnet_hiddens": [16, 16]})
    learner = config.build_learner(env=None, spaces={"__env__": (OBS_SPACE, ACTION_SPACE),
                                                      MID: (OBS_SPACE, ACTION_SPACE)})
    return learner


def _pair(twin_q: bool, grad_clip: float | None = None):
    """A stock and a fast learner holding the same weights."""
    torch.manual_seed(0)
    stock, fast = _learner(False, twin_q, grad_clip), _learner(True, twin_q, grad_clip)
    fast.module[MID].load_state_dict(stock.module[MID].state_dict())
    return stock, fast


def _batch(size: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"obs": rng.uniform(-2, 2, (size, 4)).astype(np.float32),
            "new_obs": rng.uniform(-2, 2, (size, 4)).astype(np.float32),
            "actions": rng.uniform(-1, 1, (size, 2)).astype(np.float32),
            "rewards": rng.normal(size=size).astype(np.float32),
            "terminateds": (rng.random(size) < 0.2).astype(np.float32),
            "n_step": rng.integers(1, 4, size).astype(np.float32),
            "weights": rng.uniform(0.5, 1.5, size).astype(np.float32)}


def _tensors(batch):
    return {key: torch.from_numpy(value) for key, value in batch.items()}


@pytest.mark.parametrize("twin_q", [True, False])
def test_losses_and_gradients_equal_rllibs(twin_q):
    from ray.rllib.utils.metrics import TD_ERROR_KEY

    from algos.fast.losses import sac_loss

    stock, fast = _pair(twin_q)
    batch = _tensors(_batch(64, seed=1))
    config = stock.config.get_config_for_module(MID)
    torch.manual_seed(7)
    stock_out = stock.module[MID].forward_train(batch)
    stock_total = stock.compute_loss_for_module(module_id=MID, config=config, batch=batch, fwd_out=stock_out)
    stock_td = stock.metrics.peek((MID, TD_ERROR_KEY))
    stock_losses = {name: stock._temp_losses[(MID, name)].item()
                    for name in ("policy_loss", "qf_loss", "alpha_loss", "qf_twin_loss") if (MID, name) in
                    stock._temp_losses}
    stock_grads = stock.compute_gradients({MID: stock_total})

    torch.manual_seed(7)
    fwd_out = fast._forward_for(MID)(batch)
    losses = sac_loss(fwd_out, batch, log_alpha=fast.curr_log_alpha[MID], target_entropy=fast.target_entropy[MID],
                      gamma=config.gamma)
    assert losses.actor.item() == pytest.approx(stock_losses["policy_loss"], rel=1e-5)
    assert losses.critic.item() == pytest.approx(stock_losses["qf_loss"], rel=1e-5)
    assert losses.alpha.item() == pytest.approx(stock_losses["alpha_loss"], rel=1e-5)
    assert (losses.critic_twin is None) == (not twin_q)
    if twin_q:
        assert losses.critic_twin.item() == pytest.approx(stock_losses["qf_twin_loss"], rel=1e-5)
    np.testing.assert_allclose(losses.td_error.numpy(),
                               np.concatenate([np.ravel(np.asarray(t)) for t in stock_td]), rtol=1e-5, atol=1e-6)
    losses.total().backward()
    # Learner._params: every optimizer's parameters, alpha's included, in registration order on both sides.
    stock_refs, fast_params = list(stock._params), list(fast._params.values())
    assert len(stock_refs) == len(fast_params) and len(stock_grads) == len(stock_refs)
    for ref, param in zip(stock_refs, fast_params, strict=True):
        assert param.shape == stock._params[ref].shape
        torch.testing.assert_close(param.grad, stock_grads[ref], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("grad_clip", [None, 0.1])
def test_one_call_steps_every_optimizer_as_rllib_does(grad_clip):
    """Two minibatches in one call = two of RLlib's updates (losses, per-optimizer clip, Adam, soft target update)."""
    stock, fast = _pair(twin_q=True, grad_clip=grad_clip)
    before = {key: value.detach().clone() for key, value in fast.module[MID].named_parameters()}
    columns = _batch(64, seed=2)
    timesteps = {"num_env_steps_sampled_lifetime": 1000}
    torch.manual_seed(11)
    _, td_errors = fast.update_minibatches(columns, minibatch_size=32, timesteps=timesteps)
    torch.manual_seed(11)
    for start in (0, 32):
        minibatch = _tensors({key: value[start:start + 32] for key, value in columns.items()})
        config = stock.config.get_config_for_module(MID)
        stock.before_gradient_based_update(timesteps=timesteps)
        loss = stock.compute_loss_for_module(module_id=MID, config=config, batch=minibatch,
                                             fwd_out=stock.module[MID].forward_train(minibatch))
        stock.apply_gradients(stock.postprocess_gradients(stock.compute_gradients({MID: loss})))
        stock.after_gradient_based_update(timesteps=timesteps)
    assert td_errors.shape == (64,)
    stock_state, fast_state = stock.module[MID].state_dict(), fast.module[MID].state_dict()
    for key, value in stock_state.items():
        torch.testing.assert_close(fast_state[key], value, rtol=1e-4, atol=1e-6)
    # The comparison has power: every parameter, online and target, moved.
    assert all(not torch.equal(fast_state[key], before[key]) for key in before)
    torch.testing.assert_close(fast.curr_log_alpha[MID], stock.curr_log_alpha[MID], rtol=1e-5, atol=1e-7)
