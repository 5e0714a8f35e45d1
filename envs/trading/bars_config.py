"""What every env that trades bars is configured by: how its bars are cut in time, when it decides, what it pays,
what it sees and how its reward is scaled. `trading/Spot-v0` (one coin) and `trading/Portfolio-v0` (a universe)
add their own keys to it."""
from __future__ import annotations

import json
from typing import Any, ClassVar

from pydantic import ConfigDict, Field, field_validator, model_validator

from envs.splits import Protocol
from envs.trading.calendar import parse_calendar
from envs.trading.features.spec import parse_features_json
from envs.validation import StrictModel, validate

# Keys RLlib adds to every env_config it hands an env (EnvContext); they are not the user's settings.
RLLIB_CONTEXT_KEYS = ("worker_index", "vector_index", "num_workers", "remote")


class BarsConfig(StrictModel):
    """The keys shared by the trading families; built from an env_config dict with `from_dict`."""

    model_config = ConfigDict(frozen=True)
    ENV_LABEL: ClassVar[str] = "trading env"  # how refusals name the env

    # How many bars make a year, for every annualized figure (envs.trading.calendar): 24/7 (365 days of bars),
    # weekdays (the bars per year of the data's span: weekends closed) or the number itself. None: the data's own
    # (the file's metadata, else detected from its bars). A calendar that closes days holding bars is refused.
    calendar: str | float | None = None
    # The time splits: `protocol` (envs.splits.Protocol as a mapping; the platform fills it from
    # evaluation.protocol) and which of its folds this env is; without it, the holdout split_fractions.
    split_fractions: tuple[float, ...] = (0.7, 0.15, 0.15)
    protocol: dict[str, Any] | str | None = None
    fold: int = Field(default=0, ge=0)
    # Bars between decisions: the agent decides every `decision_interval` bars and holds in between (one env step =
    # that many bars; the reward is the log equity change over them). 1 decides every bar.
    decision_interval: int = Field(default=1, ge=1)
    window: int = Field(default=24, ge=1)
    episode_length: int | None = Field(default=720, ge=2)  # None: walk the whole split
    # Costs in basis points of the notional traded; 10,000 bps would be the whole notional.
    fee_bps: float = Field(default=10.0, ge=0, lt=10_000)
    slippage_bps: float = Field(default=2.0, ge=0, lt=10_000)
    reward_scale: float = Field(default=100.0, gt=0)
    # What the agent sees of each bar: feature sets, transforms, TA-Lib functions and blocks (higher timeframes,
    # other markets, outside series), envs.trading.features.spec; each family has its default.
    features: list[Any] = Field(default_factory=list)
    # Where computed feature matrices are cached by content (a folder or s3:// URI; the platform sets it to the
    # run's storage root + features/). None: computed once per process.
    feature_store: str | None = None

    @classmethod
    def from_dict(cls, config: dict[str, Any] | None) -> Any:
        """The config of an env_config dict (RLlib's context keys dropped); InputError naming the key."""
        values = {k: v for k, v in dict(config or {}).items() if k not in RLLIB_CONTEXT_KEYS}
        return validate(cls, values, cls.ENV_LABEL, prefix="env_config.")

    @field_validator("calendar", mode="before")
    @classmethod
    def _known_calendar(cls, value: object) -> str | float | None:
        return None if value is None else parse_calendar(value)

    @field_validator("features")
    @classmethod
    def _known_features(cls, value: list[Any]) -> list[Any]:
        parse_features_json(json.dumps(value, sort_keys=True, default=str))  # names, parameters, outputs, lags
        return value

    def feature_items(self) -> tuple:
        """The feature list as objects (envs.trading.features.spec)."""
        return parse_features_json(json.dumps(self.features, sort_keys=True, default=str))

    @model_validator(mode="after")
    def _protocol_is_valid(self) -> "BarsConfig":
        self.split_protocol()  # raises on a bad protocol or split_fractions
        return self

    @model_validator(mode="after")
    def _interval_fits_an_episode(self) -> "BarsConfig":
        if self.episode_length is not None and self.episode_length < 2 * self.decision_interval:
            raise ValueError(f"env_config.decision_interval {self.decision_interval} bars leaves fewer than 2 "
                             f"decisions in an episode of episode_length {self.episode_length} bars: use a shorter "
                             "interval or longer episodes")
        return self

    def split_protocol(self) -> Protocol:
        """The protocol whose fold `fold` this env trades: `protocol`, else the holdout `split_fractions`."""
        if self.protocol is not None:
            return Protocol.from_dict(self.protocol, "env_config.protocol")
        return Protocol.from_dict({"type": "holdout", "fractions": list(self.split_fractions)},
                                  "env_config.split_fractions")
