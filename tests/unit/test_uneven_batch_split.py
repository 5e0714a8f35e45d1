"""A batch split unevenly over data-parallel learners gives the single-learner update (issue: a 3-GPU preset
refused the main job's batch 32). DDP averages the learners' gradients; each slice's mean loss is weighted by
N x its share (algos.inputs.slice_weights), so the average is the gradient of the whole batch's mean loss."""
from __future__ import annotations

from itertools import pairwise

import pytest
import torch

from algos.inputs import slice_sizes, slice_weights


@pytest.mark.parametrize("batch, learners, sizes", [(32, 3, (11, 11, 10)), (33, 2, (17, 16)), (32, 4, (8, 8, 8, 8)),
                                                    (7, 8, (1, 1, 1, 1, 1, 1, 1, 0))])
def test_slices_cover_the_batch_as_evenly_as_possible(batch, learners, sizes):
    assert slice_sizes(batch, learners) == sizes
    assert sum(slice_weights(batch, learners)) == pytest.approx(learners)


@pytest.mark.parametrize("batch, learners", [(32, 3), (33, 2), (768, 5), (32, 4)])
def test_weighted_uneven_slices_average_to_the_single_learner_gradient(batch, learners):
    from ray.rllib.algorithms.dqn.dqn_learner import QF_NEXT_PREDS, QF_PREDS, QF_TARGET_NEXT_PREDS
    from ray.rllib.core.columns import Columns

    from algos.fast.losses import dqn_loss

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).double()
    target = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).double()
    data = {Columns.OBS: torch.randn(batch, 6, dtype=torch.float64),
            Columns.NEXT_OBS: torch.randn(batch, 6, dtype=torch.float64),
            Columns.ACTIONS: torch.randint(0, 3, (batch,)), Columns.REWARDS: torch.randn(batch, dtype=torch.float64),
            Columns.TERMINATEDS: torch.rand(batch) < 0.1, "n_step": torch.full((batch,), 3.0, dtype=torch.float64),
            "weights": torch.rand(batch, dtype=torch.float64) + 0.5}

    def gradient(rows: slice, weight: float) -> torch.Tensor:
        part = {key: value[rows] for key, value in data.items()}
        out = {QF_PREDS: net(part[Columns.OBS]), QF_NEXT_PREDS: net(part[Columns.NEXT_OBS]).detach(),
               QF_TARGET_NEXT_PREDS: target(part[Columns.NEXT_OBS]).detach()}
        loss, _, _ = dqn_loss(out, part, gamma=0.99, double_q=True, huber=True)
        net.zero_grad()
        (loss * weight).backward()
        return torch.cat([p.grad.flatten() for p in net.parameters()])

    single = gradient(slice(0, batch), 1.0)
    bounds = [0]
    for size in slice_sizes(batch, learners):
        bounds.append(bounds[-1] + size)
    weights = slice_weights(batch, learners)
    parts = [gradient(slice(a, b), w) for (a, b), w in zip(pairwise(bounds), weights, strict=True) if b > a]
    averaged = torch.stack(parts).sum(dim=0) / learners  # what DDP's all-reduce does (a mean over learners)
    torch.testing.assert_close(averaged, single, rtol=1e-12, atol=1e-12)
    if batch % learners:  # unweighted uneven slices would not give the same update: the weights matter
        plain = torch.stack([gradient(slice(a, b), 1.0) for a, b in pairwise(bounds)]).mean(dim=0)
        assert not torch.allclose(plain, single, rtol=1e-6, atol=1e-9)


def test_a_batch_a_stock_learner_cannot_split_is_refused_naming_batches_that_work():
    from envs.errors import InputError
    from experiments.hardware.batch import check_split

    check_split(32, 3, True, "dqn", "here")  # FastDQN weights the slices
    check_split(33, 3, False, "ppo", "here")
    with pytest.raises(InputError, match="set training.train_batch_size_per_learner to 30 or 33"):
        check_split(32, 3, False, "dqn", "here")
    with pytest.raises(InputError, match="nothing to learn from: .* at least 8"):
        check_split(7, 8, True, "dqn", "here")
