"""Plain transforms of one market's bars, by name, and the named feature sets built from them.

A transform is a causal pandas expression of the bars (value at bar t from bars up to t). Its rolling
windows are partial at the start (`min_periods`), so it has a value from the first bars on; its warm-up
is the row of its first *complete* value (`first_valid`): the window full, and for functions of log
returns one more bar, since the first return needs a previous close. These are the expressions of the
eight features every earlier round used, unchanged to the bit, so the set `basic` reproduces their
verdicts; TA-Lib's indicators come through `envs.trading.features.talib_functions` instead.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd

# What a transform may read: a bars frame's columns, and two derived ones.
INPUTS = ("open", "high", "low", "close", "volume", "log_close", "log_volume")


def _log_return(close: pd.Series) -> pd.Series:
    return np.log(close).diff().fillna(0.0)


def _input(frame: pd.DataFrame, name: str) -> pd.Series:
    if name == "log_close":
        return np.log(frame["close"])
    if name == "log_volume":
        return np.log1p(frame["volume"])
    return frame[name]


def _log_rsi(frame: pd.DataFrame, window: int) -> pd.Series:
    log_return = _log_return(frame["close"])
    gain = log_return.clip(lower=0).rolling(window, min_periods=1).mean()
    loss = (-log_return.clip(upper=0)).rolling(window, min_periods=1).mean()
    return (gain - loss) / (gain + loss).replace(0.0, np.nan)


def _zscore(series: pd.Series, window: int) -> pd.Series:
    mean = series.rolling(window, min_periods=2).mean()
    std = series.rolling(window, min_periods=2).std().replace(0.0, np.nan)
    return (series - mean) / std


@dataclass(frozen=True)
class Transform:
    """One named transform: its parameters with defaults, the bar columns it reads, its expression and the row
    of its first complete value."""

    doc: str
    needs: tuple[str, ...]
    compute: Callable[..., pd.Series]
    first_valid: Callable[..., int]
    params: tuple[tuple[str, Any], ...] = ()  # (name, default) in the order they name the column

    def column(self, name: str, values: dict[str, Any]) -> str:
        """The column's name: the transform's and its window, e.g. trend_96 (an input other than close too)."""
        parts = [name] + [str(values[key]) for key, default in self.params if key != "input" or values[key] != default]
        return "_".join(parts)


TRANSFORMS: dict[str, Transform] = {
    "log_return": Transform("log(close_t / close_t-1)", ("close",),
                            lambda f: _log_return(f["close"]), lambda: 1),
    "change": Transform("close_t - close_t-1 (for outside series that may be zero or negative)", ("close",),
                        lambda f: f["close"].diff().fillna(0.0), lambda: 1),
    "value": Transform("the value itself (for outside series already on a stable scale, e.g. a funding rate)",
                       ("close",), lambda f: f["close"], lambda: 0),
    "range": Transform("(high - low) / close", ("high", "low", "close"),
                       lambda f: (f["high"] - f["low"]) / f["close"], lambda: 0),
    "body": Transform("(close - open) / open", ("open", "close"),
                      lambda f: (f["close"] - f["open"]) / f["open"], lambda: 0),
    "volatility": Transform("std of the last `window` log returns", ("close",),
                            lambda f, window: _log_return(f["close"]).rolling(window, min_periods=2).std(),
                            lambda window: window, (("window", 24),)),
    "trend": Transform("close / SMA(window) - 1", ("close",),
                       lambda f, window: f["close"] / f["close"].rolling(window, min_periods=1).mean() - 1.0,
                       lambda window: window - 1, (("window", 24),)),
    "log_rsi": Transform("RSI of log returns over `window` bars, rescaled to [-1, 1] (simple means, not Wilder's)",
                         ("close",), _log_rsi, lambda window: window, (("window", 14),)),
    "volume_z": Transform("log volume against its trailing `window`-bar mean and std", ("volume",),
                          lambda f, window: _zscore(np.log1p(f["volume"]), window),
                          lambda window: window - 1, (("window", 96),)),
    "zscore": Transform("`input` against its trailing `window`-bar mean and std (input: close, log_close, volume, ...)",
                        ("close",), lambda f, window, input: _zscore(_input(f, input), window),
                        lambda window, input: window - 1, (("window", 96), ("input", "close"))),
}

# Named sets: lists of feature items, as a user would write them. `basic` is the eight features of every earlier
# round, in their order (log return, range, body, 24-bar volatility, close vs SMA 24 and 96, RSI 14 of log
# returns, volume z-score over 96 bars); with it a run reproduces their results bit for bit.
SETS: dict[str, list[Any]] = {
    "basic": ["log_return", "range", "body", {"transform": "volatility", "window": 24},
              {"transform": "trend", "window": 24}, {"transform": "trend", "window": 96},
              {"transform": "log_rsi", "window": 14}, {"transform": "volume_z", "window": 96}],
}


def compute_transform(name: str, values: dict[str, Any], frame: pd.DataFrame) -> np.ndarray:
    """The transform's column as float64; an undefined value (a flat window's RSI, a constant volume's z-score)
    is 0, as it always was."""
    series = TRANSFORMS[name].compute(frame, **values)
    return np.nan_to_num(series.to_numpy(dtype=np.float64))
