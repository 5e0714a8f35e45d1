"""The portfolio's ledger: cash and units of each asset, rebalanced at the cost that pays for itself.

A rebalance from the held weights w (what the units are worth at the fill prices, cash first) to target weights w'
pays `cost_rate` c (fee + slippage) on every asset's traded notional, bought or sold, and the cost comes out of the
portfolio itself: after it, the wealth is mu * V and asset i is worth w'_i * mu * V. So mu solves the
self-financing equation

    mu = 1 - c * sum_i |w_i - mu * w'_i|        (assets only; cash is not traded)

which is the cash balance w_0 + (1 - c) * sold - (1 + c) * bought = mu * w'_0: a sale receives 1 - c per unit of
notional, a purchase pays 1 + c. This is not Jiang, Xu & Liang's (2017, arXiv:1706.10059) transaction remainder factor
with c_s = c_p = c: their buyer spends cash y and receives (1 - c) y of the asset, i.e. pays 1 / (1 - c) =
1 + c + c^2 / (1 - c) per unit bought, and sells at 1 - c as here. Theirs charges c^2 / (1 - c) more per unit bought
(1.44e-6 at 12 bps), so their mu is smaller by about that times the notional bought. The book's is a fee on the
notional, as exchanges quote it; theirs is a fee taken out of the cash spent.

mu - 1 + c * sum_i |w'_i| * |w_i / w'_i - mu| is piecewise linear in mu with its kinks at w_i / w'_i and a slope of at
least 1 - c * sum_i |w'_i|, so when c * sum_i |w'_i| < 1 (the env_config bound: c * gross_cap < 1,
envs/portfolio/config.py) it is increasing and has exactly one root. `remainder_factor` solves the line of the piece
that holds it: the piece of the cost at mu = 1 when the root turns out to lie on it (the env's usual rebalance), else
the piece found by sorting the kinks. Exact to rounding, with no iteration to run out.
tests/unit/test_portfolio_book.py checks it against a plain-Python ledger that sells, pays, then buys.

The book keeps units, not weights: equity at any bar is cash + units . prices, so the env (which marks only at
decisions) and the scorer's replay (which marks every close) give the same numbers to the last digit.

Ruin. A long-short book borrows (shorts, or longs beyond the equity), so prices can take its equity to zero and
below, and its liquidation value, cash + units . p - c * |units| . p (what selling everything at p would leave after
its cost), can reach zero first: then c * sum_i |w_i| >= 1 and a rebalance's mu would be <= 0. `step_book` marks the
book at every open (before the fill) and every close it passes; at a mark where the liquidation value is <= 0 the
book is liquidated at that price (`PortfolioBook.liquidate`): everything is sold, the cost is paid as far as the equity
allows (the lender takes the rest), and the book holds `EQUITY_FLOOR` of cash (the trading family's floor, 1e-4 of
the starting equity, so log returns stay finite) and trades no more. That is the trading family's margin call
(envs.trading.ledger) with a maintenance level of zero on the liquidation value: a book stays open while it can still
be closed for something. A book that borrows nothing (cash >= 0, no short) always can (prices are positive), so it
is never marked. Every user of the book steps with `step_book`: the env (which ends its episode there), the
backtest's and the baselines' replay, and paper trading, so all three ruin at the same mark with the same equity.
"""
from __future__ import annotations

import numpy as np

from envs.trading.ledger import EQUITY_FLOOR


def remainder_factor(held: np.ndarray, target: np.ndarray, cost_rate: float) -> float:
    """mu of a rebalance from `held` to `target` weights (cash first, each summing to 1): the one root of
    g(mu) = mu - 1 + c * sum_i |w_i - mu * w'_i| (see the module docstring), solved on the linear piece that holds it.
    ArithmeticError when c * sum_i |w'_i| >= 1, where the equation need not have one solution (the env_config
    refuses such costs and gross_cap before a book exists)."""
    held_assets, target_assets = held[1:], target[1:]
    gross = float(np.abs(target_assets).sum())
    if cost_rate * gross >= 1.0:
        raise ArithmeticError(f"the rebalance cost has no single solution at cost_rate {cost_rate:g} and gross target "
                              f"{gross:g} (their product must stay below 1): lower env_config.gross_cap or "
                              "fee_bps + slippage_bps")
    guessed = root_on_guessed_piece(held_assets, target_assets, cost_rate)
    return guessed if guessed is not None else root_on_sorted_pieces(held_assets, target_assets, cost_rate)


