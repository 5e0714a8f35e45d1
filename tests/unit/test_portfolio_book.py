"""The rebalance cost of the portfolio book: against a plain-Python ledger that sells, pays, then buys; as the exact
root of its equation, up to costs and gross exposures at the env_config's bound; against the iteration it replaced;
and against Jiang, Xu & Liang's remainder factor, which charges a purchase c / (1 - c)."""
from __future__ import annotations

import random

import numpy as np
import pytest

from envs.errors import InputError
from envs.portfolio.book import PortfolioBook, remainder_factor, root_on_guessed_piece, root_on_sorted_pieces
from envs.portfolio.config import PortfolioConfig


def sell_pay_buy(held: list[float], target: list[float], rate: float, buy_rate: float | None = None) -> float:
    """The wealth left after trading from `held` to `target` weights (cash first, wealth 1 before), found the long
    way: for a guessed wealth after costs, sell what is above its target (receiving the proceeds less the fee), buy
    what is below (paying the price plus the fee) and see whether the cash left is the target's cash. Bisection on
    the guess, which finds the wealth whatever equation the book solves. `buy_rate`: what a purchase pays per unit
    bought on top of its price, when not `rate`."""
    buy_rate = rate if buy_rate is None else buy_rate

    def cash_left_over(wealth: float) -> float:
        cash = held[0]
        for have, want in zip(held[1:], target[1:], strict=True):
            if have > want * wealth:
                cash += (have - want * wealth) * (1.0 - rate)
        for have, want in zip(held[1:], target[1:], strict=True):
            if have < want * wealth:
                cash -= (want * wealth - have) * (1.0 + buy_rate)
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


def equation_residual(held: np.ndarray, target: np.ndarray, rate: float, mu: float) -> float:
    """How far `mu` is from solving the book's equation mu = 1 - c * sum_i |w_i - mu * w'_i| (assets only)."""
    return abs(mu - (1.0 - rate * float(np.abs(held[1:] - mu * target[1:]).sum())))


def iterated_factor(held: np.ndarray, target: np.ndarray, rate: float) -> float | None:
    """The fixed-point iteration the book ran before (from mu = 1 until a step moves mu by less than 1e-14, at most 200
    steps); None where it did not converge, where the book raised ArithmeticError."""
    mu = 1.0
    for _ in range(200):
        updated = 1.0 - rate * float(np.abs(held[1:] - mu * target[1:]).sum())
        if abs(updated - mu) < 1e-14:
            return updated
        mu = updated
    return None


def random_pair(rng: np.random.Generator, short: bool, gross_cap: float) -> tuple[np.ndarray, np.ndarray]:
    """Held and target weights (cash first): long-only from a Dirichlet, long-short with gross exposure up to
    `gross_cap` (the target's often at it); some assets at 0 in one of them, as a listing or a delisting leaves."""
    n = int(rng.integers(1, 40))
    pair = []
    for _ in range(2):
        if short:
            assets = rng.uniform(-1.0, 1.0, n)
            assets *= gross_cap * min(1.0, rng.uniform(0.0, 1.5)) / np.abs(assets).sum()
            weights = np.r_[1.0 - assets.sum(), assets]
        else:
            weights = rng.dirichlet(np.full(n + 1, 0.3))
        weights[1:][rng.random(n) < 0.2] = 0.0
        weights[0] = 1.0 - weights[1:].sum()
        pair.append(weights)
    return pair[0], pair[1]


@pytest.mark.parametrize("short", [False, True], ids=["long_only", "long_short"])
def test_the_exact_remainder_factor_solves_its_equation_up_to_the_cost_bound(short: bool) -> None:
    """Both ways to the root: the guessed piece (most rebalances) and the sorted kinks (the rest, checked on every
    pair), each taken hundreds of times here."""
    rng = np.random.default_rng(51)
    worst, guessed = 0.0, 0
    for _ in range(3000):
        gross_cap = float(rng.choice([1.0, 2.0, 3.0])) if short else 1.0
        # costs up to the bound c * gross_cap < 1: 12 bps, 1%, 30%, and within 1e-6 of it
        rate = float(rng.choice([0.0012, 0.01, 0.3 / gross_cap, (1.0 - 10.0 ** -rng.uniform(1, 6)) / gross_cap]))
        held, target = random_pair(rng, short, gross_cap)
        guessed += root_on_guessed_piece(held[1:], target[1:], rate) is not None
        worst = max(worst, equation_residual(held, target, rate, remainder_factor(held, target, rate)),
                    equation_residual(held, target, rate, root_on_sorted_pieces(held[1:], target[1:], rate)))
    assert worst < 1e-12, worst
    assert 300 < guessed < 2700, guessed


