"""The env_config of `trading/Portfolio-v0`: the universe, its calendar, the weight rule, costs and features."""
from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from envs.splits import Protocol
from envs.trading.calendar import parse_calendar
from envs.trading.env import RLLIB_CONTEXT_KEYS
from envs.trading.features.spec import parse_features_json
from envs.validation import StrictModel, validate

# Features of the close alone, so the default works for close-only universes too: the log return, 24-bar
# volatility, the close against its 24- and 96-bar means and a 14-bar RSI of log returns.
DEFAULT_FEATURES = ("log_return", {"transform": "volatility", "window": 24}, {"transform": "trend", "window": 24},
                    {"transform": "trend", "window": 96}, {"transform": "log_rsi", "window": 14})
SYNTHETIC_UNIVERSES = ("planted", "noise")


class PortfolioConfig(StrictModel):
    """Everything that defines the universe an agent allocates across; built from the env_config dict."""

    model_config = ConfigDict(frozen=True)

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
    # How many bars make a year: 24/7, weekdays, or a number; None: from the data (envs.trading.calendar).
    calendar: str | float | None = None
    split: Literal["train", "validation", "test"] = "train"
    split_fractions: tuple[float, ...] = (0.7, 0.15, 0.15)
    protocol: dict[str, Any] | str | None = None
    fold: int = Field(default=0, ge=0)
    decision_interval: int = Field(default=1, ge=1)
    window: int = Field(default=24, ge=1)
    episode_length: int | None = Field(default=720, ge=2)
    fee_bps: float = Field(default=10.0, ge=0, lt=10_000)
    slippage_bps: float = Field(default=2.0, ge=0, lt=10_000)
    # Scores to weights (envs.portfolio.weights): long_only softmax(kappa * score), or long_short tanh weights with
    # sum(|w|) <= gross_cap.
    weights: Literal["long_only", "long_short"] = "long_only"
    kappa: float = Field(default=5.0, gt=0, le=50)
    gross_cap: float = Field(default=1.0, gt=0, le=3)
    reward_scale: float = Field(default=100.0, gt=0)
    features: list[Any] = Field(default_factory=lambda: list(DEFAULT_FEATURES))
    feature_store: str | None = None

    @classmethod
    def from_dict(cls, config: dict[str, Any] | None) -> "PortfolioConfig":
        values = {k: v for k, v in dict(config or {}).items() if k not in RLLIB_CONTEXT_KEYS}
        return validate(cls, values, "portfolio env", prefix="env_config.")

    @field_validator("calendar", mode="before")
    @classmethod
    def _known_calendar(cls, value: object) -> str | float | None:
        return None if value is None else parse_calendar(value)

    @field_validator("features")
    @classmethod
    def _known_features(cls, value: list[Any]) -> list[Any]:
        parse_features_json(json.dumps(value, sort_keys=True, default=str))
        return value

    @model_validator(mode="after")
    def _one_universe(self) -> "PortfolioConfig":
        named = [key for key in ("data_paths", "table_path") if getattr(self, key)]
        if self.source == "file" and len(named) != 1:
            raise ValueError("name the universe once: data_paths (one bars file per asset) or table_path (one wide "
                             "table of ASSET:close columns)" + (", not both" if named else ""))
        if self.assets is not None and not self.table_path:
            raise ValueError("env_config.assets picks a wide table's columns: use it with table_path")
        self.split_protocol()
        return self

    def feature_items(self) -> tuple:
        return parse_features_json(json.dumps(self.features, sort_keys=True, default=str))

    def split_protocol(self) -> Protocol:
        if self.protocol is not None:
            return Protocol.from_dict(self.protocol, "env_config.protocol")
        return Protocol.from_dict({"type": "holdout", "fractions": list(self.split_fractions)},
                                  "env_config.split_fractions")

    @property
    def cost_rate(self) -> float:
        """Fee and slippage per unit of traded notional."""
        return (self.fee_bps + self.slippage_bps) / 1e4
