"""From the policy's scores to portfolio weights, and the checks on weights a user gives.

RLlib 2.60's new API stack has no Simplex or Dirichlet action distribution, so the action is a Box of N+1 scores in
[-1, 1] (cash first, then the assets in the universe's order) and the env maps them to weights:
- `long_only` (the default): softmax(kappa * score) over cash and the assets that can trade; kappa sets how far a
  score of 1 is from a score of -1 (kappa 5: a weight ratio of e^10);
- `long_short`: tanh(kappa * score) per asset, scaled down so that the gross exposure sum(|w|) is at most
  `gross_cap`; cash is the rest (1 - sum(w)), which a short adds to.
An asset that cannot trade at the fill (not listed yet, its bars ended, features not complete) gets weight 0 in both.
The same map gives the greedy weights from a Gaussian policy's means (the scorer, the served model).
"""
from __future__ import annotations

from typing import Literal

import numpy as np

from envs.errors import InputError

WeightRule = Literal["long_only", "long_short"]
WEIGHT_RULES: tuple[str, ...] = ("long_only", "long_short")
SUM_TOLERANCE = 1e-9  # weights a user gives must sum to 1 within this


def scores_to_weights(scores: np.ndarray, tradable: np.ndarray, rule: str, kappa: float,
                      gross_cap: float = 1.0) -> np.ndarray:
    """Weights (..., N+1), cash first, from scores (..., N+1) in [-1, 1]; `tradable` (..., N) masks the assets."""
    scores = np.clip(np.asarray(scores, dtype=np.float64), -1.0, 1.0)
    mask = np.asarray(tradable, dtype=bool)
    if rule == "long_only":
        logits = kappa * scores
        logits[..., 1:] = np.where(mask, logits[..., 1:], -np.inf)
        logits -= logits.max(axis=-1, keepdims=True)
        weights = np.exp(logits)
        return weights / weights.sum(axis=-1, keepdims=True)
    signed = np.where(mask, np.tanh(kappa * scores[..., 1:]), 0.0)
    gross = np.abs(signed).sum(axis=-1, keepdims=True)
    signed = signed * np.minimum(1.0, gross_cap / np.where(gross > 0.0, gross, 1.0))
    return np.concatenate([1.0 - signed.sum(axis=-1, keepdims=True), signed], axis=-1)


def check_user_weights(weights: np.ndarray, rule: str, where: str) -> np.ndarray:
    """Weights a user gives (a fixed-weights baseline, weights posted to a served model or to paper trading), cash
    first: refused in one line when NaN, negative under long-only, or not summing to 1 within 1e-9."""
    values = np.asarray(weights, dtype=np.float64)
    if not np.all(np.isfinite(values)):
        raise InputError(f"{where}: weights hold NaN or infinity: give a finite weight for cash and each asset")
    if rule == "long_only" and np.any(values < 0.0):
        raise InputError(f"{where}: negative weight {values.min():g} under long_only: give weights >= 0, or set "
                         "environment.env_config.weights: long_short")
    total = values.sum(axis=-1)
    if np.any(np.abs(total - 1.0) > SUM_TOLERANCE):
        worst = float(np.max(np.abs(total - 1.0)))
        raise InputError(f"{where}: weights sum to {float(np.ravel(total)[0]):.12g} (off by {worst:.3g}), not 1 within "
                         f"{SUM_TOLERANCE:g}: cash is the first weight; make cash and the assets sum to 1")
    return values


FIXED_WEIGHTS_KEY = "environment.env_config.fixed_weights"


def fixed_weight_vector(weights: dict[str, float], symbols: tuple[str, ...]) -> np.ndarray:
    """A file's fixed-weights baseline ({cash: w, ASSET: w, ...}; an asset left out holds 0) in the universe's order,
    cash first; a name that is neither cash nor one of the universe's assets is refused in one line."""
    unknown = sorted(set(weights) - {"cash", *symbols})
    if unknown:
        shown = ", ".join(symbols[:8]) + (", ..." if len(symbols) > 8 else "")
        raise InputError(f"{FIXED_WEIGHTS_KEY}: {', '.join(unknown)} is not in the universe ({shown}): name cash and "
                         "the universe's assets as the env names them")
    return np.array([float(weights.get(name, 0.0)) for name in ("cash", *symbols)])
