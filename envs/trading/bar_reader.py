"""What a served trading policy reads: the last OHLCV bars, turned into the env's observation bit for bit.

A registered model carries one `BarReader`: the feature list it was trained on, the timeframe, the observation
window, the positions, and the normalization statistics of the train rows of its fold. `read` computes the
features over the last `bars_needed` bars with the env's own code (`envs.trading.features.matrix.build_raw`),
normalizes them with the carried statistics (`apply_normalization`) and appends the held position's one-hot (with
continuous positions the held exposure as one float), as `SpotTradingEnv._observation` does. Every feature's value at a
bar comes from a fixed look-back ending there (`envs.trading.features.rolling`), and the env's first decision comes
after `bars_needed` bars, so the observation is the env's on every bar (tests/unit/test_bars_policy.py and
tests/integration/test_retrain_loop.py check every bar of a test window).

Features that read another series than the bars (`asset:` and `series:` blocks) cannot come from bars alone:
such a reader keeps only the reason, and `read` refuses in one line.

A served model is stateless per request, so a model trained with `min_hold` (a position held for at least that many
decisions) is told the held position's age by the request: a `held_for` column beside `position` (the decisions it
has been held; `min_hold` or more for a new account). `decide` applies the env's rule
(`envs.trading.positions.hold_rule`) and answers the asked action, the applied one and the age to send next time; a
request without `held_for` is refused in one line rather than answered without the rule.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from envs.errors import InputError
from envs.reader_file import FeatureWindowReader, load_reader, save_reader
from envs.trading.calendar import ALL_WEEK, bars_per_year, closed_bars_between
from envs.trading.data import GAPS_KEPT, timeframe_delta
from envs.trading.features.matrix import apply_normalization, bars_needed, build_raw
from envs.trading.positions import (
    EXPOSURE_BOUNDS,
    POSITION_SETS,
    exposure_target,
    hold_rule,
    is_continuous,
    policy_action,
)

BAR_COLUMNS = ("open", "high", "low", "close", "volume")
FORMAT = "rlplatform-bar-reader/1"


@dataclass(frozen=True)
class BarReader(FeatureWindowReader):
    """The last bars -> one observation of the env a policy was trained in (see the module docstring)."""

    features: list[Any]
    timeframe: str
    window: int
    positions: tuple[float, ...]         # the discrete set by action index; continuous: the exposure's (low, high)
    symbol: str
    feature_bars: int = 0                # bars the features' look-back needs at the last bar
    # How the env traded, so paper trading (envs.trading.paper) fills as the backtest did
    decision_interval: int = 1
    fee_bps: float = 0.0
    slippage_bps: float = 0.0
    maintenance_margin: float = 0.1
    # "discrete": the action indexes `positions`; "continuous": it is the target exposure (readers saved before
    # continuous positions existed are discrete). min_trade: a target this close to the held one is not traded.
    position_mode: str = "discrete"
    min_trade: float = 0.0
    # Discrete positions: a position is held for at least this many decisions (1: no minimum; readers saved before
    # min_hold existed have none)
    min_hold: int = 1
    # What the policy was trained and scored on (ISO bar times): where a forward test may start, the backtest's window
    data_start: str = ""
    data_end: str = ""
    test_start: str = ""
    test_end: str = ""
    mean: np.ndarray = field(default_factory=lambda: np.zeros(0))
    std: np.ndarray = field(default_factory=lambda: np.ones(0))
    refusal: str = ""                    # why bars alone cannot give this policy's observation ("" when they can)
    # The gap policy of the bars it was trained on: "drop" (holes kept on purpose, as equity bars have them) lets it
    # read bars with holes, stepped over as the env steps over them. Bars whose `gaps` column says "drop" (paper
    # trading on a file imported with --gaps drop) are read so too.
    gaps: str = "ffill"
    # The calendar of the bars it was trained on (envs.trading.calendar): weekdays reads bars without weekends as
    # consecutive, as the env stepped over them. bars_per_year: what its backtest was annualized with, so paper
    # trading's rolling Sharpe and a forward test are scaled alike (0: a reader saved before it was recorded).
    calendar: str = ALL_WEEK
    bars_per_year: float = 0.0

    @classmethod
    def for_env_config(cls, env_config: dict[str, Any]) -> "BarReader":
        """The reader of the env a policy was trained in: its fold's train-row normalization included."""
        from envs.trading.env import TradingConfig, load_market

        cfg = TradingConfig.from_dict(env_config)
        market = load_market(cfg)
        needed, other = bars_needed(cfg.feature_items(), market.timeframe)
        stamps, (test_lo, test_hi) = market.timestamps, market.bounds["test"]
        common = {"features": list(cfg.features), "timeframe": market.timeframe, "window": cfg.window,
                  "positions": POSITION_SETS.get(cfg.positions) or EXPOSURE_BOUNDS[cfg.positions],
                  "position_mode": "continuous" if is_continuous(cfg.positions) else "discrete",
                  "symbol": market.symbol, "decision_interval": cfg.decision_interval, "fee_bps": cfg.fee_bps,
                  "slippage_bps": cfg.slippage_bps, "maintenance_margin": cfg.maintenance_margin,
                  "min_trade": cfg.min_trade, "min_hold": cfg.hold_decisions, "gaps": market.gaps,
                  "calendar": market.calendar, "bars_per_year": market.bars_per_year, "data_start": _iso(stamps[0]),
                  "data_end": _iso(stamps[-1]),
                  # a refit (envs.splits) has no test window: ""
                  "test_start": _iso(stamps[test_lo]) if test_hi > test_lo else "",
                  "test_end": _iso(stamps[test_hi - 1]) if test_hi > test_lo else ""}
        if needed is None:
            return cls(**common, refusal=f"its features read another series than the bars ({other}): predict "
                                         "takes this model's observations, not bars")
        return cls(**common, feature_bars=needed, mean=market.feature_mean, std=market.feature_std)

    def describe(self) -> str:
        """What the model takes, as a clause whose subject is the model ("it reads ...", "it takes ..."): the
        registration line, the model's description, its `inputs` tag and the serving command's line."""
        if self.refusal:
            return f"takes observations only: {self.refusal}"
        held = (f" and the held position's held_for (min_hold {self.min_hold} decisions)" if self.min_hold > 1
                else "")
        return (f"reads the last {self.bars_needed} {self.timeframe} bars of {self.symbol} (features' look-back "
                f"{self.feature_bars} + window {self.window} - 1){held}")

    def tags(self) -> dict[str, str]:
        """Model version tags: what it reads, and the data it was trained and scored on."""
        return {"inputs": self.describe(), "data_start": self.data_start, "data_end": self.data_end,
                "test_start": self.test_start, "test_end": self.test_end, "symbol": self.symbol,
                "timeframe": self.timeframe}

    def save(self, path: str | Path) -> None:
        config = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("mean", "std")}
        save_reader(path, {**config, "positions": list(self.positions)}, FORMAT, self.mean, self.std)

    @classmethod
    def load(cls, path: str | Path) -> "BarReader":
        config, mean, std = load_reader(path, FORMAT, "bar reader")
        return cls(**{**config, "positions": tuple(config["positions"])}, mean=mean, std=std)

    def periods_per_year(self, bars: pd.DataFrame) -> float:
        """The bars a year its backtest was annualized with; for a reader saved before they were recorded, those of
        `bars` (their recorded calendar, else the one they show)."""
        return self.bars_per_year or bars_per_year(bars.index, self.timeframe, bars.attrs.get("calendar"))

    @property
    def continuous(self) -> bool:
        """Whether the policy's action is the target exposure itself (else an index of `positions`)."""
        return self.position_mode == "continuous"

    def read(self, bars: pd.DataFrame, position: float = 0.0) -> tuple[np.ndarray, pd.Timestamp]:
        """The observation (1, d) after the last bar's close, holding `position`; and the last bar's open time.
        InputError in one line for what does not fit the model (columns, spacing, too few bars, symbol)."""
        if self.refusal:
            raise InputError(f"this model cannot read bars: {self.refusal}")
        held = self._held(position)
        frame = self._checked(bars)
        raw = build_raw(self._items, frame, self.timeframe, "model features")
        rows = apply_normalization(raw.values[-self.window:], self.mean, self.std)
        return np.concatenate([rows.reshape(-1), held])[None, :], frame.index[-1]

    def _held(self, position: float) -> np.ndarray:
        """The held position's columns of the observation, as the env writes them: the exposure itself, or the
        one-hot over the set. A position the model could not hold is refused in one line."""
        if self.continuous:
            low, high = self.positions
            if not low <= position <= high:  # also refuses NaN
                raise InputError(f"position {position:g} is outside this model's exposure bounds [{low:g}, {high:g}]")
            return np.array([position], dtype=np.float32)
        if position not in self.positions:
            raise InputError(f"position {position:g} is not one of this model's positions "
                             f"({', '.join(f'{p:g}' for p in self.positions)})")
        one_hot = np.zeros(len(self.positions), dtype=np.float32)
        one_hot[self.positions.index(position)] = 1.0
        return one_hot

    @staticmethod
    def accepts(model_input: Any) -> bool:
        """Whether a model's input is bars (a frame with a close column), not observations."""
        return isinstance(model_input, pd.DataFrame) and "close" in model_input.columns

    def decide(self, bars: pd.DataFrame, policy: Callable[[np.ndarray], np.ndarray]) -> pd.DataFrame:
        """The policy's decision after the last bar's close: the action, the target position, the bar it was
        decided on and the open it fills at (the next bar's). A `position` column's last value is the held position
        (flat when there is none). A continuous action is the exposure the policy gave; the target is it clipped into
        the bounds, as the env clips it. With min_hold, a `held_for` column's last value is the held position's age in
        decisions; the answer adds the applied action (the held one while it is younger than min_hold) and the age
        after this decision (what the next request sends)."""
        held = float(bars["position"].iloc[-1]) if "position" in bars.columns else 0.0
        observation, bar_time = self.read(bars, held)
        chosen = policy_action(policy(observation), self.continuous)
        hold: dict[str, list[int]] = {}
        if self.continuous:
            action, target = float(chosen[0]), exposure_target(chosen, *self.positions)
        elif self.min_hold > 1:
            applied, held_for = hold_rule(chosen, self.positions.index(held), self._held_for(bars), self.min_hold)
            action, target = chosen, self.positions[int(applied)]
            hold = {"applied_action": [int(applied)], "held_for": [int(held_for)]}
        else:
            action, target = chosen, self.positions[chosen]
        return pd.DataFrame({"action": [action], "target_position": [target], **hold,
                             "bar_time": [bar_time.isoformat()],
                             "applies_from": [(bar_time + timeframe_delta(self.timeframe)).isoformat()]})

    def _held_for(self, bars: pd.DataFrame) -> int:
        """The held position's age in decisions, from the request's `held_for` column; refused in one line when it is
        missing or not a whole number of 1 or more (the model would otherwise decide without its min_hold)."""
        if "held_for" not in bars.columns:
            raise InputError(f"this model holds a position for at least min_hold {self.min_hold} decisions: give a "
                             f"held_for column beside position (the decisions the held position has been held; "
                             f"{self.min_hold} or more for a new account)")
        given = bars["held_for"].iloc[-1]
        given = given.item() if isinstance(given, np.generic) else given  # shown as written: 0, not np.int64(0)
        try:
            value = float(given)
        except (TypeError, ValueError):
            value = math.nan
        if not (value >= 1 and value.is_integer()):  # also refuses NaN
            raise InputError(f"held_for {given!r} is not a whole number of decisions of 1 or more")
        return int(value)

    def _checked(self, bars: pd.DataFrame) -> pd.DataFrame:
        missing = [column for column in BAR_COLUMNS if column not in bars.columns]
        if missing:
            raise InputError(f"bars need the columns {', '.join(BAR_COLUMNS)} and a timestamp; missing: "
                             f"{', '.join(missing)}")
        if "symbol" in bars.columns and set(bars["symbol"].astype(str)) != {self.symbol}:
            other = min(set(bars["symbol"].astype(str)) - {self.symbol})
            raise InputError(f"bars of {other}: this model trades {self.symbol}")
        frame = bars.set_index("timestamp") if "timestamp" in bars.columns else bars
        try:
            index = pd.DatetimeIndex(pd.to_datetime(frame.index, utc=True))
        except (ValueError, TypeError):
            raise InputError("bars need a timestamp column (or index) of bar open times") from None
        frame = pd.DataFrame({c: pd.to_numeric(frame[c], errors="coerce").to_numpy(dtype=np.float64)
                              for c in BAR_COLUMNS}, index=index.rename("timestamp"))
        if len(frame) < self.bars_needed:
            raise InputError(f"the model needs the last {self.bars_needed} {self.timeframe} bars (features' look-back "
                             f"{self.feature_bars} + window {self.window} - 1); got {len(frame)}")
        holes_recorded = self.gaps == GAPS_KEPT or (
            "gaps" in bars.columns and set(bars["gaps"].astype(str)) == {GAPS_KEPT})
        frame = frame.iloc[-self.bars_needed:]
        self._check_spacing(frame.index, holes_recorded)
        values = frame.to_numpy()
        bad = (~np.isfinite(values)).any(axis=1) | (values[:, :4] <= 0).any(axis=1)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise InputError(f"bars must hold finite positive prices and a finite volume: the bar at "
                             f"{frame.index[row]} does not")
        return frame

    def _check_spacing(self, index: pd.DatetimeIndex, holes_recorded: bool) -> None:
        """Bars oldest first, one timeframe apart (a weekdays reader: Friday's last bar and Monday's first too); or,
        where holes are recorded (`gaps: drop`), whole numbers of timeframes apart: the env steps over such a hole as
        from one bar to the next, and so does the reader (the last `bars_needed` rows still hold every feature's
        look-back: a higher timeframe's period holds at most its ratio of base bars, holes or not)."""
        step = np.timedelta64(timeframe_delta(self.timeframe))
        deltas = np.asarray(index[1:] - index[:-1])
        if holes_recorded:
            wrong = (deltas <= np.timedelta64(0)) | (deltas % step != np.timedelta64(0))
        else:
            wrong = deltas != step * (1 + closed_bars_between(index, self.timeframe, self.calendar))
        if wrong.any():
            at = int(np.flatnonzero(wrong)[0]) + 1
            spacing = "whole numbers of" if holes_recorded else "consecutive"
            hint = "" if holes_recorded else (" (a hole is read only from bars imported with --gaps drop: a gaps "
                                              "column of 'drop')")
            raise InputError(f"bars must be {spacing} {self.timeframe} bars, oldest first: {index[at]} follows "
                             f"{index[at - 1]}{hint}")


def _iso(stamp: Any) -> str:
    return pd.Timestamp(stamp).isoformat()
