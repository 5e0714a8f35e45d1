"""What every env that trades bars is configured by: how its bars are cut in time, when it decides, what it pays,
what it sees and how its reward is scaled. `trading/Spot-v0` (one coin) and `trading/Portfolio-v0` (a universe)
add their own keys to it."""
from __future__ import annotations

import json
from typing import Any, ClassVar

from pydantic import ConfigDict, Field, field_validator, model_validator

from envs.splits import Protocol
from envs.trading.calendar import parse_calendar
from envs.trading.features.spec import cross_section_refusal, parse_features_json
from envs.validation import StrictModel, validate

# Keys RLlib adds to every env_config it hands an env (EnvContext); they are not the user's settings.
RLLIB_CONTEXT_KEYS = ("worker_index", "vector_index", "num_workers", "remote")


class BarsConfig(StrictModel):
    """The keys shared by the trading families; built from an env_config dict with `from_dict`."""

    model_config = ConfigDict(frozen=True)
    ENV_LABEL: ClassVar[str] = "trading env"  # how refusals name the env
    # Whether the family trades a universe, whose features may be ranked across its assets (`cross_section:`)
    CROSS_SECTIONAL: ClassVar[bool] = False

    calendar: str | float | None = Field(
        default=None,
        description="How many bars make a year, for every annualized figure (envs.trading.calendar): 24/7 (365 days "
                    "of bars), weekdays (weekends closed), an exchange code such as XNYS (its weekends and holidays "
                    "closed; daily bars: its sessions a year) or the number itself. None: the data's own (the file's "
                    "metadata, else detected); a calendar that closes days holding bars is refused.")
    split_fractions: tuple[float, ...] = Field(
        default=(0.7, 0.15, 0.15),
        description="The holdout split's (train, validation, test) fractions of the bars, in time order; unused (and "
                    "refused) when evaluation.protocol cuts folds.")
    protocol: dict[str, Any] | str | None = Field(
        default=None,
        description="The time splits as an envs.splits.Protocol mapping; the platform fills it from "
                    "evaluation.protocol, so a file rarely sets it. None: the holdout split_fractions.")
    fold: int = Field(default=0, ge=0,
                      description="Which fold of the protocol this env trades; the platform sets it per trial.")
    decision_interval: int = Field(
        default=1, ge=1,
        description="Bars between decisions: the agent decides every this many bars and holds in between (one env "
                    "step; the reward is the log equity change over them). 1 decides every bar; longer trades less.")
    window: int = Field(default=24, ge=1,
                        description="Bars of history the agent sees at each decision.")
    episode_length: int | None = Field(
        default=720, ge=2,
        description="Bars per training episode (a random window of the train part); None: walk the whole split.")
    fee_bps: float = Field(default=10.0, ge=0, lt=10_000,
                           description="Fee in basis points of the notional traded (10,000 would be all of it).")
    slippage_bps: float = Field(default=2.0, ge=0, lt=10_000,
                                description="Slippage in basis points of the notional traded, paid on top of the fee.")
    reward_scale: float = Field(default=100.0, gt=0,
                                description="The log equity change is multiplied by this to give the reward, so "
                                            "rewards are of a size networks learn well from.")
    features: list[Any] = Field(
        default_factory=list,
        description="What the agent sees of each bar: feature sets, transforms, TA-Lib functions and blocks (higher "
                    "timeframes, other markets, outside series), envs.trading.features.spec; each family has its "
                    "default.")
    feature_store: str | None = Field(
        default=None,
        description="Where computed feature matrices are cached by content (a folder or s3:// URI); the platform sets "
                    "it to the run's storage root + features/. None: computed once per process.")

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
        items = parse_features_json(json.dumps(value, sort_keys=True, default=str))  # names, parameters, outputs, lags
        if not cls.CROSS_SECTIONAL:
            cross_section_refusal(items)
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
