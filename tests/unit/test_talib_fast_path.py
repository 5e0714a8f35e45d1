"""The fast TA-Lib path gives the per-bar calls' bits: every whole-series function and every replay, on the bundled
bars and on markets that are not from the repo (other scales, gaps, flat stretches, zero volume, integer prices with
ties, a series shorter than the look-back), compared as float64 bits with NaN in the same places.

Also: the emulated fused multiply-add is correctly rounded (against exact rational arithmetic), inputs a replay is
not exact for take the per-bar path, and a fast result that disagrees with the per-bar call is not used.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from envs.trading.data import load_bars
from envs.trading.features import fast_path
from envs.trading.features.exact_fma import fma
from envs.trading.features.fast_path import WHOLE_SERIES, fast_outputs
from envs.trading.features.replay import REPLAYS, replay
from envs.trading.features.talib_functions import TaFeature, _lookback, input_columns, per_bar_outputs
from tests.conftest import REPO

Market = dict[str, np.ndarray]


def _walk(n: int, seed: int, scale: float) -> Market:
    rng = np.random.default_rng(seed)
    close = scale * np.exp(np.cumsum(rng.normal(0.0, 0.02, n)))
    open_ = np.r_[close[0], close[:-1]] * np.exp(rng.normal(0.0, 0.002, n))
    high = np.maximum(open_, close) * np.exp(np.abs(rng.normal(0.0, 0.006, n)))
    low = np.minimum(open_, close) * np.exp(-np.abs(rng.normal(0.0, 0.006, n)))
    return {"open": open_, "high": high, "low": low, "close": close, "volume": np.round(np.exp(rng.normal(8, 1, n)))}


def _with_gaps_and_flats(market: Market) -> Market:
    """A price gap, a stretch of identical bars (every range and change exactly zero) and bars without volume."""
    out = {key: values.copy() for key, values in market.items()}
    n = len(out["close"])
    for key in ("open", "high", "low", "close"):
        out[key][n // 2:] *= 1.7
        out[key][n // 5:n // 5 + 120] = out["close"][n // 5 - 1]
    out["volume"][n // 3:n // 3 + 60] = 0.0
    return out


def _markets() -> dict[str, Market]:
    bars = load_bars(REPO / "data" / "raw" / "BTC-USD_1h.parquet").iloc[-1000:]
    integers = {key: np.round(values * (1.0 if key == "volume" else 100.0))
                for key, values in _walk(600, 3, 50.0).items()}
    return {
        "bundled": {column: bars[column].to_numpy(dtype=np.float64) for column in bars.columns},
        "tiny prices, gaps, flats": _with_gaps_and_flats(_walk(900, 1, 0.003)),
        "large prices": _walk(600, 2, 2.5e6),
        "integer prices": integers,
        "shorter than the look-back": _walk(40, 4, 100.0),
    }


MARKETS = _markets()
# Every replayed and whole-series function with its defaults, and others of their parameters.
VARIANTS: list[dict[str, Any]] = [{"ta": name} for name in sorted(set(REPLAYS) | set(WHOLE_SERIES))] + [
    {"ta": "EMA", "timeperiod": 5}, {"ta": "EMA", "timeperiod": 26}, {"ta": "SMA", "timeperiod": 7},
    {"ta": "RSI", "timeperiod": 5}, {"ta": "CMO", "timeperiod": 3},
    {"ta": "STOCH", "fastk_period": 14, "slowk_period": 1},
    {"ta": "STOCHRSI", "timeperiod": 5, "fastk_period": 3, "fastd_period": 1}, {"ta": "CCI", "timeperiod": 5},
    {"ta": "MFI", "timeperiod": 3}, {"ta": "ULTOSC", "timeperiod1": 3, "timeperiod2": 2, "timeperiod3": 5},
    {"ta": "ATR", "timeperiod": 3}, {"ta": "NATR", "timeperiod": 5}, {"ta": "ADX", "timeperiod": 5},
    {"ta": "ADOSC", "fastperiod": 10, "slowperiod": 3}, {"ta": "SAR", "acceleration": 0.1, "maximum": 0.05},
    {"ta": "BBANDS", "timeperiod": 5, "nbdevup": 1.5, "nbdevdn": 2.5}, {"ta": "T3", "timeperiod": 3, "vfactor": 0.3},
    {"ta": "LINEARREG_SLOPE", "timeperiod": 30}, {"ta": "AROON", "timeperiod": 5}, {"ta": "ROC", "timeperiod": 1},
]


def _setup(item: dict[str, Any], market: Market) -> tuple[TaFeature, dict[str, Any], list[np.ndarray], int]:
    feature = TaFeature.parse(item, "test")
    inputs = [np.ascontiguousarray(market[column]) for column in input_columns(feature.name)]
    return feature, dict(feature.params), inputs, feature.first_valid + 1


def _assert_same_bits(fast: list[np.ndarray], reference: list[np.ndarray], what: str) -> None:
    assert len(fast) == len(reference), what
    for got, expected in zip(fast, reference, strict=True):
        assert np.array_equal(np.isnan(got), np.isnan(expected)), f"{what}: NaN in other places"
        known = ~np.isnan(expected)
        different = np.flatnonzero(got[known].view(np.int64) != expected[known].view(np.int64))
        assert not len(different), (f"{what}: {len(different)} values differ, first at row "
                                    f"{np.flatnonzero(known)[different[0]]}")


@pytest.mark.parametrize("item", VARIANTS, ids=lambda item: "-".join(str(v) for v in item.values()))
def test_the_fast_path_gives_the_per_bar_bits(item):
    """Each replay over all windows (whatever it costs against the per-bar calls), and each whole-series call."""
    for name, market in MARKETS.items():
        feature, params, inputs, look_back = _setup(item, market)
        reference = per_bar_outputs(feature.name, params, feature.unstable_bars, inputs, look_back)
        lookback = _lookback(feature.name, params, feature.unstable_bars)
        if len(inputs[0]) < look_back:
            assert fast_outputs(feature.name, params, feature.unstable_bars, inputs, look_back, lookback) is None
            assert all(np.isnan(column).all() for column in reference)
            continue
        if feature.name in REPLAYS:
            fast = replay(feature.name, params, feature.unstable_bars, inputs, look_back, lookback)
        else:
            fast, path = fast_outputs(feature.name, params, feature.unstable_bars, inputs, look_back, lookback)
            assert path == "whole series"
        _assert_same_bits(fast, reference, f"{feature.label} on {name}")


def _path(item: dict[str, Any], market: Market) -> str:
    feature, params, inputs, look_back = _setup(item, market)
    fast = fast_outputs(feature.name, params, feature.unstable_bars, inputs, look_back,
                        _lookback(feature.name, params, feature.unstable_bars))
    return fast[1] if fast else "per bar"


def test_a_replay_is_used_where_it_costs_less_than_the_per_bar_calls():
    """On the whole bundled history the cheap replays run and the long recursions (many emulated fmas a window) are
    left to the per-bar calls; on a served policy's few windows every replay is left to them."""
    bars = load_bars(REPO / "data" / "raw" / "BTC-USD_1h.parquet")
    history = {column: bars[column].to_numpy(dtype=np.float64) for column in bars.columns}
    items = {"RSI(14)": {"ta": "RSI"}, "EMA(12)": {"ta": "EMA", "timeperiod": 12}, "ROC(10)": {"ta": "ROC"},
             "ATR(14)": {"ta": "ATR"}, "EMA(60)": {"ta": "EMA", "timeperiod": 60}, "TEMA(30)": {"ta": "TEMA"}}
    assert {label: _path(item, history) for label, item in items.items()} == {
        "RSI(14)": "replay", "EMA(12)": "replay", "ROC(10)": "whole series", "ATR(14)": "replay",
        "EMA(60)": "per bar", "TEMA(30)": "per bar"}
    served = {column: values[-200:] for column, values in history.items()}
    assert {label: _path(item, served) for label, item in items.items()} == {
        "RSI(14)": "per bar", "EMA(12)": "per bar", "ROC(10)": "whole series", "ATR(14)": "per bar",
        "EMA(60)": "per bar", "TEMA(30)": "per bar"}


