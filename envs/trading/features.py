"""Causal market features: the value at bar t uses bars 0..t only.

Features are normalized with mean/std fitted on the training rows only, so neither the
validation nor the test period leaks into what the agent sees. Results are memoized by
a content hash: many env copies in one process (vectorized envs, env runners) share one
computation.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pandas as pd

FEATURE_NAMES = (
    "log_return",       # log(close_t / close_{t-1})
    "range",            # (high - low) / close
    "body",             # (close - open) / open
    "volatility_24",    # std of the last 24 log returns
    "trend_24",         # close / SMA(24) - 1
    "trend_96",         # close / SMA(96) - 1
    "rsi_14",           # RSI(14) rescaled to [-1, 1]
    "volume_z_96",      # log volume against its trailing 96-bar mean and std
)
WARMUP_BARS = 96  # the longest look-back above: earlier rows are not valid observations
_CLIP = 10.0
_cache: dict[str, "FeatureSet"] = {}


@dataclass(frozen=True)
class FeatureSet:
    """Normalized features (n_bars, n_features) and the statistics used to normalize them."""

    values: np.ndarray
    mean: np.ndarray
    std: np.ndarray


def _raw_features(bars: pd.DataFrame) -> np.ndarray:
    close = bars["close"]
    log_close = np.log(close)
    log_return = log_close.diff().fillna(0.0)
    gain = log_return.clip(lower=0).rolling(14, min_periods=1).mean()
    loss = (-log_return.clip(upper=0)).rolling(14, min_periods=1).mean()
    rsi = (gain - loss) / (gain + loss).replace(0.0, np.nan)
    log_volume = np.log1p(bars["volume"])
    volume_mean = log_volume.rolling(96, min_periods=2).mean()
    volume_std = log_volume.rolling(96, min_periods=2).std().replace(0.0, np.nan)
    columns = [
        log_return,
        (bars["high"] - bars["low"]) / close,
        (close - bars["open"]) / bars["open"],
        log_return.rolling(24, min_periods=2).std(),
        close / close.rolling(24, min_periods=1).mean() - 1.0,
        close / close.rolling(96, min_periods=1).mean() - 1.0,
        rsi,
        (log_volume - volume_mean) / volume_std,
    ]
    return np.nan_to_num(np.column_stack([c.to_numpy(dtype=np.float64) for c in columns]))


def compute_features(bars: pd.DataFrame, fit_rows: slice) -> FeatureSet:
    """Causal features for every bar, z-scored with statistics of `fit_rows` (the train split)."""
    key = hashlib.sha1(
        pd.util.hash_pandas_object(bars, index=True).to_numpy().tobytes()
        + repr((fit_rows.start, fit_rows.stop)).encode()
    ).hexdigest()
    if key not in _cache:
        raw = _raw_features(bars)
        fit = raw[fit_rows]
        mean = fit.mean(axis=0)
        std = np.where(fit.std(axis=0) > 1e-12, fit.std(axis=0), 1.0)
        values = np.clip((raw - mean) / std, -_CLIP, _CLIP).astype(np.float32)
        _cache[key] = FeatureSet(values=values, mean=mean, std=std)
    return _cache[key]
