"""Statistics over a fixed look-back: the value at bar t is computed from exactly the last `w` values, in time order.

Why not pandas' rolling windows: they update running sums as the window slides, so a value at bar t carries
rounding from every bar before the window, and a computation over the last N bars (what a served policy has)
differs from one over the whole history in the last bits. Here every value is an elementwise sum of the
window's values, oldest first, so it depends on the window's values only and is the same bits whether the series
holds 200 bars or 20,000 (tests/unit/test_bars_policy.py checks the served observation against the env's on
every bar of a test window). Values before the first full window are NaN (not known yet).
"""
from __future__ import annotations

import numpy as np


def window_sum(values: np.ndarray, window: int) -> np.ndarray:
    """Sum of the last `window` values at each row (oldest first); NaN before the first full window."""
    n = len(values)
    out = np.full(n, np.nan)
    if window < 1 or n < window:
        return out
    total = values[:n - window + 1].astype(np.float64, copy=True)
    for lag in range(1, window):
        total += values[lag:n - window + 1 + lag]
    out[window - 1:] = total
    return out


def window_mean(values: np.ndarray, window: int) -> np.ndarray:
    """Mean of the last `window` values at each row; NaN before the first full window."""
    return window_sum(values, window) / window


def window_std(values: np.ndarray, window: int) -> np.ndarray:
    """Sample standard deviation (ddof 1) of the last `window` values at each row, from their mean in two passes;
    NaN before the first full window."""
    n = len(values)
    out = np.full(n, np.nan)
    if window < 2 or n < window:
        return out
    mean = window_mean(values, window)[window - 1:]
    squares = (values[:n - window + 1] - mean) ** 2
    for lag in range(1, window):
        squares += (values[lag:n - window + 1 + lag] - mean) ** 2
    out[window - 1:] = np.sqrt(squares / (window - 1))
    return out


def lagged_difference(values: np.ndarray) -> np.ndarray:
    """values[t] - values[t-1]; NaN at the first row."""
    out = np.full(len(values), np.nan)
    out[1:] = values[1:] - values[:-1]
    return out
