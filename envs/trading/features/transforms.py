"""Plain transforms of one market's bars, by name, and the named feature sets built from them.

A transform's value at bar t is computed from a fixed look-back of bars ending at t (`rolling`): its window, and
for functions of log returns one more bar, since the first return needs a previous close. Its warm-up is the row
of its first value (`first_valid`); rows before it are NaN, not known. So the value at t is the same whether it is
computed over the whole history (the env) or over the last bars a served policy is given. These are the
expressions of the eight features every earlier round used; TA-Lib's indicators come through
`envs.trading.features.talib_functions` instead.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd

from envs.trading.features.rolling import lagged_difference, window_mean, window_std

# What a transform may read: a bars frame's columns, and two derived ones.
INPUTS = ("open", "high", "low", "close", "volume", "log_close", "log_volume")


def _column(frame: pd.DataFrame, name: str) -> np.ndarray:
    return frame[name].to_numpy(dtype=np.float64)


def _log_return(frame: pd.DataFrame) -> np.ndarray:
    return lagged_difference(np.log(_column(frame, "close")))


def _input(frame: pd.DataFrame, name: str) -> np.ndarray:
    if name == "log_close":
        return np.log(_column(frame, "close"))
    if name == "log_volume":
        return np.log1p(_column(frame, "volume"))
    return _column(frame, name)


def _log_rsi(frame: pd.DataFrame, window: int) -> np.ndarray:
    log_return = _log_return(frame)
    gain = window_mean(np.maximum(log_return, 0.0), window)
    loss = window_mean(-np.minimum(log_return, 0.0), window)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (gain - loss) / np.where(gain + loss == 0.0, np.nan, gain + loss)


def _zscore(values: np.ndarray, window: int) -> np.ndarray:
    std = window_std(values, window)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (values - window_mean(values, window)) / np.where(std == 0.0, np.nan, std)


@dataclass(frozen=True)
class Transform:
    """One named transform: its parameters with defaults, the bar columns it reads, its expression and the row
    of its first complete value."""

    doc: str
    needs: tuple[str, ...]
    compute: Callable[..., np.ndarray]
    first_valid: Callable[..., int]
    params: tuple[tuple[str, Any], ...] = ()  # (name, default) in the order they name the column

    def column(self, name: str, values: dict[str, Any]) -> str:
        """The column's name: the transform's and its window, e.g. trend_96 (an input other than close too)."""
        parts = [name] + [str(values[key]) for key, default in self.params if key != "input" or values[key] != default]
        return "_".join(parts)


TRANSFORMS: dict[str, Transform] = {
    "log_return": Transform("log(close_t / close_t-1)", ("close",), _log_return, lambda: 1),
    "change": Transform("close_t - close_t-1 (for outside series that may be zero or negative)", ("close",),
                        lambda f: lagged_difference(_column(f, "close")), lambda: 1),
    "value": Transform("the value itself (for outside series already on a stable scale, e.g. a funding rate)",
                       ("close",), lambda f: _column(f, "close"), lambda: 0),
    "range": Transform("(high - low) / close", ("high", "low", "close"),
                       lambda f: (_column(f, "high") - _column(f, "low")) / _column(f, "close"), lambda: 0),
    "body": Transform("(close - open) / open", ("open", "close"),
                      lambda f: (_column(f, "close") - _column(f, "open")) / _column(f, "open"), lambda: 0),
    "volatility": Transform("std of the last `window` log returns", ("close",),
                            lambda f, window: window_std(_log_return(f), window),
                            lambda window: window, (("window", 24),)),
    "trend": Transform("close / SMA(window) - 1", ("close",),
                       lambda f, window: _column(f, "close") / window_mean(_column(f, "close"), window) - 1.0,
                       lambda window: window - 1, (("window", 24),)),
    "log_rsi": Transform("RSI of log returns over `window` bars, rescaled to [-1, 1] (simple means, not Wilder's)",
                         ("close",), _log_rsi, lambda window: window, (("window", 14),)),
    "volume_z": Transform("log volume against its trailing `window`-bar mean and std", ("volume",),
                          lambda f, window: _zscore(np.log1p(_column(f, "volume")), window),
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
    """The transform's column as float64: NaN before its first value; an undefined value (a flat window's RSI, a
    constant volume's z-score) is 0, as it always was."""
    transform = TRANSFORMS[name]
    with np.errstate(divide="ignore", invalid="ignore"):
        column = np.nan_to_num(np.asarray(transform.compute(frame, **values), dtype=np.float64))
    column[:transform.first_valid(**values)] = np.nan
    return column
