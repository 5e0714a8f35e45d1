"""algos.fast.losses.dqn_loss is RLlib's DQN loss: same loss value and TD errors as
`DQNTorchLearner.compute_loss_for_module` on the same forward outputs (no Ray session needed)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch


def _batch_and_forward(seed: int, size: int = 64, actions: int = 3):
    from ray.rllib.algorithms.dqn.dqn_learner import QF_NEXT_PREDS, QF_PREDS, QF_TARGET_NEXT_PREDS

    gen = torch.Generator().manual_seed(seed)
    batch = {
        "actions": torch.randint(0, actions, (size,), generator=gen),
        "rewards": torch.randn(size, generator=gen),
        "terminateds": (torch.rand(size, generator=gen) < 0.2).float(),
        "n_step": torch.randint(1, 4, (size,), generator=gen).float(),
        "weights": torch.rand(size, generator=gen) + 0.1,
    }
    fwd = {key: torch.randn(size, actions, generator=gen) * 3
           for key in (QF_PREDS, QF_NEXT_PREDS, QF_TARGET_NEXT_PREDS)}
    return batch, fwd


@pytest.mark.parametrize("double_q", [True, False])
@pytest.mark.parametrize("loss_name", ["huber", "mse"])
def test_loss_and_td_errors_equal_rllibs(double_q, loss_name):
    from ray.rllib.algorithms.dqn import DQNConfig
    from ray.rllib.algorithms.dqn.torch.dqn_torch_learner import DQNTorchLearner
    from ray.rllib.utils.metrics import TD_ERROR_KEY
    from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

    from algos.fast.losses import dqn_loss

    config = DQNConfig().training(gamma=0.97, double_q=double_q, td_error_loss_fn=loss_name)
    batch, fwd = _batch_and_forward(seed=3)
    stock_self = SimpleNamespace(metrics=MetricsLogger(), config=config)
    stock_loss = DQNTorchLearner.compute_loss_for_module(stock_self, module_id="m", config=config,
                                                         batch=batch, fwd_out=fwd)
    stock_td = stock_self.metrics.peek(("m", TD_ERROR_KEY))
    loss, td, _ = dqn_loss(fwd, batch, gamma=0.97, double_q=double_q, huber=loss_name == "huber")
    assert loss.item() == pytest.approx(stock_loss.item(), rel=1e-6)
    np.testing.assert_allclose(td.numpy(), np.concatenate([np.ravel(np.asarray(t)) for t in stock_td]), rtol=1e-6)
    # The comparison has power: another gamma gives another loss.
    other, _, _ = dqn_loss(fwd, batch, gamma=0.5, double_q=double_q, huber=loss_name == "huber")
    assert other.item() != pytest.approx(stock_loss.item(), rel=1e-3)
