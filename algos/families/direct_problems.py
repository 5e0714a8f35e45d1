"""The direct learner's problem of each env family it trains through (algos/direct/spot.py, portfolio.py), found by
the family's class: the family says it has a differentiable book (`envs.abilities.TrainsThroughBook`), the torch
problem that walks it lives in algos/."""
from __future__ import annotations

from typing import Any

from envs.errors import InputError


def problem_class(family: Any) -> type:
    """The problem class of `family`: `Class(env, batch_size, batch_start, geometric_bias, seed, device)` holds the
    train part of one fold, `Class.check(env, training)` refuses what it cannot train. Imports torch."""
    from envs.portfolio.family import PortfolioFamily
    from envs.trading.family import TradingFamily

    if isinstance(family, PortfolioFamily):  # first: the portfolio family extends the trading one
        from algos.direct.portfolio import PortfolioProblem

        return PortfolioProblem
    if isinstance(family, TradingFamily):
        from algos.direct.spot import SpotProblem

        return SpotProblem
    raise InputError(f"algorithm: direct has no problem for {family.env_id}, though it has a differentiable book: "
                     "add its problem class to algos/families/direct_problems.py")
