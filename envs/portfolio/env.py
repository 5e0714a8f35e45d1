"""`trading/Portfolio-v0`: one policy allocates across a universe of assets; costs are in the reward.

Every `decision_interval` bars the agent gives N+1 scores (cash first) after bar t's close; the env maps them to
weights (envs.portfolio.weights), fills them at bar t+1's open at the exact self-financing cost (envs.portfolio.book)
and holds the units until the next decision. The reward is the log change of equity from close t to the close before
the next decision, times `reward_scale`. Training episodes are random windows of the fold's train part;
validation and test episodes walk their whole part. Both end truncated, unless the book is ruined (envs.portfolio.book:
a long-short book whose liquidation value, what selling everything would leave after its cost, is <= 0 at an open or
a close): it is liquidated at that mark and the episode ends with that decision, terminated, with info `ruin: True`
and the log change to the floored equity (`EQUITY_FLOOR`, 1e-4 of the starting equity) as the reward, as
`trading/Spot-v0` ends at a margin call.
"""
from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np

from envs.portfolio.book import PortfolioBook, step_book
from envs.portfolio.config import PortfolioConfig
from envs.portfolio.inputs import last_close_window
from envs.portfolio.market import PortfolioMarket, load_portfolio_market
from envs.portfolio.weights import fixed_weight_vector, scores_to_weights
from envs.splits import episode_bounds
from envs.trading.calendar import detect_calendar

EXTRA_COLUMNS = 2  # after each asset's window of features (and prices): its current weight, and whether it can trade


