"""`features`: featurizing 20,000 bars with 30 TA-Lib indicators, and a feature-store hit against loading the bars.

Platform: the trading env's feature path (envs.trading.features): read the list, measure each indicator's unstable
period (first call in the process), compute every column causally, scale price levels to the close, align. Peer:
the same 30 TA-Lib functions called directly on the same arrays, nothing else: the ratio is what the platform
adds to TA-Lib. Second row: reading the computed matrix back from the feature store against reading the bars'
parquet, which every env does anyway (the store must cost less than that).
"""
from __future__ import annotations

import tempfile
import time

import numpy as np

from experiments.benchmark.common import REPO, Budget, Figure, Report

INDICATORS = [
    {"ta": "RSI"}, {"ta": "MACD"}, {"ta": "BBANDS"}, {"ta": "ATR"}, {"ta": "ADX"}, {"ta": "CCI"}, {"ta": "MFI"},
    {"ta": "STOCH"}, {"ta": "STOCHRSI"}, {"ta": "WILLR"}, {"ta": "ROC"}, {"ta": "MOM"},
    {"ta": "EMA", "timeperiod": 12}, {"ta": "EMA", "timeperiod": 26}, {"ta": "SMA", "timeperiod": 50},
    {"ta": "SMA", "timeperiod": 200}, {"ta": "KAMA"}, {"ta": "TEMA"}, {"ta": "DEMA"}, {"ta": "T3"}, {"ta": "SAR"},
    {"ta": "NATR"}, {"ta": "AROON"}, {"ta": "ULTOSC"}, {"ta": "TRIX"}, {"ta": "PPO"}, {"ta": "CMO"},
    {"ta": "ADOSC"}, {"ta": "HT_TRENDLINE"}, {"ta": "LINEARREG_SLOPE"},
]
BARS_FILE = REPO / "data" / "raw" / "BTC-USD_1h.parquet"


def _best(function, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return min(times)


def talib_inputs(bars) -> dict[str, np.ndarray]:
    """Bars (a pandas frame) as the float64 arrays TA-Lib takes, one per column."""
    return {c: bars[c].to_numpy(dtype=np.float64) for c in bars.columns}


def talib_alone(arrays: dict[str, np.ndarray]) -> None:
    """The 30 indicators called on TA-Lib directly over the whole series, nothing else: this benchmark's peer, and the
    `reference` benchmark's figure (one definition, so the peer times in old results are reference speeds too)."""
    from talib import abstract

    for item in INDICATORS:
        function = abstract.Function(item["ta"])
        function.set_parameters({k: v for k, v in item.items() if k != "ta"})
        function(arrays)


def run(budget: Budget) -> Report:
    from envs.trading.data import load_bars
    from envs.trading.features.matrix import build_raw
    from envs.trading.features.spec import parse_features
    from envs.trading.features.store import FeatureStore

    repeats = 2 if budget.quick else 5
    bars = load_bars(BARS_FILE)
    started = time.perf_counter()
    raw = build_raw(parse_features(INDICATORS), bars, "1h", "features")  # first call: unstable periods measured
    cold = time.perf_counter() - started
    warm = _best(lambda: build_raw(parse_features(INDICATORS), bars, "1h", "features"), repeats)
    arrays = talib_inputs(bars)
    peer = _best(lambda: talib_alone(arrays), repeats)
    with tempfile.TemporaryDirectory() as folder:
        store = FeatureStore(folder)
        store.put("bench", raw)
        hit = _best(lambda: store.get("bench"), repeats)
    parquet = _best(lambda: load_bars(BARS_FILE), repeats)
    columns = raw.values.shape[1]
    return Report("features", __doc__.splitlines()[0], "envs.trading.features", "TA-Lib alone / the bars' parquet", [
        Figure(f"featurize {len(bars):,} bars, 30 TA-Lib indicators ({columns} columns), first call in a process",
               "s", cold, peer, higher_is_better=False, target="<= 1 s", met=cold <= 1.0,
               note="includes measuring each indicator's unstable period (cached per process)"),
        Figure("the same, once the unstable periods are known", "s", warm, peer, higher_is_better=False,
               target="<= 1 s", met=warm <= 1.0),
        Figure(f"feature store hit ({columns} columns) vs loading the bars' parquet", "s", hit, parquet,
               higher_is_better=False, target="< 1.00x", met=hit < parquet),
    ], {"bars": len(bars), "columns": columns, "indicators": [i["ta"] for i in INDICATORS]})
