"""Features are causal by construction: changing every bar after t leaves every feature at rows <= t bit-identical.

Run over every TA-Lib function the registry allows (default parameters), the plain transforms and sets, and
each kind of block (a higher timeframe, another market, an outside series), on real bars.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from envs.trading.data import load_bars
from envs.trading.features.matrix import build_raw
from envs.trading.features.spec import parse_features
from envs.trading.features.talib_functions import allowed_functions, refusal
from tests.conftest import REPO

BARS = load_bars(REPO / "data" / "raw" / "BTC-USD_1h.parquet").iloc[:3000]
CUT = 2200  # rows <= CUT must not move when the bars after it do


def perturbed(bars: pd.DataFrame, after: int) -> pd.DataFrame:
    """The same bars up to `after`, then other real bars: those of the history's start (other candles, other
    volumes), scaled to continue from the price at `after`."""
    changed = bars.copy()
    later = len(bars) - after - 1
    replacement = bars.iloc[1:later + 1].to_numpy().copy()
    replacement[:, :4] *= bars["close"].iloc[after] / bars["open"].iloc[1]
    changed.iloc[after + 1:] = replacement
    changed.attrs = dict(bars.attrs)
    return changed


def features(items: list, bars: pd.DataFrame) -> np.ndarray:
    return build_raw(parse_features(items), bars, "1h", "features").values


def assert_causal(items: list, bars: pd.DataFrame = BARS, cut: int = CUT) -> None:
    before = features(items, bars)
    after = features(items, perturbed(bars, cut))
    assert np.array_equal(before[:cut + 1], after[:cut + 1], equal_nan=True), items
    constant = all(np.nanmin(x) == np.nanmax(x) for x in (before, after))  # e.g. a candle pattern that never forms
    assert constant or not np.array_equal(before[cut + 1:], after[cut + 1:], equal_nan=True), (
        f"{items}: the perturbation changed nothing after t, so the test proves nothing")


@pytest.mark.parametrize("name", allowed_functions())
def test_every_allowed_talib_function_is_causal(name):
    assert_causal([{"ta": name}])


def test_the_registry_allows_most_functions_and_refuses_with_reasons():
    allowed = allowed_functions()
    assert len(allowed) > 150
    expected = {"MAVP": "periods input", "BETA": "two series", "CORREL": "two series", "MAXINDEX": "row numbers",
                "MININDEX": "row numbers", "OBV": "where the series starts", "AD": "where the series starts"}
    for name, reason in expected.items():
        assert name not in allowed and reason in refusal(name), (name, refusal(name))


@pytest.mark.parametrize("items", [
    ["basic"],
    [{"transform": "zscore", "window": 48, "input": "log_volume"}, "change", "value"],
    [{"resample": "4h", "features": ["basic", {"ta": "RSI"}]}],
    [{"resample": "1d", "features": [{"ta": "MACD"}, {"transform": "trend", "window": 5}]}],
])
def test_transforms_sets_and_higher_timeframes_are_causal(items):
    assert_causal(items)


def test_a_daily_bar_is_seen_from_the_first_hour_of_the_next_day():
    bars = BARS.iloc[:24 * 40]
    raw = build_raw(parse_features([{"resample": "1d", "features": ["value"]}]), bars.assign(
        close=bars["close"]), "1h", "features")
    daily_close = bars["close"].resample("1D").last()
    seen = pd.Series(raw.values[:, 0], index=bars.index)
    day = daily_close.index[10]
    last_hour, next_day = day + pd.Timedelta(hours=23), day + pd.Timedelta(days=1)
    assert seen[last_hour] == daily_close[day - pd.Timedelta(days=1)]  # day's own close not yet seen at 23:00...
    assert seen[next_day] == daily_close[day]                          # ...but from 00:00 of the next day on
    # The day's value depends on its 23:00 bar: changing that bar moves what 00:00 of the next day sees, not before.
    changed = bars.copy()
    changed.loc[last_hour, ["close", "high"]] *= 1.5
    moved = build_raw(parse_features([{"resample": "1d", "features": ["value"]}]), changed, "1h", "features").values
    row = bars.index.get_loc(next_day)
    assert np.array_equal(moved[:row], raw.values[:row], equal_nan=True) and moved[row, 0] != raw.values[row, 0]


def test_another_market_is_aligned_as_of_each_bar(tmp_path):
    from envs.trading.data import save_bars

    other = BARS.drop(BARS.index[100:110])  # ten bars missing in the other market
    path = save_bars(other * [1, 1, 1, 1, 2], tmp_path / "OTHER_1h.parquet", "OTHER-USD", "1h", gaps="drop")
    raw = build_raw(parse_features([{"asset": str(path), "features": ["value"]}]), BARS, "1h", "features")
    seen = raw.values[:, 0]
    assert np.array_equal(seen[:100], BARS["close"].to_numpy()[:100])          # same-time bar
    assert (seen[100:110] == BARS["close"].iloc[99]).all()                     # missing: ffill carries its last bar
    zero = build_raw(parse_features([{"asset": str(path), "missing": "zero", "features": ["value"]}]), BARS, "1h",
                     "features").values[:, 0]
    assert np.isnan(zero[100:110]).all() and not np.isnan(zero[110:]).any()     # NaN -> the train mean after z-scoring
    moved = save_bars(perturbed(other * [1, 1, 1, 1, 2], CUT), tmp_path / "MOVED_1h.parquet", "OTHER-USD", "1h",
                      gaps="drop")
    items = [{"ta": "RSI"}, "log_return"]
    before = build_raw(parse_features([{"asset": str(path), "features": items}]), BARS, "1h", "features").values
    after = build_raw(parse_features([{"asset": str(moved), "features": items}]), BARS, "1h", "features").values
    row = BARS.index.get_loc(other.index[CUT])  # the other market's bar CUT, on the base rows
    assert np.array_equal(before[:row + 1], after[:row + 1], equal_nan=True)
    assert not np.array_equal(before[row + 1:], after[row + 1:], equal_nan=True)


def test_a_market_listed_later_holds_decisions_back_or_sits_at_the_mean(tmp_path):
    from envs.trading.data import save_bars

    path = save_bars(BARS.iloc[500:], tmp_path / "LATE_1h.parquet", "LATE-USD", "1h")
    wait = build_raw(parse_features([{"asset": str(path), "features": ["log_return"]}]), BARS, "1h", "features")
    assert wait.warmup == 502  # its first bar is row 500, its first return row 501
    zero = build_raw(parse_features([{"asset": str(path), "before_start": "zero", "features": ["log_return"]}]),
                     BARS, "1h", "features")
    assert zero.warmup == 1 and np.isnan(zero.values[:501, 0]).all()


def test_an_outside_series_is_seen_after_its_publication_lag(tmp_path):
    days = pd.date_range(BARS.index[0].normalize() - pd.Timedelta(days=3), BARS.index[-1], freq="D")
    path = tmp_path / "index.csv"
    pd.DataFrame({"date": days.strftime("%Y-%m-%d"), "level": np.arange(len(days), dtype=float)}).to_csv(path,
                                                                                                      index=False)
    raw = build_raw(parse_features([{"series": str(path), "lag": "1d", "features": ["value"]}]), BARS, "1h",
                    "features")
    seen = pd.Series(raw.values[:, 0], index=BARS.index)
    day = days[10]
    assert seen[day + pd.Timedelta(hours=23)] == 9.0   # the value stamped day-1 was published at 00:00 of `day`
    assert seen[day + pd.Timedelta(days=1)] == 10.0    # the value stamped `day` is seen from the next day's 00:00
    # Values stamped after `day` changed: nothing a bar before their publication (day + 1 + 8h) sees may move.
    moved = tmp_path / "moved.csv"
    levels = np.arange(len(days), dtype=float)
    levels[11:] *= 3.0
    pd.DataFrame({"date": days.strftime("%Y-%m-%d"), "level": levels}).to_csv(moved, index=False)
    items = ["value", {"ta": "EMA", "timeperiod": 5}]
    before = build_raw(parse_features([{"series": str(path), "lag": "8h", "features": items}]), BARS, "1h", "features")
    after = build_raw(parse_features([{"series": str(moved), "lag": "8h", "features": items}]), BARS, "1h", "features")
    row = BARS.index.get_loc(days[11] + pd.Timedelta(hours=8))
    assert np.array_equal(before.values[:row], after.values[:row], equal_nan=True)
    assert not np.array_equal(before.values[row:], after.values[row:], equal_nan=True)


def _earlier_rounds_basic(bars: pd.DataFrame) -> np.ndarray:
    """`basic` as the hard-coded module of earlier rounds computed it: pandas rolling windows over the whole history."""
    close, volume = bars["close"], np.log1p(bars["volume"])
    log_return = np.log(close).diff().fillna(0.0)
    gain = log_return.clip(lower=0).rolling(14, min_periods=1).mean()
    loss = (-log_return.clip(upper=0)).rolling(14, min_periods=1).mean()
    volume_std = volume.rolling(96, min_periods=2).std().replace(0.0, np.nan)
    columns = [log_return, (bars["high"] - bars["low"]) / close, (close - bars["open"]) / bars["open"],
               log_return.rolling(24, min_periods=2).std(), close / close.rolling(24, min_periods=1).mean() - 1.0,
               close / close.rolling(96, min_periods=1).mean() - 1.0,
               (gain - loss) / (gain + loss).replace(0.0, np.nan),
               (volume - volume.rolling(96, min_periods=2).mean()) / volume_std]
    return np.nan_to_num(np.column_stack([c.to_numpy(dtype=np.float64) for c in columns]))


def test_basic_is_the_earlier_rounds_features_up_to_rounding_from_a_fixed_look_back():
    """`basic` is the eight features of every earlier round; computed over each value's own fixed look-back (what a
    served policy can reproduce) instead of pandas' running sums, they differ only in the last bits, and only rows
    before a feature's first full window (partial windows then, unknown now) differ more."""
    import hashlib

    from envs.trading.env import TradingConfig, load_market

    raw = build_raw(parse_features(["basic"]), BARS, "1h", "features")
    earlier = _earlier_rounds_basic(BARS)
    complete = np.arange(len(BARS))[:, None] >= raw.first_valid[None, :]
    assert np.isnan(raw.values[~complete]).all()
    difference = np.abs(raw.values[complete] - earlier[complete])
    assert 0 < difference.max() < 1e-9  # rounding, not another formula; and not the old computation either
    market = load_market(TradingConfig.from_dict({}))
    # decisions start once the whole 24-bar window is complete: row 95 (trend_96, volume_z_96) + 23
    assert market.feature_warmup == 96 and market.bounds["train"][0] == 118
    assert hashlib.sha256(market.features.tobytes()).hexdigest() == (
        "a9b1722f52ed8e71210345ec0fe37b632c2a5633752ca275a7bd2915a9736747")