class PortfolioEnv(gym.Env):
    """## Description

    A universe of N assets (one bars file each, or one wide table) on the union of their calendars. An asset listed
    later has weight 0 until it can trade; one whose bars end is sold at its last close.

    ## Action Space

    `Box(-1, 1, (N+1,), float32)`: scores, cash first. `weights: long_only` (default) gives softmax(kappa * score)
    over cash and the tradable assets; `long_short` gives tanh(kappa * score) per asset scaled to sum(|w|) <=
    `gross_cap`, cash the rest.

    ## Observation Space

    `Box(-10, 10, (N, window * F + window * P + 2), float32)`: one row per asset, its last `window` bars of F
    features (oldest first, bar-major, z-scored with its own train statistics, or ranked or z-scored across the
    assets for a `cross_section:` feature; 0 where unknown), then under `window_normalization: last_close` the
    window's P prices (close, high, low; close only for a close-only universe) over its last close, bar-major (P = 0
    under `none`), then its current weight (at the decision bar's close), then 1 if it can trade at the next fill,
    else 0. One network can read every row.

    ## Rewards

    `reward_scale` x the log change of equity from the decision bar's close to the close before the next decision,
    net of the rebalance cost (`fee_bps` + `slippage_bps` on every asset's traded notional, paid out of itself).

    ## Starting State, Episode End

    All cash, equity 1. Training episodes start at a uniformly drawn row of the train part and are truncated after
    `episode_length` bars; validation and test walk their whole part. Terminated when the book is ruined: its
    liquidation value is <= 0 at an open or a close it holds through (only a book that borrows, under long_short).
    It is liquidated there, keeps 1e-4 of cash, and the step's reward is reward_scale x log(1e-4 / the equity at
    the decision), `info["ruin"]` True: finite, about -9.2 x reward_scale from the starting equity.
    """

    metadata = {"render_modes": []}

    def __init__(self, config: dict[str, Any] | None = None, market: PortfolioMarket | None = None) -> None:
        self.cfg = PortfolioConfig.from_dict(config)
        self.market = market or load_portfolio_market(self.cfg)
        universe = self.market.universe
        self.n_assets = universe.n_assets
        n_features = self.market.features.shape[2]
        self._feature_width = self.cfg.window * n_features
        self._prices = self.market.window_prices  # None unless window_normalization: last_close
        self._row_width = self._feature_width + self.cfg.window * len(self.market.price_names)
        self.observation_space = gym.spaces.Box(-10.0, 10.0, shape=(self.n_assets, self._row_width + EXTRA_COLUMNS),
                                                dtype=np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(self.n_assets + 1,), dtype=np.float32)
        self._lo, self._hi = self.market.bounds[self.cfg.split]
        self._interval = self.cfg.decision_interval
        self._opens, self._closes = universe.opens, universe.closes
        self._last_rows = universe.last_rows
        # (N, T * F): a window of one asset is one contiguous run of its row
        self._features = np.ascontiguousarray(self.market.features.reshape(self.n_assets, -1))
        self._n_features = n_features
        # the file's fixed-weights baseline, checked against the universe here so that --dry-run refuses a bad name
        self.fixed_weights = (fixed_weight_vector(self.cfg.fixed_weights, universe.symbols)
                              if self.cfg.fixed_weights is not None else None)

    def plan_lines(self) -> list[str]:
        market, universe = self.market, self.market.universe
        calendar = self.cfg.calendar if self.cfg.calendar is not None else detect_calendar(universe.timestamps,
                                                                                            universe.timeframe)
        return [f"universe: {universe.n_assets} assets ({', '.join(universe.symbols[:8])}"
                f"{', ...' if universe.n_assets > 8 else ''}) on {len(universe.timestamps)} {universe.timeframe} bars"
                f"{', close-only' if universe.close_only else ''}, calendar {calendar}: "
                f"{market.bars_per_year:.1f} bars a year",
                f"features: {len(market.feature_names)} per asset ({', '.join(market.feature_names)}), warm-up "
                f"{market.feature_warmup} bars"
                + (f"; then each window's {', '.join(market.price_names)} / its last close (window_normalization: "
                   f"last_close): rows of {self._row_width + EXTRA_COLUMNS} columns" if self._prices is not None
                   else ""),
                # The plan's time estimate is the preset's env steps/s, which knows nothing of the universe's size.
                f"note: the time estimate counts env steps, not the {universe.n_assets} rows each update reads: at "
                "N = 500 an iteration costs about 20x what it assumes on a CPU (docs/portfolio.md, \"One model for "
                "500 coins\", has the measured cost at N = 5 .. 500 and on a GPU)"]

    def split_periods(self) -> dict[str, tuple[str, str]]:
        """First and last bar of each part of the fold; a part a refit leaves empty is not named."""
        stamps = self.market.timestamps
        return {name: (f"{stamps[lo]:%Y-%m-%d}", f"{stamps[hi - 1]:%Y-%m-%d}")
                for name, (lo, hi) in ((n, self.market.bounds[n]) for n in ("train", "validation", "test")) if hi > lo}

    def observation_at(self, row: int, held: np.ndarray) -> np.ndarray:
        """The observation at decision row `row` with asset weights `held` (N,)."""
        obs = np.empty((self.n_assets, self._row_width + EXTRA_COLUMNS), dtype=np.float32)
        end = (row + 1) * self._n_features
        obs[:, :self._feature_width] = self._features[:, end - self._feature_width:end]
        if self._prices is not None:
            obs[:, self._feature_width:self._row_width] = last_close_window(
                self._prices[:, row + 1 - self.cfg.window:row + 1])
        obs[:, self._row_width] = held
        obs[:, self._row_width + 1] = self.market.tradable[row]
        return obs

    def weights_of(self, action: np.ndarray, row: int) -> np.ndarray:
        """The target weights (cash first) that scores at decision row `row` ask for."""
        return scores_to_weights(action, self.market.tradable[row], self.cfg.weights, self.cfg.kappa,
                                 self.cfg.gross_cap)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._t, self._end = episode_bounds(self._lo, self._hi, self.cfg.episode_length, self.cfg.split == "train",
                                            self.np_random)
        self.book = PortfolioBook(self.n_assets, self.cfg.cost_rate)
        self._equity = 1.0
        return self.observation_at(self._t, np.zeros(self.n_assets)), self._info()

    def step(self, action: np.ndarray):
        target = self.weights_of(action, self._t)
        next_row = min(self._t + self._interval, self._end)
        equity = step_book(self.book, target, self._t + 1, next_row, self._opens, self._closes, self._last_rows)
        reward = math.log(equity / self._equity) * self.cfg.reward_scale
        ruined = self.book.ruined
        self._equity = equity
        self._t = next_row
        held = self.book.weights(self._closes[next_row], equity)[1:]
        return (self.observation_at(next_row, held), reward, ruined, next_row >= self._end and not ruined,
                {**self._info(), "weights": target})

    def _info(self) -> dict[str, Any]:
        return {"equity": self._equity, "row": self._t, "costs_paid": self.book.costs_paid,
                "turnover": self.book.traded_notional, "ruin": self.book.ruined}
