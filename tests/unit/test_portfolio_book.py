"""The rebalance cost of the portfolio book against a plain-Python ledger that sells, pays, then buys."""
from __future__ import annotations

import random

import numpy as np
import pytest

from envs.portfolio.book import PortfolioBook, remainder_factor


def sell_pay_buy(held: list[float], target: list[float], rate: float) -> float:
    """The wealth left after trading from `held` to `target` weights (cash first, wealth 1 before), found the long
    way: for a guessed wealth after costs, sell what is above its target (receiving the proceeds less the fee), buy
    what is below (paying the price plus the fee) and see whether the cash left is the target's cash. Bisection on
    the guess, which finds the wealth whatever equation the book iterates."""
    def cash_left_over(wealth: float) -> float:
        cash = held[0]
        for have, want in zip(held[1:], target[1:], strict=True):
            if have > want * wealth:
                cash += (have - want * wealth) * (1.0 - rate)
        for have, want in zip(held[1:], target[1:], strict=True):
            if have < want * wealth:
                cash -= (want * wealth - have) * (1.0 + rate)
        return cash - target[0] * wealth

    low, high = 0.0, 1.0
    for _ in range(200):
        middle = (low + high) / 2.0
        if cash_left_over(middle) > 0.0:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


def random_weights(rng: random.Random, n: int, short: bool) -> list[float]:
    if short:
        assets = [rng.uniform(-1.0, 1.0) for _ in range(n)]
        gross = sum(abs(a) for a in assets)
        assets = [a * rng.uniform(0.1, 1.0) / gross for a in assets]
        return [1.0 - sum(assets), *assets]
    raw = [rng.random() ** 3 for _ in range(n + 1)]
    return [r / sum(raw) for r in raw]


@pytest.mark.parametrize("short", [False, True], ids=["long_only", "long_short"])
def test_the_remainder_factor_is_what_selling_paying_and_buying_leaves_on_1000_random_pairs(short: bool) -> None:
    rng = random.Random(7)
    worst = 0.0
    for _ in range(1000):
        n = rng.randint(1, 12)
        held, target = random_weights(rng, n, short), random_weights(rng, n, short)
        rate = rng.choice([0.0005, 0.001, 0.0025, 0.01, 0.05])
        mu = remainder_factor(np.array(held), np.array(target), rate)
        worst = max(worst, abs(mu - sell_pay_buy(held, target, rate)))
    assert worst < 1e-12, worst


def test_a_rebalance_pays_its_cost_out_of_itself_and_leaves_the_target_weights() -> None:
    prices = np.array([10.0, 250.0, 0.5])
    book = PortfolioBook(3, cost_rate=0.003)
    book.rebalance(np.array([0.1, 0.5, 0.3, 0.1]), prices)
    held = book.weights(prices)
    np.testing.assert_allclose(held, [0.1, 0.5, 0.3, 0.1], rtol=0, atol=1e-15)
    # From all cash: mu = 1 - c * 0.9 mu, so mu = 1 / (1 + 0.9 c).
    assert book.equity(prices) == pytest.approx(1.0 / (1.0 + 0.9 * 0.003), abs=1e-15)
    assert book.costs_paid == pytest.approx(1.0 - book.equity(prices), abs=1e-15)


def test_the_same_weights_again_trade_nothing_and_a_sold_asset_pays_its_fee() -> None:
    prices = np.array([2.0, 3.0])
    book = PortfolioBook(2, cost_rate=0.001)
    book.rebalance(np.array([0.0, 0.5, 0.5]), prices)
    before = book.equity(prices)
    assert book.rebalance(book.weights(prices), prices) == 0.0
    book.sell(0, 2.0)
    assert book.units[0] == 0.0
    assert book.equity(prices) == pytest.approx(before - 0.001 * before / 2.0, abs=1e-15)