def test_inputs_a_replay_is_not_exact_for_take_the_per_bar_path():
    market = MARKETS["bundled"]
    for bad in (np.nan, np.inf, 1e150, 1e-150):
        feature, params, inputs, look_back = _setup({"ta": "RSI"}, market)
        inputs[0] = inputs[0].copy()
        inputs[0][700] = bad
        assert fast_outputs(feature.name, params, 0, inputs, look_back, feature.first_valid) is None, bad


def test_a_fast_result_that_differs_from_the_per_bar_call_is_not_used(monkeypatch):
    bars = {column: values[:400] for column, values in MARKETS["bundled"].items()}
    feature = TaFeature.parse({"ta": "CCI"}, "test")
    expected = feature.compute(bars)
    original = REPLAYS["CCI"]

    def off_by_a_bit(windows, call):
        outputs, lookback = original(windows, call)
        return [np.nextafter(outputs[0], np.inf)], lookback

    monkeypatch.setitem(REPLAYS, "CCI", off_by_a_bit)
    with pytest.warns(RuntimeWarning, match="differs from the per-bar call"):
        got = feature.compute(bars)
    _assert_same_bits(got, expected, "CCI computed per bar after the check failed")
    assert fast_path.REPLAYS["CCI"] is off_by_a_bit


def _exact_fma(a: float, b: float, c: float) -> float:
    return float(Fraction(a) * Fraction(b) + Fraction(c))  # Fraction -> float rounds once, to nearest even


def test_the_emulated_fma_is_correctly_rounded():
    rng = np.random.default_rng(0)
    n = 3000
    cases = []
    for scale in (1.0, 1e-40, 1e40):
        a = rng.normal(size=n) * scale
        b = rng.normal(size=n)
        c = rng.normal(size=n) * scale * rng.choice([1e-20, 1e-8, 1.0, 1e8], n)
        cases.append((a, b, c))
    small = rng.integers(-2**20, 2**20, size=(3, n)).astype(np.float64)  # exact products: sums land on ties
    cases.append((small[0] * 0.5, small[1] * 2.0**-30, small[2] * 2.0**25))
    cases.append((np.array([1.0, 1.0 + 2**-30, 3.0, 2.0**27 + 1, -1.0 - 2**-52]),
                  np.array([2.0**-53, 1.0 - 2**-30, 1.0 / 3, 2.0**27 - 1, 1.0 + 2**-52]),
                  np.array([1.0, -1.0, -1.0, -2.0**54, 1.0])))  # a midpoint, cancellations, a product just off a tie
    for a, b, c in cases:
        got = fma(a, b, c)
        expected = np.array([_exact_fma(x, y, z) for x, y, z in zip(a, b, c, strict=True)])
        assert np.array_equal(got.view(np.int64), expected.view(np.int64))
        scalar = fma(a, 0.15384615384615385, c)  # a float factor, as the EMA steps use it
        expected = np.array([_exact_fma(x, 0.15384615384615385, z) for x, z in zip(a, c, strict=True)])
        assert np.array_equal(scalar.view(np.int64), expected.view(np.int64))