@pytest.mark.parametrize(("rate", "target"), [
    (0.9002, np.r_[0.001, np.full(5, 0.999 / 5)]),         # the first rebalance from cash at fee_bps: 9000
    (0.3002, np.r_[1.0, 1.0, 0.5, -0.5, -1.0]),             # fee_bps: 3000 with gross_cap: 3, long_short
], ids=["fee_9000_from_cash", "fee_3000_gross_3"])
def test_the_costs_the_iteration_gave_up_on_are_solved(rate: float, target: np.ndarray) -> None:
    cash = np.r_[1.0, np.zeros(len(target) - 1)]
    gross = float(np.abs(target[1:]).sum())
    assert iterated_factor(cash, target, rate) is None  # what raised ArithmeticError before
    mu = remainder_factor(cash, target, rate)
    assert mu == pytest.approx(1.0 / (1.0 + rate * gross), abs=1e-15)  # from cash: mu = 1 - c * gross * mu
    book = PortfolioBook(len(target) - 1, rate)
    book.rebalance(target, np.ones(len(target) - 1))
    np.testing.assert_allclose(book.weights(np.ones(len(target) - 1)), target, rtol=0, atol=1e-14)


def test_a_target_beyond_the_cost_bound_is_refused() -> None:
    with pytest.raises(ArithmeticError, match="gross_cap"):
        remainder_factor(np.r_[1.0, 0.0, 0.0], np.r_[1.0, 2.0, -2.0], 0.25)


@pytest.mark.parametrize("short", [False, True], ids=["long_only", "long_short"])
def test_the_exact_remainder_factor_is_the_old_iterations_where_that_converged(short: bool) -> None:
    rng = np.random.default_rng(11)
    compared, worst = 0, 0.0
    for _ in range(3000):
        gross_cap = float(rng.choice([1.0, 3.0])) if short else 1.0
        rate = float(rng.choice([0.0007, 0.0012, 0.01, 0.05, 0.2 / gross_cap]))
        held, target = random_pair(rng, short, gross_cap)
        iterated = iterated_factor(held, target, rate)
        if iterated is not None:
            compared += 1
            worst = max(worst, abs(remainder_factor(held, target, rate) - iterated))
    assert compared > 2900
    assert worst < 1e-13, worst


def test_the_book_charges_c_on_a_purchase_where_jiang_xu_and_liang_charge_c_over_1_minus_c() -> None:
    """All cash into one asset at 12 bps: the book pays c per unit bought (mu = 1 / (1 + c)); Jiang, Xu & Liang's
    buyer receives (1 - c) of the cash spent (mu = 1 - c), c^2 / (1 - c) more per unit bought, 1.44e-6 at 12 bps."""
    rate, held, target = 0.0012, [1.0, 0.0], [0.0, 1.0]
    book = remainder_factor(np.array(held), np.array(target), rate)
    assert book == pytest.approx(1.0 / (1.0 + rate), abs=1e-15)
    assert book == pytest.approx(sell_pay_buy(held, target, rate), abs=1e-12)
    jiang = sell_pay_buy(held, target, rate, buy_rate=rate / (1.0 - rate))
    assert jiang == pytest.approx(1.0 - rate, abs=1e-12)
    # per unit bought (book units: book; Jiang's: jiang), the extra charge is c^2 / (1 - c)
    assert (1.0 / jiang - 1.0) - (1.0 / book - 1.0) == pytest.approx(rate ** 2 / (1.0 - rate), rel=1e-6)
    assert rate ** 2 / (1.0 - rate) == pytest.approx(1.44e-6, rel=2e-3)


@pytest.mark.parametrize(("keys", "words"), [
    ({"fee_bps": 9000, "slippage_bps": 2000}, "below 10000 bps"),
    ({"fee_bps": 3400, "weights": "long_short", "gross_cap": 3}, "below 3333.33 bps or lower gross_cap"),
    ({"fee_bps": 4000, "weights": "long_short", "fixed_weights": {"cash": 1.0, "A": 1.5, "B": -1.5}},
     "fixed_weights' gross exposure 3"),
], ids=["long_only", "long_short", "fixed_weights"])
def test_costs_whose_rebalance_has_no_single_solution_are_refused_in_one_line(keys: dict, words: str) -> None:
    with pytest.raises(InputError) as refused:
        PortfolioConfig.from_dict({"table_path": "t.csv", **keys})
    message = str(refused.value)
    assert "env_config.fee_bps + slippage_bps" in message and words in message and "\n" not in message


def test_the_issues_costs_are_inside_the_bound_and_accepted() -> None:
    """fee_bps 9000 long-only (c * 1 = 0.9002) and 3000 with gross_cap 3 (c * 3 = 0.9006): one solution each."""
    long_short = {"weights": "long_short", "gross_cap": 3}
    for keys, rate in (({"fee_bps": 9000}, 0.9002), ({"fee_bps": 3000, **long_short}, 0.3002)):
        assert PortfolioConfig.from_dict({"table_path": "t.csv", **keys}).cost_rate == pytest.approx(rate, abs=1e-15)
