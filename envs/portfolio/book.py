"""The portfolio's ledger: cash and units of each asset, rebalanced at the cost that pays for itself.

A rebalance from the held weights w (what the units are worth at the fill prices, cash first) to target weights w'
pays `cost_rate` (fee + slippage) on every asset's traded notional, and the cost comes out of the portfolio itself:
after it, the wealth is mu * V and asset i is worth w'_i * mu * V. So mu solves the self-financing equation

    mu = 1 - cost_rate * sum_i |w_i - mu * w'_i|        (assets only; cash is not traded)

which is Jiang, Xu & Liang's (2017) transaction remainder factor for equal buying and selling costs. The right side
is a contraction in mu whenever cost_rate * sum_i |w'_i| < 1 (any long-only target, and long_short ones with
gross_cap < 1 / cost_rate), so iterating from mu = 1 converges; it stops when a step moves mu by less than 1e-14.
tests/unit/test_portfolio_book.py checks it against a plain-Python ledger that sells, pays, then buys.

The book keeps units, not weights: equity at any bar is cash + units . prices, so the env (which marks only at
decisions) and the scorer's replay (which marks every close) give the same numbers to the last digit.
"""
from __future__ import annotations

import numpy as np

TOLERANCE = 1e-14
MAX_ITERATIONS = 200


def remainder_factor(held: np.ndarray, target: np.ndarray, cost_rate: float) -> float:
    """mu of a rebalance from `held` to `target` weights (cash first, each summing to 1)."""
    held_assets, target_assets = held[1:], target[1:]
    mu = 1.0
    for _ in range(MAX_ITERATIONS):
        updated = 1.0 - cost_rate * float(np.abs(held_assets - mu * target_assets).sum())
        if abs(updated - mu) < TOLERANCE:
            return updated
        mu = updated
    raise ArithmeticError(f"the rebalance cost did not converge (cost_rate {cost_rate:g}, gross target "
                          f"{np.abs(target_assets).sum():g}): lower gross_cap or the costs")


class PortfolioBook:
    """Cash and units of N assets; starts all cash with equity 1."""

    def __init__(self, n_assets: int, cost_rate: float) -> None:
        self.cost_rate = cost_rate
        self.cash = 1.0
        self.units = np.zeros(n_assets)
        self.costs_paid = 0.0
        self.traded_notional = 0.0  # sum of |traded value| in units of the starting equity
        self.rebalances = 0

    def equity(self, prices: np.ndarray) -> float:
        """Cash plus the units at `prices` (finite for every asset: the universe fills an unlisted asset's)."""
        return self.cash + float(self.units @ prices)

    def weights(self, prices: np.ndarray, value: float | None = None) -> np.ndarray:
        """What the book holds at `prices`, as weights (cash first); `value`: its equity there, when known."""
        value = self.equity(prices) if value is None else value
        return np.concatenate([[self.cash], self.units * prices]) / value

    def rebalance(self, target: np.ndarray, prices: np.ndarray) -> float:
        """Trade to `target` weights at `prices` paying the self-financing cost; returns the cost paid."""
        value = self.equity(prices)
        held = self.weights(prices, value)
        mu = remainder_factor(held, target, self.cost_rate) if self.cost_rate > 0.0 else 1.0
        new_value = mu * value
        traded = float(np.abs(held[1:] * value - target[1:] * new_value).sum())
        if traded == 0.0:
            return 0.0
        self.units = target[1:] * new_value / prices
        self.cash = float(target[0] * new_value)
        cost = value - new_value
        self.costs_paid += cost
        self.traded_notional += traded
        self.rebalances += 1
        return cost

    def sell(self, asset: int, price: float) -> None:
        """Sell (or buy back) all of one asset at `price` into cash, paying the cost on its notional: an asset whose
        bars end is liquidated at its last close."""
        units = self.units[asset]
        if units == 0.0:
            return
        notional = abs(units * price)
        cost = self.cost_rate * notional
        self.cash += units * price - cost
        self.units[asset] = 0.0
        self.costs_paid += cost
        self.traded_notional += notional


def step_book(book: PortfolioBook, target: np.ndarray | None, fill_row: int, mark_row: int, opens: np.ndarray,
              closes: np.ndarray, last_rows: np.ndarray) -> float:
    """One decision's rows: fill `target` (None: hold) at `fill_row`'s opens, sell each asset whose bars end at
    its last close on the way, and return the equity at `mark_row`'s close. The env steps with this and the
    scorer's replay calls it once per bar, so both reach the same equity."""
    if target is not None:
        book.rebalance(target, opens[fill_row])
    for asset in np.flatnonzero((last_rows >= fill_row) & (last_rows <= mark_row)):
        book.sell(int(asset), float(closes[last_rows[asset], asset]))
    return book.equity(closes[mark_row])


def replay_weights(targets: np.ndarray, lo: int, opens: np.ndarray, closes: np.ndarray, last_rows: np.ndarray,
                   cost_rate: float) -> tuple[np.ndarray, PortfolioBook]:
    """Equity at every close of rows lo .. lo+len(targets)-1 of weights decided at those closes (row i of `targets`
    at close lo+i; a row of NaN holds) and filled at the next bar's open; the last row's decision is never filled."""
    book = PortfolioBook(opens.shape[1], cost_rate)
    equity = np.ones(len(targets))
    for i in range(1, len(targets)):
        pending = targets[i - 1]
        target = None if np.isnan(pending[0]) else pending
        equity[i] = step_book(book, target, lo + i, lo + i, opens, closes, last_rows)
    return equity, book
