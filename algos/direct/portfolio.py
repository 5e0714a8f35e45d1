"""trading/Portfolio-v0 as the direct learner's problem: the fold's train decisions, their price relatives, a
portfolio-vector memory and the mean log growth of a mini-batch of consecutive decisions, after the exact cost.

Decision k sits at row r_k = lo + k d of the train part (d: decision_interval), as the env walks it. The book holds
h_k at close r_k; the policy's target w_k (the greedy scores through the env's score-to-weight map) fills at open
r_k + 1 at the remainder factor mu(h'_k, w_k) and is held to close r_k + d. With a_k = (1, open_{r+1} / close_r) and
y_k = (1, close_{r+d} / open_{r+1}) (cash first), the equity's growth from close to close is

    (h_k . a_k) * mu(h_k a_k / h_k . a_k, w_k) * (w_k . y_k),     h_{k+1} = w_k y_k / (w_k . y_k)

which is the env's reward before reward_scale (tests/unit/test_direct_book.py holds them equal). A mini-batch is B
consecutive decisions: all B targets come from one forward pass, each observation carrying the held weights that the
memory (PVM) implies (the targets stored at the last update that visited the decision before), and within the
batch each decision's previous target is the batch's own, so the gradient flows through the cost into the decision
before (Jiang, Xu & Liang 2017, section 5). Starts are drawn geometrically towards the recent end, P(k0) ~
(1 - bias)^(last - k0), or uniformly.

What it leaves out, against the env: an asset whose bars end inside a period is not sold at its last close (the
universe carries its last price), and a long-short book is not marked for ruin; the validation and test scores,
which choose and judge the model, walk the env itself.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from algos.direct.batches import Batch, check_batch_fits, check_fits, decision_rows, draw_batch
from algos.direct.book import remainder_factor, scores_to_weights
from envs.errors import InputError


class PortfolioProblem:
    """The train part of one fold of a universe, ready for gradient ascent (module docstring)."""

    def __init__(self, env: Any, batch_size: int, batch_start: str, geometric_bias: float, seed: int | None,
                 device: Any = "cpu") -> None:
        cfg, market = env.cfg, env.market
        self.env, self.device = env, torch.device(device)
        interval = cfg.decision_interval
        self.rows = decision_rows(env)
        check_batch_fits(len(self.rows), batch_size, cfg.split)
        opens, closes = market.universe.opens, market.universe.closes
        rows = self.rows
        ones = np.ones((len(rows), 1))
        gap = np.concatenate([ones, opens[rows + 1] / closes[rows]], axis=1)
        period = np.concatenate([ones, closes[rows + interval] / opens[rows + 1]], axis=1)
        self.gap = torch.as_tensor(gap, dtype=torch.float64, device=self.device)
        self.period = torch.as_tensor(period, dtype=torch.float64, device=self.device)
        self.tradable = torch.as_tensor(market.tradable[rows], device=self.device)
        self.rule, self.kappa, self.gross_cap, self.cost_rate = cfg.weights, cfg.kappa, cfg.gross_cap, cfg.cost_rate
        self.batch_size, self.batch_start, self.bias = batch_size, batch_start, geometric_bias
        self.rng = np.random.default_rng(seed)
        with torch.no_grad():  # what the untrained policy's equal scores ask for
            self.memory = self.weights_of(torch.zeros(len(rows), market.universe.n_assets + 1, dtype=torch.float64,
                                                      device=self.device), self.tradable)

    @staticmethod
    def check(env: Any, training: Any) -> None:
        """What `algorithm: direct` needs of a portfolio env, checked before Ray starts (`--dry-run`)."""
        check_fits(env, training.train_batch_size_per_learner)
        if training.model == "default":
            raise InputError("training.model: algorithm direct on a universe of assets trains a portfolio module: "
                             "set training.model: shared_assets (or flat)")

    @property
    def decisions(self) -> int:
        return len(self.rows)

    def weights_of(self, scores: torch.Tensor, tradable: torch.Tensor) -> torch.Tensor:
        return scores_to_weights(scores, tradable, self.rule, self.kappa, self.gross_cap)

    def sample(self) -> Batch:
        return draw_batch(self.rng, self.decisions, self.batch_size, self.batch_start, self.bias)

    def held_at_decisions(self, batch: Batch) -> torch.Tensor:
        """(B, N+1) the weights held at each decision's close, from the memory's previous targets (all cash first)."""
        index = torch.arange(batch.start, batch.start + batch.size, device=self.device)
        previous = self._drifted(self.memory[(index - 1).clamp(min=0)], index - 1)
        cash = torch.zeros_like(previous)
        cash[:, 0] = 1.0
        return torch.where((index > 0).unsqueeze(-1), previous, cash)

    def _drifted(self, targets: torch.Tensor, decisions: torch.Tensor) -> torch.Tensor:
        """Targets of `decisions` as weights at the next decision's close."""
        grown = targets * self.gap[decisions.clamp(min=0)] * self.period[decisions.clamp(min=0)]
        return grown / grown.sum(-1, keepdim=True)

    def observations(self, batch: Batch, held: torch.Tensor) -> torch.Tensor:
        """(B, N, D) float32: the env's own observations at the batch's rows with the memory's held weights."""
        weights = held[:, 1:].cpu().numpy()
        rows = self.rows[batch.start:batch.start + batch.size]
        obs = np.stack([self.env.observation_at(int(row), weights[i]) for i, row in enumerate(rows)])
        return torch.as_tensor(obs, device=self.device)

    def log_growth(self, scores: torch.Tensor, batch: Batch, held: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B,) each decision's log growth of equity, close to close, after the exact cost, and the (B, N+1) targets:
        `scores` (B, N+1) the policy's greedy scores; `held` the memory's weights at the first decision's close."""
        part = slice(batch.start, batch.start + batch.size)
        targets = self.weights_of(scores.double(), self.tradable[part])
        gap, period = self.gap[part], self.period[part]
        grown = targets[:-1] * period[:-1]
        within = grown / grown.sum(-1, keepdim=True)  # each decision's held weights at the next close, differentiable
        at_close = torch.cat([held[:1], within], dim=0)
        at_open_value = (at_close * gap).sum(-1)
        at_open = at_close * gap / at_open_value.unsqueeze(-1)
        mu = remainder_factor(at_open, targets, self.cost_rate)
        growth = at_open_value.log() + mu.log() + (targets * period).sum(-1).log()
        return growth, targets

    def remember(self, batch: Batch, targets: torch.Tensor) -> None:
        self.memory[batch.start:batch.start + batch.size] = targets.detach()

    def step(self, module: Any) -> tuple[torch.Tensor, dict[str, float]]:
        """The loss (minus the mean log growth) of one sampled mini-batch under `module`, and its statistics."""
        from ray.rllib.core.columns import Columns

        batch = self.sample()
        held = self.held_at_decisions(batch)
        obs = self.observations(batch, held)
        dist_inputs = module.forward_train({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS]
        scores = dist_inputs[..., :dist_inputs.shape[-1] // 2]  # the Gaussian's means: the greedy scores
        growth, targets = self.log_growth(scores, batch, held)
        self.remember(batch, targets)
        turnover = (targets[1:] - targets[:-1]).abs()[:, 1:].sum(-1).mean()
        return -growth.mean(), {"mean_log_growth": float(growth.detach().mean()), "batch_start": float(batch.start),
                                "weights_turnover": float(turnover.detach())}