def root_on_guessed_piece(held_assets: np.ndarray, target_assets: np.ndarray, cost_rate: float) -> float | None:
    """The root when it lies on the piece of mu0 = 1 - c * sum_i |w_i - w'_i| (the cost at mu = 1, within about
    c^2 of the root at everyday costs): that piece's line, kept when every term has the sign the line assumed; None
    when a kink lies between mu0 and the root. Four times fewer numpy calls than sorting: the env's common case."""
    signs = np.sign(held_assets - (1.0 - cost_rate * float(np.abs(held_assets - target_assets).sum())) * target_assets)
    # On that piece |w_i - mu w'_i| = s_i (w_i - mu w'_i), so mu (1 - c s.w') = 1 - c s.w; 1 - c s.w' >= 1 - c |w'| > 0.
    mu = (1.0 - cost_rate * float(signs @ held_assets)) / (1.0 - cost_rate * float(signs @ target_assets))
    terms = held_assets - mu * target_assets
    return mu if np.array_equal(signs * terms, np.abs(terms)) else None


def root_on_sorted_pieces(held_assets: np.ndarray, target_assets: np.ndarray, cost_rate: float) -> float:
    """The root wherever it lies: g at every kink, in order, from cumulative sums, then the line of the piece whose
    ends straddle zero (assets only, cash left out; c * sum_i |w'_i| < 1)."""
    # |w_i - mu w'_i| = |w'_i| |k_i - mu| with the kink k_i = w_i / w'_i: right of mu it is o_i - |w'_i| mu and left
    # of it |w'_i| mu - o_i, where o_i = |w'_i| k_i = sign(w'_i) w_i. An asset the target does not hold costs |w_i|
    # whatever mu is: a kink at infinity with o_i = |w_i| and no slope.
    held_only = target_assets == 0.0
    kinks = np.divide(held_assets, target_assets, out=np.full_like(held_assets, np.inf), where=~held_only)
    offsets = np.where(held_only, np.abs(held_assets), np.sign(target_assets) * held_assets)
    order = np.argsort(kinks)
    kinks, slope_left, offset_left = kinks[order], np.cumsum(np.abs(target_assets)[order]), np.cumsum(offsets[order])
    slope_all, offset_all = slope_left[-1], offset_left[-1]
    # On the piece right of kink j (kinks 0..j left of mu): g(mu) = (1 + c (2 S_j - S)) mu - 1 + c (O - 2 O_j), S_j
    # and O_j the cumulative sums. g increases, so the root lies right of the kinks where g <= 0 and left of the rest.
    at_kinks = (1.0 + cost_rate * (2.0 * slope_left - slope_all)) * kinks - 1.0 + cost_rate * (
        offset_all - 2.0 * offset_left)
    left = int(np.count_nonzero(at_kinks <= 0.0))
    left_slope, left_offset = (slope_left[left - 1], offset_left[left - 1]) if left else (0.0, 0.0)
    return float((1.0 - cost_rate * (offset_all - 2.0 * left_offset))
                 / (1.0 + cost_rate * (2.0 * left_slope - slope_all)))


class PortfolioBook:
    """Cash and units of N assets; starts all cash with equity 1."""

    def __init__(self, n_assets: int, cost_rate: float) -> None:
        self.cost_rate = cost_rate
        self.cash = 1.0
        self.units = np.zeros(n_assets)
        self.costs_paid = 0.0
        self.traded_notional = 0.0  # sum of |traded value| in units of the starting equity
        self.rebalances = 0
        self.ruined = False  # liquidated at a mark where selling everything would have left nothing: cash only now

    @property
    def units(self) -> np.ndarray:
        """Units held of each asset. Assign a new array, never write into it: the ruin rule's view of them (which
        are short, the liquidation weights) is cached until an assignment."""
        return self._units

    @units.setter
    def units(self, units: np.ndarray) -> None:
        self._units = units
        self._net_units: np.ndarray | None = None
        self._short: bool | None = None

    def equity(self, prices: np.ndarray) -> float:
        """Cash plus the units at `prices` (finite for every asset: the universe fills an unlisted asset's)."""
        return self.cash + float(self.units @ prices)

    def weights(self, prices: np.ndarray, value: float | None = None) -> np.ndarray:
        """What the book holds at `prices`, as weights (cash first); `value`: its equity there, when known."""
        value = self.equity(prices) if value is None else value
        return np.concatenate([[self.cash], self.units * prices]) / value

    def rebalance(self, target: np.ndarray, prices: np.ndarray) -> float:
        """Trade to `target` weights at `prices` paying the self-financing cost; returns the cost paid (0 once
        ruined: the book trades no more)."""
        if self.ruined:
            return 0.0
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
        sold = self.units.copy()
        sold[asset] = 0.0
        self.units = sold
        self.costs_paid += cost
        self.traded_notional += notional

    def borrows(self) -> bool:
        """Whether the book owes anything (negative cash, or a short): only then can prices ruin it."""
        if self._short is None:
            self._short = bool((self.units < 0.0).any())
        return self.cash < 0.0 or self._short

    def liquidation_values(self, prices: np.ndarray) -> np.ndarray:
        """What selling everything would leave at each row of `prices` (k, N): cash + p . (units - c |units|), the
        ruin rule's measure. One expression (a row-wise pairwise sum) for one mark or many, so the env, which checks
        a decision's marks at once, and the replay, one bar at a time, reach the same verdict to the bit."""
        if self._net_units is None:
            self._net_units = self.units - self.cost_rate * np.abs(self.units)
        return self.cash + (prices * self._net_units).sum(axis=1)

    def liquidate(self, prices: np.ndarray) -> None:
        """Ruin (module docstring): sell everything at `prices`, pay the cost as far as the equity allows (the
        lender takes the rest) and keep `EQUITY_FLOOR` of cash; the book trades no more."""
        equity = self.equity(prices)
        notional = float(np.abs(self.units) @ prices)
        self.costs_paid += min(self.cost_rate * notional, max(equity, 0.0))
        self.traded_notional += notional
        self.units = np.zeros_like(self.units)
        self.cash = EQUITY_FLOOR
        self.ruined = True


