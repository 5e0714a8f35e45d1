"""The one ledger behind rewards, backtests and baselines.

A position is a target fraction of equity (-1 short, 0 flat, 1 long). A decision taken
after bar t's close is filled at bar t+1's open, moved against the trader by the slippage,
and charged a fee on the traded notional. Equity is marked at each close. The env's
reward and every backtest row come from this same arithmetic.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Ledger:
    fee_rate: float       # fee_bps / 1e4
    slippage_rate: float  # slippage_bps / 1e4
    cash: float = 1.0
    units: float = 0.0
    fees_paid: float = 0.0
    trades: int = 0

    def rebalance(self, target_fraction: float, open_price: float) -> None:
        """Trade at `open_price` so that the position is `target_fraction` of equity."""
        equity = self.cash + self.units * open_price
        target_units = target_fraction * equity / open_price
        delta = target_units - self.units
        if delta == 0.0:
            return
        fill = open_price * (1.0 + self.slippage_rate if delta > 0 else 1.0 - self.slippage_rate)
        fee = abs(delta) * fill * self.fee_rate
        self.cash -= delta * fill + fee
        self.units = target_units
        self.fees_paid += fee
        self.trades += 1

    def equity(self, price: float) -> float:
        return self.cash + self.units * price


def simulate_positions(targets: np.ndarray, opens: np.ndarray, closes: np.ndarray,
                       fee_rate: float, slippage_rate: float) -> tuple[np.ndarray, Ledger]:
    """Equity at each close when `targets[i]` is decided at close i and filled at open i+1.

    Returns equity marked at closes[0..n-1] (equity[0] = 1, before any trade) and the ledger.
    """
    ledger = Ledger(fee_rate=fee_rate, slippage_rate=slippage_rate)
    equity = np.empty(len(closes))
    equity[0] = 1.0
    for i in range(1, len(closes)):
        ledger.rebalance(float(targets[i - 1]), float(opens[i]))
        equity[i] = ledger.equity(float(closes[i]))
    return equity, ledger
