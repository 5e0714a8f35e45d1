"""The one ledger behind rewards, backtests and baselines.

A position is a target fraction of equity (-1 short, 0 flat, 1 long). A decision taken
after bar t's close is filled at bar t+1's open, moved against the trader by the slippage,
and charged a fee on the traded notional. Equity is marked at each close. The env's
reward and every backtest row come from this same arithmetic.

Orders are sent only when the target position changes: the existing position is closed
and the new one opened with the cash left after fees, so a held position never churns
and cash never goes negative to pay a fee. A fractional target (continuous positions,
`envs.trading.positions`) on the side already held (both long or both short) is reached
instead by one fill of the difference between the held units and the target's units,
sized on the equity at the fill price; a target within `min_trade` of the held one is not
traded at all. A change between whole targets (0, 1, -1) never takes that path, so it fills
as it always has.

A short is sold borrowed coins, so a rally can cost more than the equity. The margin call:
whenever the ledger marks a short (each bar's open before the agent's order fills, and each
close), it is liquidated at that price (bought back with slippage and fee) if equity is at or
below `maintenance_margin` times the borrowed coins' value there. Liquidating at the mark that
revealed the breach uses no later price and exists at every bar (the next open may lie past the
split's end); it is a forced fill, not the agent's order, and comes after the agent's decision.
If a gap carries the price past the point where equity is zero, the lender takes the rest and
cash is floored at `EQUITY_FLOOR` (so the log reward stays finite). A long is bought with the
trader's own cash: it borrows nothing and is never called. After a margin call the account is
flat and trades no more (the env terminates the episode, a backtest stays flat).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Equity left after a margin call whose liquidation lost more than the account held (a gap): the trader
# cannot lose more than everything, and a positive floor keeps log(equity) finite. In units of the
# starting equity (1.0).
EQUITY_FLOOR = 1e-4
# Liquidate a short when equity <= this x the borrowed coins' value, i.e. when assets fall to 1.1x
# the debt (a typical spot-margin liquidation level). A 1x short is called near +82% from its entry.
DEFAULT_MAINTENANCE_MARGIN = 0.1


@dataclass
class Ledger:
    fee_rate: float       # fee_bps / 1e4
    slippage_rate: float  # slippage_bps / 1e4
    maintenance_margin: float = DEFAULT_MAINTENANCE_MARGIN
    cash: float = 1.0
    units: float = 0.0
    position: float = 0.0  # the target fraction currently held
    fees_paid: float = 0.0
    trades: int = 0  # filled orders (a flip from long to short is two)
    traded_notional: float = 0.0  # sum of |units| x fill price, in units of the starting equity (1.0)
    margin_called: bool = False  # a short was liquidated: the account is closed
    # A target closer than this to `position` is not traded (continuous positions: no dust rebalancing, no fee).
    # It never stops a change of a whole position (1 or more), so discrete targets fill the same with any value < 1.
    min_trade: float = 0.0
    # The mark at or above which the held short is called (inf when none is held). Cash and units change only
    # at fills, so it is computed once per fill instead of testing equity against the margin at every mark.
    liquidation_price: float = math.inf
    # The sum over marked closes of the exposure actually held there, |units x close| / equity: after drift and
    # min_trade, which the asked targets do not show (a report's `exposure` is its mean per bar).
    exposure_held: float = 0.0

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
        """Move to `target_fraction` of equity at `open_price`; no order if it is already held or is within
        `min_trade` of the held target. On the held side the difference is filled (`_resize`); any other change
        closes the held position and opens the target with the cash left."""
        if target_fraction == self.position or abs(target_fraction - self.position) < self.min_trade:
            return
        if target_fraction * self.position > 0.0:
            self._resize(target_fraction, open_price)
        else:
            if self.units != 0.0:
                self._fill(-self.units, open_price)
                self.units = 0.0  # exact zero, not a rounding residue
            if target_fraction != 0.0:
                self._fill(self._target_units(target_fraction, self.cash, open_price), open_price)
        self.position = target_fraction
        self.liquidation_price = liquidation_price(self.cash, self.units, self.maintenance_margin)

    def _target_units(self, target_fraction: float, equity: float, open_price: float) -> float:
        """The units holding `target_fraction` of `equity`: bought (or sold short) at the open moved by the
        slippage, with the fee set aside, so a target of 1 never takes cash below zero. From flat (`equity` is
        the cash) this is the fill whole targets have always had."""
        side_price = open_price * (1.0 + self.slippage_rate if target_fraction > 0 else 1.0 - self.slippage_rate)
        notional = abs(target_fraction) * equity / (1.0 + self.fee_rate)
        return np.copysign(notional / side_price, target_fraction)

    def _resize(self, target_fraction: float, open_price: float) -> None:
        """Reach a target on the held side with one fill of the difference in units, sized on the equity at the
        open: no round trip (and no second fee) through cash. The batched env does the same operations."""
        units = self._target_units(target_fraction, self.cash + self.units * open_price, open_price) - self.units
        if units != 0.0:
            self._fill(units, open_price)

    def equity(self, price: float) -> float:
        return self.cash + self.units * price

    def margin_call(self, price: float) -> bool:
        """At a mark `price`, liquidate a short whose equity is at or below the maintenance margin of the
        borrowed coins' value, i.e. `price >= liquidation_price` (see the module docstring); True if it did.
        The fill is written out operation by operation as in `SpotTradingVectorEnv`, which must match it bit
        for bit."""
        if not price >= self.liquidation_price:  # also False for a NaN mark
            return False
        self._fill(-self.units, price)
        self.units = 0.0
        self.position = 0.0
        self.cash = max(self.cash, EQUITY_FLOOR)
        self.margin_called = True
        self.liquidation_price = math.inf
        return True


def liquidation_price(cash: float, units: float, maintenance_margin: float) -> float:
    """The mark p at which a short of `units` (< 0) is called: cash + units p <= -units p m, that is
    p >= cash / (-units (1 + m)); inf for a long or no position. The batched env computes it the same way."""
    return cash / (-units * (1.0 + maintenance_margin)) if units < 0.0 else math.inf


def simulate_positions(targets: np.ndarray, opens: np.ndarray, closes: np.ndarray, fee_rate: float,
                       slippage_rate: float, maintenance_margin: float = DEFAULT_MAINTENANCE_MARGIN,
                       min_trade: float = 0.0) -> tuple[np.ndarray, Ledger]:
    """Equity at each close when `targets[i]` is decided at close i and filled at open i+1, with the
    margin checked at every open (before the fill) and close, as the env checks it, and targets within
    `min_trade` of the held one left untraded, as the env leaves them.

    Returns equity marked at closes[0..n-1] (equity[0] = 1, before any trade) and the ledger. After a
    margin call the equity stays at its liquidated value: the account trades no more.
    """
    ledger = Ledger(fee_rate=fee_rate, slippage_rate=slippage_rate, maintenance_margin=maintenance_margin,
                    min_trade=min_trade)
    equity = np.ones(len(closes))
    for i in range(1, len(closes)):
        equity[i] = trade_bar(ledger, float(targets[i - 1]), float(opens[i]), float(closes[i]))
        if ledger.margin_called:
            equity[i + 1:] = equity[i]
            break
    return equity, ledger


def trade_bar(ledger: Ledger, target: float, open_price: float, close: float) -> float:
    """One bar: the margin checked at its open, the `target` decided at the previous close filled there, the margin
    checked at its close; returns equity at the close. The backtest and paper trading (envs.trading.paper) both
    step through this, so a paper replay of a test window is the backtest's equity curve to the last digit."""
    if not ledger.margin_call(open_price):
        ledger.rebalance(target, open_price)
        ledger.margin_call(close)
    equity = ledger.equity(close)
    ledger.exposure_held += abs(ledger.units * close) / equity
    return equity
