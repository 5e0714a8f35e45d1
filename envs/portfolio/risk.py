"""The minimum-variance portfolio of skfolio, fitted on a fold's train rows only."""
from __future__ import annotations

import numpy as np

MIN_LISTED_SHARE = 0.5  # an asset listed on fewer of the train rows is left out of the fit (weight 0)


def minimum_variance_weights(closes: np.ndarray, listed: np.ndarray) -> np.ndarray:
    """Long-only minimum-variance weights (N,) of the train rows' simple returns, over the assets listed on at least
    half of them and the rows on which all of those are listed; 1/N when fewer than two assets or rows remain.
    skfolio is imported here: scoring is the only place that needs it."""
    from skfolio.optimization import MeanRisk, ObjectiveFunction

    n_assets = closes.shape[1]
    kept = listed.mean(axis=0) >= MIN_LISTED_SHARE
    rows = listed[:, kept].all(axis=1)
    prices = closes[rows][:, kept]
    if kept.sum() < 2 or len(prices) < 3:
        return np.full(n_assets, 1.0 / n_assets)
    returns = prices[1:] / prices[:-1] - 1.0
    model = MeanRisk(objective_function=ObjectiveFunction.MINIMIZE_RISK)
    model.fit(returns)
    weights = np.zeros(n_assets)
    weights[kept] = np.clip(model.weights_, 0.0, None)
    return weights / weights.sum()
