"""Which features a trained policy uses: the drop in its validation return when one feature is permuted.

For each feature of the list (a multi-output indicator's columns together), its values on the fold's
validation rows are shuffled across those rows, breaking their link to the bars while keeping their
distribution, and the greedy policy walks the validation part again. The drop from its unshuffled return
is the feature's importance; it is averaged over `repeats` shuffles. Only validation rows are read, never
the test part: importance is part of choosing what to try next, so it must not see what judges the result.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd

from envs.report import Policy
from envs.trading.env import SpotTradingEnv
from envs.trading.positions import policy_action


def greedy_return(policy: Policy, env: SpotTradingEnv) -> float:
    """The return of one greedy walk of the env's part (what RLlib's greedy evaluation reports on it)."""
    obs, _ = env.reset(seed=0)
    total, ended = 0.0, False
    while not ended:
        action = policy_action(policy(obs[None, :]), env.continuous)
        obs, reward, terminated, truncated, _ = env.step(action)
        total += float(reward)
        ended = terminated or truncated
    return total


def permutation_importance(policy: Policy, env_config: dict[str, Any], repeats: int = 3,
                           seed: int = 0) -> pd.DataFrame:
    """Per feature: the validation return's mean drop (and its spread over `repeats` shuffles) when its values
    on the validation rows are permuted; the unshuffled return in the frame's attrs."""
    env = SpotTradingEnv({**env_config, "split": "validation", "episode_length": None})
    market = env.market
    base = greedy_return(policy, env)
    lo, hi = market.bounds["validation"]
    rng = np.random.default_rng(seed)
    groups = list(dict.fromkeys(market.feature_groups))
    rows = {}
    for group in groups:
        columns = [i for i, g in enumerate(market.feature_groups) if g == group]
        drops = []
        for _ in range(repeats):
            features = market.features.copy()
            order = lo + rng.permutation(hi - lo)
            features[lo:hi, columns] = market.features[order][:, columns]
            shuffled = SpotTradingEnv(env.cfg.model_dump(), market=dataclasses.replace(market, features=features))
            drops.append(base - greedy_return(policy, shuffled))
        rows[group] = {"drop_mean": float(np.mean(drops)), "drop_std": float(np.std(drops))}
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.name = "feature"
    frame.attrs["validation_return"] = base
    return frame
