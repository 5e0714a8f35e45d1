"""The env_config of `trading/Portfolio-v0`: the universe and the weight rule, on top of the keys every trading
family shares (envs.trading.bars_config.BarsConfig: splits, decisions, costs, features, calendar)."""
from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field, model_validator

from envs.portfolio.weights import FIXED_WEIGHTS_KEY, check_user_weights
from envs.trading.bars_config import BarsConfig

# Features of the close alone, so the default works for close-only universes too: the log return, 24-bar
# volatility, the close against its 24- and 96-bar means and a 14-bar RSI of log returns.
DEFAULT_FEATURES = ("log_return", {"transform": "volatility", "window": 24}, {"transform": "trend", "window": 24},
                    {"transform": "trend", "window": 96}, {"transform": "log_rsi", "window": 14})


class PortfolioConfig(BarsConfig):
    """Everything that defines the universe an agent allocates across; built from the env_config dict.

    Two inputs read the whole universe (envs.portfolio.inputs): a feature item with `cross_section: rank | zscore`
    is ranked or z-scored across the assets at each bar, and `window_normalization: last_close` appends each
    window's prices over its last close to every asset's row. The row keeps its last two columns, the weight and
    the tradable flag, so the shared-weights network and its numpy export read any of these layouts."""

    ENV_LABEL: ClassVar[str] = "portfolio env"
    CROSS_SECTIONAL: ClassVar[bool] = True

    source: Literal["file", "synthetic"] = Field(
        default="file",
        description="Where the universe comes from: file (data_paths or table_path) or a seeded synthetic universe "
                    "(envs.trading.synthetic_universe).")
    data_paths: list[str] | None = Field(
        default=None, description="source file: one bars file per asset (the other way is table_path).")
    table_path: str | None = Field(
        default=None, description="source file: one wide table of ASSET:field columns (the other way is data_paths).")
    assets: list[str] | None = Field(
        default=None, description="With table_path: which of the table's assets form the universe. None: all of them.")
    timeframe: str | None = Field(
        default=None, description="A wide table's bar interval, e.g. 1d (bars files record theirs).")
    synthetic_assets: int = Field(default=20, ge=2, description="source synthetic: assets in the universe.")
    synthetic_bars: int = Field(default=20_000, ge=200, description="source synthetic: bars to generate per asset.")
    synthetic_seed: int = Field(default=0, ge=0, description="source synthetic: the seed of the generated universe.")
    synthetic_model: Literal["planted", "noise"] = Field(
        default="planted",
        description="source synthetic: planted (a persistent drift the agent can learn) or noise (the same drift "
                    "shuffled in time: nothing to learn).")
    synthetic_signal: float = Field(default=1.0, ge=0, le=10,
                                    description="source synthetic: the planted drift's strength (x the model's own).")
    split: Literal["train", "validation", "test"] = Field(
        default="train", description="Which part of the fold the env trades.")
    weights: Literal["long_only", "long_short"] = Field(
        default="long_only",
        description="How scores become weights (envs.portfolio.weights): long_only softmax(kappa * score), or "
                    "long_short tanh weights with sum(|w|) <= gross_cap.")
    kappa: float = Field(default=5.0, gt=0, le=50,
                         description="long_only: the softmax's sharpness; higher concentrates the weights.")
    gross_cap: float = Field(default=1.0, gt=0, le=3,
                             description="long_short: the most sum(|w|) may be (the gross exposure).")
    features: list[Any] = Field(
        default_factory=lambda: list(DEFAULT_FEATURES),
        description="What the agent sees of each asset's bars (envs.trading.features.spec). Default: features of the "
                    "close alone (log return, 24-bar volatility, trend over 24 and 96 bars, 14-bar RSI), so "
                    "close-only universes work too.")
    window_normalization: Literal["none", "last_close"] = Field(
        default="none",
        description="none: each asset's row is its window of features only. last_close (Jiang, Xu & Liang 2017): "
                    "after the features, the window's closes, highs and lows (closes only for a close-only "
                    "universe), bar-major, each divided by the window's last close, so the last close column is 1; "
                    "0 where the asset has no bar, clipped at 10. Appended, not instead: the feature list stays "
                    "(a short one such as [log_return] leaves mostly the prices).")
    fixed_weights: dict[str, float] | None = Field(
        default=None,
        description="A baseline of the user's own: these weights ({cash: 0.4, BTC-USD: 0.3, ...}, an asset left out "
                    "holds 0) rebalanced to at every decision, scored next to the others as fixed_weights.")

    @model_validator(mode="after")
    def _one_universe(self) -> "PortfolioConfig":
        named = [key for key in ("data_paths", "table_path") if getattr(self, key)]
        if self.source == "file" and len(named) != 1:
            raise ValueError("name the universe once: data_paths (one bars file per asset) or table_path (one wide "
                             "table of ASSET:close columns)" + (", not both" if named else ""))
        if self.assets is not None and not self.table_path:
            raise ValueError("env_config.assets picks a wide table's columns: use it with table_path")
        if self.fixed_weights is not None:
            check_user_weights(np.array(list(self.fixed_weights.values())), self.weights, FIXED_WEIGHTS_KEY)
        return self

    @model_validator(mode="after")
    def _cost_has_one_solution(self) -> "PortfolioConfig":
        """The rebalance cost (envs.portfolio.book) has exactly one solution while c * sum(|w'|) < 1 for every target
        w': at most 1 long-only, gross_cap long-short, and the fixed-weights baseline's own gross exposure."""
        gross, reach = (self.gross_cap, f"gross_cap {self.gross_cap:g}") if self.weights == "long_short" else (
            1.0, "long_only's gross exposure 1")
        if self.fixed_weights is not None:
            fixed = sum(abs(weight) for name, weight in self.fixed_weights.items() if name != "cash")
            if fixed > gross:
                gross, reach = fixed, f"fixed_weights' gross exposure {fixed:g}"
        if self.cost_rate * gross >= 1.0:
            most = (1.0 / gross) * 1e4
            raise ValueError(f"env_config.fee_bps + slippage_bps ({self.fee_bps:g} + {self.slippage_bps:g} bps, a cost "
                             f"of {self.cost_rate:g} per unit traded) times {reach} is {self.cost_rate * gross:g}, "
                             f"not below 1, so the rebalance cost has no single solution: keep fee_bps + slippage_bps "
                             f"below {most:g} bps" + (" or lower gross_cap" if self.weights == "long_short" else ""))
        return self

    @property
    def cost_rate(self) -> float:
        """Fee and slippage per unit of traded notional."""
        return (self.fee_bps + self.slippage_bps) / 1e4
