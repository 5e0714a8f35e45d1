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
    """Everything that defines the universe an agent allocates across; built from the env_config dict."""

    ENV_LABEL: ClassVar[str] = "portfolio env"

    # The universe: one bars file per asset (data_paths), one wide table of ASSET:field columns (table_path, and
    # which of its assets), or a seeded synthetic universe (envs.trading.synthetic_universe).
    source: Literal["file", "synthetic"] = "file"
    data_paths: list[str] | None = None
    table_path: str | None = None
    assets: list[str] | None = None
    timeframe: str | None = None  # a wide table's bar interval (files record theirs)
    synthetic_assets: int = Field(default=20, ge=2)
    synthetic_bars: int = Field(default=20_000, ge=200)
    synthetic_seed: int = 0
    synthetic_model: Literal["planted", "noise"] = "planted"
    synthetic_signal: float = Field(default=1.0, ge=0, le=10)  # the planted drift's strength (x the model's own)
    split: Literal["train", "validation", "test"] = "train"
    # Scores to weights (envs.portfolio.weights): long_only softmax(kappa * score), or long_short tanh weights with
    # sum(|w|) <= gross_cap.
    weights: Literal["long_only", "long_short"] = "long_only"
    kappa: float = Field(default=5.0, gt=0, le=50)
    gross_cap: float = Field(default=1.0, gt=0, le=3)
    features: list[Any] = Field(default_factory=lambda: list(DEFAULT_FEATURES))
    # A baseline of the user's own: these weights ({cash: 0.4, BTC-USD: 0.3, ...}, an asset left out holds 0)
    # rebalanced to at every decision, scored and judged next to the others as `fixed_weights`.
    fixed_weights: dict[str, float] | None = None

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

    @property
    def cost_rate(self) -> float:
        """Fee and slippage per unit of traded notional."""
        return (self.fee_bps + self.slippage_bps) / 1e4
