"""A toy universe with the portfolio env's spaces, whose answer is known: one asset always rises (tests of the
shared-weights portfolio module, tests/unit/test_portfolio_module.py and tests/integration/test_portfolio_training.py).
Registered with Gymnasium as PlantedUniverse-v0 when imported."""
from __future__ import annotations

import gymnasium as gym
import numpy as np

from envs.portfolio.weights import scores_to_weights

ASSETS, WINDOW, FEATURES = 4, 2, 3
ROW = WINDOW * FEATURES + 2  # the window's features, the weight, the tradable flag
PLANTED = 2  # the asset that always rises
FLAKY = 3  # the asset that cannot trade on some steps
KAPPA = 3.0
STEPS = 16
ENV_ID = "PlantedUniverse-v0"


class PlantedUniverse(gym.Env):
    """The portfolio env's spaces on a toy market: each bar, every asset's log return is N(0, 0.03) except the
    planted asset's, 0.03 (+- 0.005): it always rises, and its features (its returns, scaled) say so. The reward is the
    log growth of the long-only softmax portfolio of the action's scores over the next bar's price relatives."""

    def __init__(self, assets: int = ASSETS) -> None:
        self.assets = assets
        self.observation_space = gym.spaces.Box(-10, 10, (assets, ROW), np.float32)
        self.action_space = gym.spaces.Box(-1, 1, (assets + 1,), np.float32)

    def _returns(self) -> np.ndarray:
        returns = self.np_random.normal(0.0, 0.03, self.assets)
        returns[PLANTED] = 0.03 + self.np_random.normal(0.0, 0.005)
        return returns

    def _features(self, returns: np.ndarray) -> np.ndarray:
        return np.stack([returns * 30, np.abs(returns) * 30, self.np_random.normal(0, 1, self.assets)], axis=1)

    def _draw_tradable(self) -> None:
        self.tradable = np.ones(self.assets, bool)
        self.tradable[FLAKY] = self.np_random.random() > 0.3

    def _obs(self) -> np.ndarray:
        obs = np.zeros((self.assets, ROW), np.float32)
        obs[:, :WINDOW * FEATURES] = np.concatenate(self.window, axis=1)
        obs[~self.tradable, :WINDOW * FEATURES] = 0.0
        obs[:, -2], obs[:, -1] = self.weights[1:], self.tradable
        return np.clip(obs, -10, 10)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t, self.weights = 0, np.eye(self.assets + 1)[0]
        self.window = [self._features(self._returns()) for _ in range(WINDOW)]
        self._draw_tradable()
        return self._obs(), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        weights = scores_to_weights(action, self.tradable, "long_only", KAPPA)
        returns = self._returns()
        relatives = np.concatenate([[1.0], np.exp(returns)])
        growth = float(weights @ relatives)
        self.weights = weights * relatives / growth
        self.window = self.window[1:] + [self._features(returns)]
        self._draw_tradable()
        self.t += 1
        return self._obs(), float(np.log(growth)), False, self.t >= STEPS, {}


gym.register(ENV_ID, entry_point=PlantedUniverse)
