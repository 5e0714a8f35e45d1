"""The trading features of the bundled bars, computed as a run computes them, for `python -m experiments.cross_cpu`:
numpy and TA-Lib on real bars (RSI, ATR, log returns), normalized on the first half as a fold's train part is."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from envs.ability_types import NumericProbe

BUNDLED_BARS = Path(__file__).resolve().parents[2] / "data" / "raw" / "BTC-USD_1h.parquet"
PROBED_FEATURES = ["basic", {"ta": "RSI", "timeperiod": 14}, {"ta": "ATR"}, "log_return"]


def feature_probe() -> NumericProbe:
    from envs.trading.data import load_bars
    from envs.trading.features.matrix import build_raw, normalize
    from envs.trading.features.spec import parse_features

    bars = load_bars(BUNDLED_BARS)
    raw = build_raw(parse_features(PROBED_FEATURES), bars, "1h", "fingerprint")
    features = normalize(raw, slice(0, len(bars) // 2)).values
    return NumericProbe(features, raw.warmup, np.diff(np.log(bars["close"].to_numpy())))
