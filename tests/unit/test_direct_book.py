"""The direct learner's torch book equals the env's numpy book, and its gradient through mu is the fixed point's.

- remainder_factor and scores_to_weights (algos/direct/book.py) against envs/portfolio/book.py and weights.py on
  random weights, long-only and long-short, to 1e-12;
- the gradient of mu with respect to both weight vectors against central finite differences, to 1e-6;
- a whole walk: the problem's per-decision log growth (algos/direct/portfolio.py) equals the env's rewards for the
  same scores, decision by decision, to 1e-12.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from algos.direct.book import remainder_factor, scores_to_weights
from envs.portfolio import book as numpy_book
from envs.portfolio.weights import scores_to_weights as numpy_weights

COST = 0.0012  # 10 bps fee + 2 bps slippage, as the shipped crypto universe


def _weight_pairs(rng: np.random.Generator, rule: str, n_assets: int, pairs: int) -> list[tuple[np.ndarray, ...]]:
    out = []
    for _ in range(pairs):
        tradable = rng.random(n_assets) > 0.2
        held = numpy_weights(rng.uniform(-1, 1, n_assets + 1), np.ones(n_assets, bool), rule, 3.0, 1.5)
        target = numpy_weights(rng.uniform(-1, 1, n_assets + 1), tradable, rule, 3.0, 1.5)
        out.append((held, target, tradable))
    return out


@pytest.mark.parametrize("rule", ["long_only", "long_short"])
def test_torch_remainder_factor_equals_the_books(rule: str) -> None:
    rng = np.random.default_rng(7)
    pairs = _weight_pairs(rng, rule, 6, 200)
    held = torch.tensor(np.stack([p[0] for p in pairs]))
    target = torch.tensor(np.stack([p[1] for p in pairs]))
    got = remainder_factor(held, target, COST).numpy()
    want = np.array([numpy_book.remainder_factor(h, t, COST) for h, t, _ in pairs])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    # rebalances far from the current weights put the root off the guessed piece: the sorted solve is exercised
    assert any(numpy_book.root_on_guessed_piece(h[1:], t[1:], 0.2) is None for h, t, _ in pairs)
    big = remainder_factor(held, target, 0.2 / 1.5).numpy()
    np.testing.assert_allclose(big, [numpy_book.remainder_factor(h, t, 0.2 / 1.5) for h, t, _ in pairs], atol=1e-12)


@pytest.mark.parametrize("rule", ["long_only", "long_short"])
def test_torch_scores_to_weights_equals_the_envs(rule: str) -> None:
    rng = np.random.default_rng(3)
    scores = rng.uniform(-1.3, 1.3, (100, 8))  # beyond the Box too: both clip
    tradable = rng.random((100, 7)) > 0.3
    got = scores_to_weights(torch.tensor(scores), torch.tensor(tradable), rule, 4.0, 1.2).numpy()
    np.testing.assert_allclose(got, numpy_weights(scores, tradable, rule, 4.0, 1.2), rtol=0, atol=1e-12)


@pytest.mark.parametrize("rule", ["long_only", "long_short"])
def test_the_gradient_through_mu_agrees_with_finite_differences(rule: str) -> None:
    rng = np.random.default_rng(11)
    step = 1e-7
    for held_np, target_np, _ in _weight_pairs(rng, rule, 5, 20):
        held = torch.tensor(held_np, requires_grad=True)
        target = torch.tensor(target_np, requires_grad=True)
        cost = 0.05  # large, so the cost's kinks sit near the weights and many roots leave the guessed piece
        remainder_factor(held, target, cost).backward()
        for tensor, base, other, held_side in ((held, held_np, target_np, True), (target, target_np, held_np, False)):
            def mu(weights: np.ndarray, other: np.ndarray = other, held_side: bool = held_side,
                   cost: float = cost) -> float:
                return numpy_book.remainder_factor(*((weights, other) if held_side else (other, weights)), cost)

            numeric = np.empty_like(base)
            for i in range(len(base)):
                up, down = base.copy(), base.copy()
                up[i] += step
                down[i] -= step
                numeric[i] = (mu(up) - mu(down)) / (2 * step)
            np.testing.assert_allclose(tensor.grad.numpy(), numeric, rtol=0, atol=1e-6)


@pytest.mark.parametrize("rule", ["long_only", "long_short"])
def test_the_problems_log_growth_is_the_envs_reward_decision_by_decision(rule: str) -> None:
    import envs
    from algos.direct.batches import Batch
    from algos.direct.portfolio import PortfolioProblem

    config = {"source": "synthetic", "synthetic_assets": 4, "synthetic_bars": 600, "split": "validation",
              "decision_interval": 3, "window": 5, "weights": rule, "gross_cap": 1.5, "fee_bps": 10,
              "slippage_bps": 2, "reward_scale": 1.0,
              "protocol": {"type": "walk_forward", "folds": 1, "validation_size": 120, "test_size": 60}}
    env = envs.make_env("trading/Portfolio-v0", config).unwrapped
    problem = PortfolioProblem(env, 2, "uniform", 0.01, 0)
    rng = np.random.default_rng(5)
    scores = rng.uniform(-1, 1, (problem.decisions, 5))
    env.reset(seed=0)
    rewards = []
    for row, action in zip(problem.rows, scores, strict=True):
        assert env._t == row  # the env decides where the problem does
        rewards.append(env.step(action.astype(np.float32))[1])
    batch = Batch(0, problem.decisions)
    growth, _ = problem.log_growth(torch.tensor(scores.astype(np.float32)), batch, problem.held_at_decisions(batch))
    np.testing.assert_allclose(growth.numpy(), rewards, rtol=0, atol=1e-12)


@pytest.mark.parametrize("positions", ["continuous", "continuous_long_short"])
def test_the_spot_problems_log_growth_is_the_envs_reward_decision_by_decision(positions: str) -> None:
    import envs
    from algos.direct.batches import Batch
    from algos.direct.spot import SpotProblem

    config = {"source": "synthetic", "split": "validation", "decision_interval": 2, "window": 4,
              "positions": positions, "min_trade": 0.0, "fee_bps": 10, "slippage_bps": 5, "reward_scale": 1.0}
    env = envs.make_env("trading/Spot-v0", config).unwrapped
    problem = SpotProblem(env, 2, "uniform", 0.01, 0)
    rng = np.random.default_rng(2)
    means = rng.uniform(-1.2, 1.2, problem.decisions)
    means[5:8] = means[4]  # a held target places no order
    targets = problem.targets_of(torch.tensor(means))
    env.reset(seed=0)
    rewards, observations = [], []
    for row, target in zip(problem.rows, targets.numpy(), strict=True):
        assert env._t == row
        observations.append(env._observation())
        step = env.step(np.array([target]))
        rewards.append(step[1])
        if step[2]:  # a margin call ends the env's walk; the problem does not model it
            break
    batch = Batch(0, len(rewards))
    growth = problem.log_growth(targets, batch, torch.zeros((), dtype=torch.float64))
    np.testing.assert_allclose(growth[:len(rewards)].numpy(), rewards, rtol=0, atol=1e-12)
    problem.memory[:len(rewards)] = targets[:len(rewards)]  # the memory's held targets make the env's observations
    obs = problem.observations(Batch(0, len(rewards)), problem.held_targets(Batch(0, len(rewards))))
    np.testing.assert_array_equal(obs.numpy(), np.stack(observations))
