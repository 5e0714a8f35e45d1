"""The inputs of a universe that no single asset's bars give: features ranked or z-scored across the assets at each
bar, and each window's prices divided by its last close (Jiang, Xu & Liang 2017).

The env's market (envs.portfolio.market) and the served reader (envs.portfolio.universe_reader) both call these
functions on arrays of the same layout, so a served model reads the backtest's numbers
(tests/unit/test_portfolio_inputs.py). Each reads only the rows it is given: a value at bar t comes from bar t's
features of every asset (a cross-section) or from the window ending at t (the prices), never from bar t+1.
"""
from __future__ import annotations

import numpy as np

from envs.trading.features.matrix import CLIP

WINDOW_NORMALIZATIONS = ("none", "last_close")
# The price columns of `last_close`, close first (the divisor is each window's last close): OHLCV universes give the
# bar's range too, close-only ones (the OLPS data sets) the close alone.
OHLC_PRICES = ("close", "high", "low")
CLOSE_PRICES = ("close",)
ZERO_SPREAD = 1e-12  # a cross-section whose std is at most this has no spread: every asset's z-score is 0


def price_columns(close_only: bool) -> tuple[str, ...]:
    return CLOSE_PRICES if close_only else OHLC_PRICES


def cross_sectional(values: np.ndarray, mode: str) -> np.ndarray:
    """`values` (rows, assets) ranked or z-scored across the assets of each row whose value is finite; NaN where
    the value is not. rank: average ranks of ties, scaled to [-1, 1] (-1 the lowest, 1 the highest, 0 the middle;
    0 when one asset has a value); zscore: (x - mean) / std over the row's finite values (population std; 0 when
    it is 0)."""
    values = np.ascontiguousarray(values, dtype=np.float64)
    finite = np.isfinite(values)
    count = finite.sum(axis=1, keepdims=True)
    out = _rank(values, finite, count) if mode == "rank" else _zscore(values, finite, count)
    return np.where(finite, out, np.nan)


def _rank(values: np.ndarray, finite: np.ndarray, count: np.ndarray) -> np.ndarray:
    """scipy's average ranks over each row's finite values (1..count), scaled to [-1, 1]; 0 where one value is known."""
    from scipy.stats import rankdata  # here: scipy.stats takes a while to import, and only a ranked feature needs it

    ranks = rankdata(values, method="average", axis=1, nan_policy="omit")
    return np.where(count > 1, 2.0 * (ranks - 1.0) / np.maximum(count - 1, 1) - 1.0, 0.0)


def _zscore(values: np.ndarray, finite: np.ndarray, count: np.ndarray) -> np.ndarray:
    divisor = np.maximum(count, 1)
    mean = np.where(finite, values, 0.0).sum(axis=1, keepdims=True) / divisor
    spread = np.where(finite, values - mean, 0.0)
    std = np.sqrt((spread * spread).sum(axis=1, keepdims=True) / divisor)
    return np.divide(spread, std, out=np.zeros_like(spread), where=std > ZERO_SPREAD)


def apply_cross_sections(features: np.ndarray, modes: tuple[str | None, ...]) -> np.ndarray:
    """Raw features (assets, rows, columns), NaN where unknown, with every column that has a mode replaced by its
    cross-section at each row (a new array; the other columns as given)."""
    out = features.copy()
    for column, mode in enumerate(modes):
        if mode:
            out[:, :, column] = cross_sectional(features[:, :, column].T, mode).T
    return out


def last_close_window(prices: np.ndarray) -> np.ndarray:
    """Each asset's window of prices (assets, window, columns; the close first; NaN where it has no bar) divided by
    the window's last close, bar-major, clipped at the observation's bound: an asset without a close at the
    window's end (not listed there) is all 0, and so is each bar before it was listed."""
    ratios = prices / prices[:, -1:, :1]  # NaN stays NaN quietly; prices are positive where listed
    np.clip(ratios, 0.0, CLIP, out=ratios)
    ratios[np.isnan(ratios)] = 0.0
    return ratios.reshape(len(prices), -1).astype(np.float32)
