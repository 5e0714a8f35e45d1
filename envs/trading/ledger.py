"""The one ledger behind rewards, backtests and baselines.

A position is a target fraction of equity (-1 short, 0 flat, 1 long). A decision taken
after bar t's close is filled at bar t+1's open, moved against the trader by the slippage,
and charged a fee on the traded notional. Equity is marked at each close. The env's
reward and every backtest row come from this same arithmetic.

Orders are sent only when the target position changes: the existing position is closed
and the new one opened with the cash left after fees, so a held position never churns
and cash never goes negative to pay a fee.
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
    position: float = 0.0  # the target fraction currently held
    fees_paid: float = 0.0
    trades: int = 0  # filled orders (a flip from long to short is two)
    traded_notional: float = 0.0  # sum of |units| x fill price, in units of the starting equity (1.0)

    def _fill(self, units: float, open_price: float) -> None:
        """Buy (units > 0) or sell (units < 0) at the open, with slippage and fee."""
        price = open_price * (1.0 + self.slippage_rate if units > 0 else 1.0 - self.slippage_rate)
        fee = abs(units) * price * self.fee_rate
        self.cash -= units * price + fee
        self.units += units
        self.fees_paid += fee
        self.trades += 1
        self.traded_notional += abs(units) * price

    def rebalance(self, target_fraction: float, open_price: float) -> None:
        """Move to `target_fraction` of equity at `open_price`; no order if it is already held."""
        if target_fraction == self.position:
            return
        if self.units != 0.0:
            self._fill(-self.units, open_price)
            self.units = 0.0  # exact zero, not a rounding residue
        if target_fraction != 0.0:
            side_price = open_price * (1.0 + self.slippage_rate if target_fraction > 0 else 1.0 - self.slippage_rate)
            notional = abs(target_fraction) * self.cash / (1.0 + self.fee_rate)
            self._fill(np.copysign(notional / side_price, target_fraction), open_price)
        self.position = target_fraction

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
