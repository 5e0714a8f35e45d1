"""The portfolio family's baselines: weights decided from closes up to each decision, filled by the agent's ledger.

Each baseline has the family's one signature (envs.baselines): a `BaselineView` of the fold and the part's rows
lo..hi-1 -> target weights (hi-lo, N+1), cash first, one row per decision row and NaN rows between decisions (hold).
Every one goes through `envs.portfolio.book.replay_weights`, so all pay the same exact costs as the agent and meet
the same ruin rule (only the fixed-weights baseline can borrow, under long_short, and so be ruined). Only
assets that can trade at a decision get weight (`tradable`); a rule's weights are renormalized over them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from envs.baselines import Baseline, baseline_table
from envs.portfolio.olps import olps_weights
from envs.portfolio.risk import minimum_variance_weights

MOMENTUM_DAYS = 30


@dataclass(frozen=True)
class BaselineView:
    """What a baseline may read: closes and tradability up to each decision, the fold's train rows, the calendar."""

    closes: np.ndarray              # (T, N)
    tradable: np.ndarray            # (T, N)
    listed: np.ndarray              # (T, N)
    timestamps: pd.DatetimeIndex
    train: tuple[int, int]
    decision_interval: int

    def decision_rows(self, lo: int, hi: int) -> np.ndarray:
        """Rows of lo..hi-2 at which a decision is made (the last row has no next bar to fill at)."""
        return np.arange(lo, hi - 1, self.decision_interval)

    def empty(self, lo: int, hi: int) -> np.ndarray:
        return np.full((hi - lo, self.closes.shape[1] + 1), np.nan)


def equal_over(mask: np.ndarray) -> np.ndarray:
    """1/k over the k True assets (cash 0), or all cash when none can trade."""
    count = int(mask.sum())
    if not count:
        return np.concatenate([[1.0], np.zeros(len(mask))])
    return np.concatenate([[0.0], mask / count])


def uniform_constant_rebalanced(view: BaselineView, lo: int, hi: int) -> np.ndarray:
    targets = view.empty(lo, hi)
    for row in view.decision_rows(lo, hi):
        targets[row - lo] = equal_over(view.tradable[row])
    return targets


def uniform_buy_and_hold(view: BaselineView, lo: int, hi: int) -> np.ndarray:
    targets = view.empty(lo, hi)
    targets[0] = equal_over(view.tradable[lo])
    return targets


def fixed_weights(view: BaselineView, lo: int, hi: int, weights: np.ndarray) -> np.ndarray:
    """The user's weights (cash first) at every decision; an asset that cannot trade there has its weight in cash."""
    targets = view.empty(lo, hi)
    for row in view.decision_rows(lo, hi):
        target = weights.copy()
        idle = np.flatnonzero(~view.tradable[row]) + 1
        target[0] += target[idle].sum()
        target[idle] = 0.0
        targets[row - lo] = target
    return targets


def flat(view: BaselineView, lo: int, hi: int) -> np.ndarray:
    targets = view.empty(lo, hi)
    targets[0] = equal_over(np.zeros(view.closes.shape[1], dtype=bool))
    return targets


def momentum_lookback(timestamps: pd.DatetimeIndex) -> int:
    """Bars in MOMENTUM_DAYS days of the calendar (its median bar spacing)."""
    spacing = pd.Series(timestamps[1:] - timestamps[:-1]).median()
    return max(1, int(round(pd.Timedelta(days=MOMENTUM_DAYS) / spacing)))


def cross_sectional_momentum(view: BaselineView, lo: int, hi: int) -> np.ndarray:
    """The top ceil(N/4) tradable assets by trailing 30-day return, equal-weighted, at every decision; an asset
    without 30 days of bars behind it is not ranked (1/N over the tradable ones while none is)."""
    targets = view.empty(lo, hi)
    lookback = momentum_lookback(view.timestamps)
    top = math.ceil(view.closes.shape[1] / 4)
    for row in view.decision_rows(lo, hi):
        past = row - lookback
        ranked = view.tradable[row] & (view.listed[past] if past >= 0 else False)
        if not ranked.any():
            targets[row - lo] = equal_over(view.tradable[row])
            continue
        trailing = np.where(ranked, view.closes[row] / view.closes[max(past, 0)], -np.inf)
        chosen = np.zeros(len(ranked), dtype=bool)
        chosen[np.argsort(-trailing, kind="stable")[:min(top, int(ranked.sum()))]] = True
        targets[row - lo] = equal_over(chosen)
    return targets


def minimum_variance(view: BaselineView, lo: int, hi: int) -> np.ndarray:
    """skfolio's minimum-variance portfolio fitted on the fold's train part only, rebalanced to at every decision
    (renormalized over the assets that can trade there)."""
    fitted = minimum_variance_weights(view.closes[view.train[0]:view.train[1]],
                                      view.listed[view.train[0]:view.train[1]])
    targets = view.empty(lo, hi)
    for row in view.decision_rows(lo, hi):
        weights = np.where(view.tradable[row], fitted, 0.0)
        targets[row - lo] = (np.concatenate([[0.0], weights / weights.sum()]) if weights.sum() > 0
                             else equal_over(view.tradable[row]))
    return targets


def online_portfolio(algorithm: str, view: BaselineView, lo: int, hi: int) -> np.ndarray:
    """An OLPS algorithm of universal-portfolios run on the part's closes at its decision rows (and its last row),
    over the assets that can trade at every decision (the library takes no NaN). The library's weights for period
    j+1 are decided from prices up to row j, so they are the target at decision j. 1/N when fewer than two assets
    trade throughout."""
    rows = view.decision_rows(lo, hi)
    kept = view.tradable[rows].all(axis=0)
    targets = view.empty(lo, hi)
    if kept.sum() < 2:
        for row in rows:
            targets[row - lo] = equal_over(view.tradable[row])
        return targets
    prices = pd.DataFrame(view.closes[np.append(rows, hi - 1)][:, kept])
    held = olps_weights(algorithm, prices)  # row j: held over period j (prices j-1 -> j)
    for j, row in enumerate(rows):
        weights = np.zeros(view.closes.shape[1])
        weights[kept] = held[j + 1]
        targets[row - lo] = np.concatenate([[0.0], weights / weights.sum()])
    return targets


def olmar(view: BaselineView, lo: int, hi: int) -> np.ndarray:
    return online_portfolio("olmar", view, lo, hi)


def pamr(view: BaselineView, lo: int, hi: int) -> np.ndarray:
    return online_portfolio("pamr", view, lo, hi)


Decide = Callable[[BaselineView, int, int], np.ndarray]
BASELINES: tuple[Baseline[Decide], ...] = baseline_table(
    Baseline("ucrp", uniform_constant_rebalanced, "1/N rebalanced at every decision: the classic one to beat"),
    Baseline("ubah", uniform_buy_and_hold, "1/N bought once: the market of these assets"),
    Baseline("momentum", cross_sectional_momentum,
             f"the top quarter by trailing {MOMENTUM_DAYS}-day return: the rule practitioners start from"),
    Baseline("olmar", olmar, "online moving-average reversion (universal-portfolios, default parameters)"),
    Baseline("pamr", pamr, "passive-aggressive mean reversion (universal-portfolios, default parameters)"),
    Baseline("min_variance", minimum_variance, "skfolio's minimum variance, fitted on the train part only"),
    Baseline("flat", flat, "all cash: an agent that never invests ties it"),
)
FIXED = "fixed_weights"  # the file's own baseline (env_config.fixed_weights), judged like the table's
HINDSIGHT = "best_asset_hindsight"  # shown in the table, marked: never a verdict line
