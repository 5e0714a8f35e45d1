"""The portfolio family's score-to-weight rule (envs/portfolio/weights.py) and its inverse, for an ensemble of portfolio
policies (algos/export/ensemble_policy.py): it averages the members' weights, then gives scores that the env maps to
exactly that mean. numpy only, so a served ensemble loads it without torch."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from envs.errors import InputError
from envs.portfolio.weights import WEIGHT_RULES, scores_to_weights


@dataclass(frozen=True)
class WeightRule:
    """How the portfolio env maps scores to weights (envs.portfolio.weights): long_only or long_short, kappa and
    the gross cap; an ensemble of portfolio policies averages weights, so it needs the map and its inverse."""

    rule: str
    kappa: float
    gross_cap: float = 1.0

    def __post_init__(self) -> None:
        if self.rule not in WEIGHT_RULES or not (self.kappa > 0 and self.gross_cap > 0):
            raise InputError(f"ensemble weight rule {self.rule!r} (kappa {self.kappa!r}, gross_cap "
                             f"{self.gross_cap!r}) is not one of {', '.join(WEIGHT_RULES)} with kappa > 0 and "
                             "gross_cap > 0")

    @classmethod
    def of_env_config(cls, env_config: Mapping[str, Any]) -> WeightRule:
        """The rule of the portfolio env that `env_config` builds (its own defaults for the keys it leaves out)."""
        from envs.portfolio.config import PortfolioConfig

        config = PortfolioConfig.from_dict(dict(env_config))
        return cls(config.weights, float(config.kappa), float(config.gross_cap))

    def weights(self, scores: np.ndarray, tradable: np.ndarray) -> np.ndarray:
        return scores_to_weights(scores, tradable, self.rule, self.kappa, self.gross_cap)


def weights_to_scores(weights: np.ndarray, tradable: np.ndarray, rule: WeightRule) -> np.ndarray:
    """Scores (..., N+1) in [-1, 1] that `rule` maps to `weights` (..., N+1, cash first) again, for weights that are a
    mean of the rule's own weights (a convex combination of them):
    - long_only: log(w) / kappa, shifted so that the largest is 1. Every member's weights are within a ratio of
      e^(2 kappa) of each other (its scores are in [-1, 1]), so their mean is too and the smallest score is >= -1;
    - long_short: atanh(w) / kappa per asset. Each member's |w| is at most tanh(kappa) and its gross at most
      gross_cap, so the mean's are too: tanh gives w back and the cap scales nothing. Cash's score is unused (0).
    An asset that cannot trade gets -1 (long_only) or 0 (long_short): the rule gives it weight 0 whatever it is."""
    weights = np.asarray(weights, dtype=np.float64)
    mask = np.asarray(tradable, dtype=bool)
    if rule.rule == "long_only":
        with np.errstate(divide="ignore"):
            logs = np.log(weights)
        logs[..., 1:] = np.where(mask, logs[..., 1:], -np.inf)
        scores = 1.0 + (logs - logs.max(axis=-1, keepdims=True)) / rule.kappa
        return np.clip(np.where(np.isfinite(scores), scores, -1.0), -1.0, 1.0)
    bound = np.tanh(rule.kappa)
    assets = np.where(mask, np.arctanh(np.clip(weights[..., 1:], -bound, bound)) / rule.kappa, 0.0)
    return np.clip(np.concatenate([np.zeros_like(weights[..., :1]), assets], axis=-1), -1.0, 1.0)
