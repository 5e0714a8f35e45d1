"""trading/Spot-v0 with continuous positions as the direct learner's problem: the policy's target exposure, filled by
the env's own ledger arithmetic (envs/trading/ledger.py) in torch, so the gradient flows through the fills, the
slippage and the fees.

Decision k sits at row r_k = lo + k d of the train part. The target exposure is the greedy action (the Gaussian's
mean, rescaled into the Box as the greedy rule does, then clipped into the exposure bounds as the env clips it); it
fills at open r_k + 1 as `Ledger.rebalance` fills it (a resize on the held side, else close and reopen from cash) and
is marked at close r_k + d. The growth of equity from close to close is the env's reward before reward_scale
(tests/unit/test_direct_spot.py holds them equal). The ledger is sequential, so a mini-batch walks its decisions in
order; the memory holds each decision's target, from which a batch's first decision gets the position it holds
(filled from flat at the open after the decision before). The observation's held exposure is the memory's.

Refused for this learner, in one line: `min_trade > 0`, whose dead band has a zero gradient almost everywhere (set
min_trade: 0). Left out against the env: a short's margin call (continuous_long_short), which the validation and
test walks of the env itself still apply.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from algos.direct.batches import Batch, check_batch_fits, check_fits, decision_rows, draw_batch
from envs.errors import InputError


class SpotProblem:
    """The train part of one fold of one asset, for gradient ascent on the ledger's log growth (module docstring)."""

    def __init__(self, env: Any, batch_size: int, batch_start: str, geometric_bias: float, seed: int | None,
                 device: Any = "cpu") -> None:
        cfg, market = env.cfg, env.market
        self.device = torch.device(device)
        interval, self.window = cfg.decision_interval, cfg.window
        self.rows = decision_rows(env)
        check_batch_fits(len(self.rows), batch_size, cfg.split)
        self.features = np.ascontiguousarray(market.features, dtype=np.float32)
        rows = self.rows
        self.opens = torch.as_tensor(np.asarray(market.opens)[rows + 1], dtype=torch.float64, device=self.device)
        self.marks = torch.as_tensor(np.asarray(market.closes)[rows + interval], dtype=torch.float64,
                                     device=self.device)
        self.fee, self.slippage = cfg.fee_bps / 1e4, cfg.slippage_bps / 1e4
        self.low, self.high = env.bounds
        self.batch_size, self.batch_start, self.bias = batch_size, batch_start, geometric_bias
        self.rng = np.random.default_rng(seed)
        self.memory = torch.zeros(len(rows), dtype=torch.float64, device=self.device)  # flat, as an account starts

    @staticmethod
    def check(env: Any, training: Any) -> None:
        """What `algorithm: direct` needs of a Spot env, checked before Ray starts (`--dry-run`)."""
        cfg = env.cfg
        if not env.continuous:
            raise InputError(f"algorithm: direct needs positions: continuous or continuous_long_short (a target "
                             f"exposure it can differentiate), not {cfg.positions}")
        if cfg.min_trade > 0.0:
            raise InputError(f"environment.env_config.min_trade: {cfg.min_trade:g} is a dead band with no gradient, so "
                             "algorithm: direct cannot train through it: set min_trade: 0")
        check_fits(env, training.train_batch_size_per_learner)

    @property
    def decisions(self) -> int:
        return len(self.rows)

    def sample(self) -> Batch:
        return draw_batch(self.rng, self.decisions, self.batch_size, self.batch_start, self.bias)

    def observations(self, batch: Batch, held: torch.Tensor) -> torch.Tensor:
        """(B, window * F + 1) float32: the env's observation (the features' window, then the held target)."""
        rows = self.rows[batch.start:batch.start + batch.size]
        windows = np.stack([self.features[row + 1 - self.window:row + 1].reshape(-1) for row in rows])
        return torch.as_tensor(np.concatenate([windows, held.cpu().numpy()[:, None].astype(np.float32)], axis=1),
                               device=self.device)

    def held_targets(self, batch: Batch) -> torch.Tensor:
        """(B,) each decision's held target as the memory has it (the previous decision's; flat at the start)."""
        index = torch.arange(batch.start, batch.start + batch.size, device=self.device)
        return torch.where(index > 0, self.memory[(index - 1).clamp(min=0)], torch.zeros_like(self.memory[:1]))

    def targets_of(self, means: torch.Tensor) -> torch.Tensor:
        """The greedy action's target exposure: the mean rescaled into the Box (GreedyRule box_mean), clipped."""
        low, high = self.low, self.high
        return ((means.double() + 1.0) * (high - low) / 2.0 + low).clamp(low, high)

    def log_growth(self, targets: torch.Tensor, batch: Batch, first_held: torch.Tensor) -> torch.Tensor:
        """(B,) each decision's log growth of equity, close to close, after slippage and fees: the ledger walked in
        torch from the memory's position at the batch's first decision (filled from flat, equity 1 at its close)."""
        zero = torch.zeros((), dtype=torch.float64, device=self.device)
        start = batch.start
        position = first_held
        if start > 0 and position.item() != 0.0:
            cash, units = self._fill(torch.ones_like(zero), zero, self._units(position, torch.ones_like(zero),
                                                                              self.opens[start - 1]),
                                     self.opens[start - 1])
            equity = cash + units * self.marks[start - 1]
            cash, units = cash / equity, units / equity
        else:
            cash, units = torch.ones_like(zero), zero
        growth = []
        for k in range(batch.size):
            row = start + k
            before = cash + units * self.marks[row - 1] if k else torch.ones_like(zero)
            cash, units = self._rebalance(cash, units, position, targets[k], self.opens[row])
            position = targets[k]
            after = cash + units * self.marks[row]
            growth.append((after / before).log())
        return torch.stack(growth)

    def _rebalance(self, cash: torch.Tensor, units: torch.Tensor, position: torch.Tensor, target: torch.Tensor,
                   open_price: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Ledger.rebalance with min_trade 0 (refused otherwise), in torch."""
        if target.item() == position.item():
            return cash, units
        if target.item() * position.item() > 0.0:
            return self._fill(cash, units, self._units(target, cash + units * open_price, open_price) - units,
                              open_price)
        if units.item() != 0.0:
            cash, units = self._fill(cash, units, -units, open_price)
            units = torch.zeros_like(units)
        if target.item() != 0.0:
            cash, units = self._fill(cash, units, self._units(target, cash, open_price), open_price)
        return cash, units

    def _units(self, target: torch.Tensor, equity: torch.Tensor, open_price: torch.Tensor) -> torch.Tensor:
        """Ledger._target_units: the units holding `target` of `equity`, bought at the slipped price, fee aside."""
        side = open_price * (1.0 + self.slippage if target.item() > 0 else 1.0 - self.slippage)
        return target * equity / (1.0 + self.fee) / side

    def _fill(self, cash: torch.Tensor, units: torch.Tensor, order: torch.Tensor,
              open_price: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Ledger._fill: buy (order > 0) or sell at the open moved by the slippage, paying the fee."""
        if order.item() == 0.0:
            return cash, units
        price = open_price * (1.0 + self.slippage if order.item() > 0 else 1.0 - self.slippage)
        return cash - order * price - order.abs() * price * self.fee, units + order

    def step(self, module: Any) -> tuple[torch.Tensor, dict[str, float]]:
        """The loss (minus the mean log growth) of one sampled mini-batch under `module`, and its statistics."""
        from ray.rllib.core.columns import Columns

        batch = self.sample()
        held = self.held_targets(batch)
        dist_inputs = module.forward_train({Columns.OBS: self.observations(batch, held)})[Columns.ACTION_DIST_INPUTS]
        targets = self.targets_of(dist_inputs[..., 0])
        growth = self.log_growth(targets, batch, held[0])
        self.memory[batch.start:batch.start + batch.size] = targets.detach()
        return -growth.mean(), {"mean_log_growth": float(growth.detach().mean()), "batch_start": float(batch.start),
                                "weights_turnover": float((targets[1:] - targets[:-1]).abs().mean().detach())}
