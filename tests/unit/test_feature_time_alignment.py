"""Blocks are aligned on instants, whatever unit or time zone each file's stamps come in (issue 39, points 7, 8).

Under pandas 3 a DatetimeIndex keeps its file's unit (`ns` from an epoch-nanosecond CSV, `us` from the bundled
parquets), so raw int64 stamps of two files are not comparable; and a bars parquet indexed in another zone
than UTC would put daily blocks on that zone's midnight. Each feature must equal the one computed when the
bars and the block's file agree on both."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from envs.trading.data import load_bars, save_bars
from envs.trading.features.matrix import build_raw
from envs.trading.features.series import load_series
from envs.trading.features.spec import parse_features
from tests.conftest import random_walk_bars

BARS = random_walk_bars(24 * 60, start="2017-01-01")  # hourly, microsecond stamps like the bundled files
DAYS = pd.date_range("2016-12-01", "2017-03-31", freq="D", tz="UTC")
VALUES = 2000 + np.cumsum(np.random.default_rng(3).normal(0, 10, len(DAYS)))


def in_unit(bars: pd.DataFrame, unit: str) -> pd.DataFrame:
    moved = bars.copy()
    moved.index = bars.index.as_unit(unit)
    return moved


def features(items: list, bars: pd.DataFrame) -> np.ndarray:
    return build_raw(parse_features(items), bars, "1h", "features").values


def series_csv(tmp_path: Path, epoch_ns: bool) -> Path:
    """A daily series stamped with dates (read as `us`) or with epoch nanoseconds (read as `ns`)."""
    stamps = DAYS.as_unit("ns").asi8 if epoch_ns else DAYS.strftime("%Y-%m-%d")
    path = tmp_path / ("ns.csv" if epoch_ns else "dates.csv")
    pd.DataFrame({"date": stamps, "close": VALUES}).to_csv(path, index=False)
    return path


def series_block(path: Path) -> list:
    return [{"series": str(path), "name": "SPX", "column": "close", "lag": "1d", "features": ["value"]}]


def test_series_units_are_read_as_expected(tmp_path):
    """The fixture's premise: the two files give the two units."""
    assert load_series(str(series_csv(tmp_path, False)), "close", "error", "x").frame.index.unit == "us"
    assert load_series(str(series_csv(tmp_path, True)), "close", "error", "x").frame.index.unit == "ns"


@pytest.mark.parametrize("bars_unit, epoch_ns", [("ns", False), ("us", True), ("ns", True)])
def test_a_series_block_is_the_same_in_any_unit(tmp_path, bars_unit, epoch_ns):
    expected = features(series_block(series_csv(tmp_path, False)), BARS)
    assert np.isfinite(expected[48:]).all() and len(np.unique(expected[48:])) > 50  # not a constant column
    got = features(series_block(series_csv(tmp_path, epoch_ns)), in_unit(BARS, bars_unit))
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("bars_unit, asset_unit", [("ns", "us"), ("us", "ns")])
def test_an_asset_block_is_the_same_in_any_unit(tmp_path, bars_unit, asset_unit):
    other = random_walk_bars(24 * 60, seed=7, start="2017-01-01").drop(BARS.index[100:105])  # holes: missing
    path = save_bars(in_unit(other, asset_unit), tmp_path / "ETH-USD_1h.parquet", "ETH-USD", "1h", gaps="drop")
    assert load_bars(path).index.unit == asset_unit
    for missing in ("ffill", "zero"):
        items = [{"asset": str(path), "name": "ETH", "missing": missing, "features": ["log_return"]}]
        expected = features(items, BARS) if asset_unit == "us" else features(items, in_unit(BARS, "ns"))
        np.testing.assert_array_equal(features(items, in_unit(BARS, bars_unit)), expected)


def test_a_new_york_indexed_parquet_gives_the_utc_features_and_says_so(tmp_path, capsys):
    utc = save_bars(BARS, tmp_path / "utc.parquet", "BTC-USD", "1h")
    new_york = save_bars(BARS.tz_convert("America/New_York"), tmp_path / "ny.parquet", "BTC-USD", "1h")
    items = [{"resample": "1d", "features": ["log_return", {"transform": "trend", "window": 5}]}]
    loaded = load_bars(new_york)
    assert str(loaded.index.tz) == "UTC" and loaded.index.equals(load_bars(utc).index)
    np.testing.assert_array_equal(features(items, loaded), features(items, load_bars(utc)))
    load_bars(new_york)  # said once per file
    assert capsys.readouterr().err.splitlines() == [f"{new_york}: timestamps in America/New_York converted to UTC"]


def test_a_new_york_asset_or_series_file_is_read_in_utc(tmp_path, capsys):
    other = random_walk_bars(24 * 60, seed=7, start="2017-01-01")
    asset_utc = save_bars(other, tmp_path / "eth_utc.parquet", "ETH-USD", "1h")
    asset_ny = save_bars(other.tz_convert("America/New_York"), tmp_path / "eth_ny.parquet", "ETH-USD", "1h")
    resampled = [{"resample": "1d", "features": ["log_return"]}]
    expected = features([{"asset": str(asset_utc), "features": resampled}], BARS)
    np.testing.assert_array_equal(features([{"asset": str(asset_ny), "features": resampled}], BARS), expected)
    assert f"{asset_ny}: timestamps in America/New_York converted to UTC" in capsys.readouterr().err
    frame = pd.DataFrame({"close": VALUES}, index=pd.DatetimeIndex(DAYS, name="date"))
    frame.to_parquet(tmp_path / "spx_utc.parquet")
    frame.tz_convert("America/New_York").to_parquet(tmp_path / "spx_ny.parquet")
    frame.tz_localize(None).to_parquet(tmp_path / "spx_naive.parquet")  # naive stamps are read as UTC, silently
    utc, ny, naive = (load_series(str(tmp_path / f"spx_{zone}.parquet"), "close", "error", "x")
                      for zone in ("utc", "ny", "naive"))
    assert ny.frame.equals(utc.frame) and naive.frame.equals(utc.frame)
    assert ny.note == "timestamps in America/New_York converted to UTC" and utc.note == naive.note == ""


def test_a_naive_index_is_read_as_utc_without_a_note(tmp_path, capsys):
    """Naive stamps are UTC, as for CSV exports and outside series (such a parquet used to be refused)."""
    naive = BARS.tz_convert(None)
    naive.to_parquet(tmp_path / "naive.parquet")
    loaded = load_bars(tmp_path / "naive.parquet", "1h")
    assert loaded.index.equals(BARS.index) and str(loaded.index.tz) == "UTC"
    assert capsys.readouterr().err == ""