def first_ruin_mark(book: PortfolioBook, opens: np.ndarray, closes: np.ndarray, start: int, stop: int,
                    fill_row: int) -> np.ndarray | None:
    """The prices of the first mark of rows start..stop, in time order (each row's open, then its close; the fill
    row's open is marked before the order, not here), where the book's liquidation value is <= 0; None if none."""
    at_closes = book.liquidation_values(closes[start:stop + 1]) <= 0.0
    first_open = max(start, fill_row + 1)
    at_opens = book.liquidation_values(opens[first_open:stop + 1]) <= 0.0 if first_open <= stop else at_closes[:0]
    if not (at_closes.any() or at_opens.any()):
        return None
    at_opens = np.concatenate([np.zeros(first_open - start, dtype=bool), at_opens])
    row = int(np.argmax(at_opens | at_closes))
    return opens[start + row] if at_opens[row] else closes[start + row]


def step_book(book: PortfolioBook, target: np.ndarray | None, fill_row: int, mark_row: int, opens: np.ndarray,
              closes: np.ndarray, last_rows: np.ndarray) -> float:
    """One decision's rows: fill `target` (None: hold) at `fill_row`'s opens, sell each asset whose bars end at
    its last close on the way, and return the equity at `mark_row`'s close. A book that borrows is marked for ruin
    at the fill's open before the order (ruined there, the order is void), then at every open and close it holds
    through, and is liquidated at the first mark that ruins it. The env steps with this and the scorer's replay
    calls it once per bar, so both meet the same marks and reach the same equity."""
    if book.borrows() and book.liquidation_values(opens[fill_row:fill_row + 1])[0] <= 0.0:
        book.liquidate(opens[fill_row])
        return book.equity(closes[mark_row])
    if target is not None:
        book.rebalance(target, opens[fill_row])
    ending = np.flatnonzero((last_rows >= fill_row) & (last_rows <= mark_row))
    start = fill_row
    # Marked in stretches that end at a close where an asset's bars end (its sale changes the units), in time order.
    for stop in [*np.unique(last_rows[ending]).tolist(), mark_row]:
        if stop < start:
            continue
        if book.borrows() and (ruin := first_ruin_mark(book, opens, closes, start, stop, fill_row)) is not None:
            book.liquidate(ruin)
            break
        for asset in ending[last_rows[ending] == stop]:
            book.sell(int(asset), float(closes[stop, asset]))
        start = stop + 1
    return book.equity(closes[mark_row])


def replay_weights(targets: np.ndarray, lo: int, opens: np.ndarray, closes: np.ndarray, last_rows: np.ndarray,
                   cost_rate: float) -> tuple[np.ndarray, PortfolioBook]:
    """Equity at every close of rows lo .. lo+len(targets)-1 of weights decided at those closes (row i of `targets`
    at close lo+i; a row of NaN holds) and filled at the next bar's open; the last row's decision is never filled.
    A ruined book holds its floored cash to the end: its returns after the ruin bar are 0."""
    book = PortfolioBook(opens.shape[1], cost_rate)
    equity = np.ones(len(targets))
    for i in range(1, len(targets)):
        pending = targets[i - 1]
        target = None if np.isnan(pending[0]) else pending
        equity[i] = step_book(book, target, lo + i, lo + i, opens, closes, last_rows)
        if book.ruined:
            equity[i + 1:] = equity[i]
            break
    return equity, book
