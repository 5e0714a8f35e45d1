"""Importing CSV exports of several shapes, and clear errors for malformed ones."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from envs.errors import InputError
from envs.trading.csv_import import import_csv
from envs.trading.data import find_gaps, load_bars, save_bars
from tests.conftest import REPO, random_walk_bars

CDD_HEADER = (
    "Created by test,https://www.CryptoDataDownload.com\ndate,symbol,open,high,low,close,volume_eth,volume\n"
)


def write(tmp_path: Path, text: str, name: str = "bars.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_cryptodatadownload_hourly_newest_first(tmp_path):
    rows = [
        "2020-01-01 02-PM,ETHUSD,130,131,129,130.5,10,1300",
        "2020-01-01 01-PM,ETHUSD,129,130.2,128,130,12,1500",
        "2020-01-01 12-PM,ETHUSD,128,129.5,127,129,11,1400",
    ]
    bars, gaps = import_csv(write(tmp_path, CDD_HEADER + "\n".join(rows)), "1h")
    assert list(bars.index.hour) == [12, 13, 14] and str(bars.index.tz) == "UTC"
    assert bars["close"].tolist() == [129, 130, 130.5] and bars["volume"].tolist() == [11, 12, 10]
    assert gaps.gaps.missing_bars == 0


def test_headerless_binance_klines_in_milliseconds(tmp_path):
    start = 1_600_000_000_000 - 1_600_000_000_000 % 60_000
    lines = [
        f"{start + i * 60_000},{10 + i},{11 + i},{9 + i},{10.5 + i},{100 + i},{start + i * 60_000 + 59_999},0,0,0,0,0"
        for i in range(5)
    ]
    bars, _ = import_csv(write(tmp_path, "\n".join(lines)), "1m")
    assert len(bars) == 5 and bars.index[0] == pd.Timestamp(start, unit="ms", tz="UTC")


def test_generic_iso_with_gap_filled_flat(tmp_path):
    text = (
        "timestamp,open,high,low,close,volume\n2024-03-01T00:00:00Z,10,11,9,10,5\n"
        "2024-03-01T01:00:00Z,10,12,10,11,5\n2024-03-01T04:00:00Z,11,12,10,12,5\n"
    )
    bars, report = import_csv(write(tmp_path, text), "1h", gaps="ffill")
    assert report.gaps.missing_bars == 2 and len(bars) == 5
    filled = bars.iloc[2]
    assert filled["open"] == filled["close"] == 11 and filled["volume"] == 0
    dropped, _ = import_csv(write(tmp_path, text), "1h", gaps="drop")
    assert len(dropped) == 3


@pytest.mark.parametrize(
    "body, fragment",
    [
        (
            "timestamp,open,high,low,close,volume\n2024-01-01 00:00,10,11,9,,1\n2024-01-01 01:00,10,11,9,10,1\n",
            "empty or unreadable price cell, and no earlier close",
        ),
        (
            "timestamp,open,high,low,close,volume\n2024-01-01 00:00,10,11,9,10,1\n2024-01-01 01:00,-1,11,-2,10,1\n",
            "non-positive",
        ),
        (
            "timestamp,open,high,low,close,volume\n2024-01-01 00:00,10,9,8,10,1\n2024-01-01 01:00,10,11,9,10,1\n",
            "high below",
        ),
        (
            "timestamp,open,high,low,close\n2024-01-01 00:00,10,11,9,10\n2024-01-01 00:00,10,12,9,11\n",
            "share the timestamp",
        ),
        ("timestamp,open,high,close,volume\n2024-01-01 00:00,10,11,10,1\n", "missing price column"),
        ("when,open,high,low,close\n2024-01-01,10,11,9,10\n", "no time column"),
        ("timestamp,open,high,low,close\nyesterday,10,11,9,10\n", "cannot read"),
        ("timestamp,open,high,low,close\n2024-01-01 00:00,10,11,9,ten\n", "not a number"),
        ("timestamp,open,high,low,close\n2024-01-01 00:00,10,11,9,10\n2024-01-01 00:30,10,11,9,10\n", "grid"),
        ("", "empty"),
    ],
)
def test_malformed_csv_gives_clear_error(tmp_path, body, fragment):
    path = write(tmp_path, body)
    with pytest.raises(InputError, match=fragment) as info:
        import_csv(path, "1h")
    assert str(path) in str(info.value)


def test_gap_policy_error_names_the_fix(tmp_path):
    text = "timestamp,open,high,low,close\n2024-01-01 00:00,10,11,9,10\n2024-01-01 05:00,10,11,9,10\n"
    with pytest.raises(InputError, match="--gaps ffill"):
        import_csv(write(tmp_path, text), "1h", gaps="error")


def test_load_rejects_gaps_missing_and_corrupt_files(tmp_path):
    bars = random_walk_bars(50).drop(index=random_walk_bars(50).index[10:13])
    path = save_bars(bars, tmp_path / "GAPPY_1h.parquet", "GAPPY", "1h")
    with pytest.raises(InputError, match="missing bars"):
        load_bars(path)
    with pytest.raises(InputError, match="not found"):
        load_bars(tmp_path / "nothing.parquet")
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(InputError, match="not a readable parquet"):
        load_bars(corrupt)


def test_find_gaps_reports_longest():
    index = pd.DatetimeIndex(
        ["2024-01-01 00:00", "2024-01-01 01:00", "2024-01-01 05:00", "2024-01-01 07:00"], tz="UTC"
    )
    report = find_gaps(index, "1h")
    assert report.missing_bars == 4 and report.longest_gap == pd.Timedelta(hours=3)


def test_real_cryptodatadownload_daily_export_and_bundled_copy():
    """Two real exports in the site's own format (tests/data/cryptodatadownload): the daily one whole, and the
    newest 2,000 bars of the hourly one the bundled parquet was imported from, which they must equal."""
    exports = REPO / "tests" / "data" / "cryptodatadownload"
    bars, report = import_csv(exports / "Coinbase_BTCUSD_d.csv", "1d")
    assert bars.index[0] == pd.Timestamp("2014-12-01", tz="UTC") and report.gaps.missing_bars == 12
    bundled = load_bars(REPO / "data/raw/BTC-USD_1h.parquet")
    assert len(bundled) == 20111 and bundled.attrs["symbol"] == "BTC-USD"
    hourly, _ = import_csv(exports / "Coinbase_BTCUSD_1h_newest_2000.csv", "1h")
    assert len(hourly) == 2000 and hourly.index.equals(bundled.index[-2000:])
    np.testing.assert_allclose(hourly.to_numpy(), bundled.iloc[-2000:].to_numpy())


def test_import_cli_writes_parquet_and_fails_cleanly(tmp_path):
    src = write(
        tmp_path,
        "timestamp,open,high,low,close,volume\n2024-01-01 00:00,10,11,9,10,1\n"
        "2024-01-01 01:00,10,11,9,10.5,2\n",
    )
    out = tmp_path / "X_1h.parquet"
    ok = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.data",
            "import",
            str(src),
            "--symbol",
            "X-USD",
            "--timeframe",
            "1h",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert ok.returncode == 0 and out.exists() and len(load_bars(out)) == 2
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.data",
            "import",
            str(tmp_path / "none.csv"),
            "--symbol",
            "X-USD",
            "--timeframe",
            "1h",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "not found" in bad.stderr


def test_timeframe_that_contradicts_the_metadata_is_an_error(bars_file):
    """Sharpe and Sortino are annualized by the timeframe: 1d on hourly bars must not be accepted."""
    from envs.trading.env import SpotTradingEnv

    with pytest.raises(InputError, match=r"holds 1h bars \(file metadata\).*timeframe: 1h"):
        SpotTradingEnv({"data_path": str(bars_file), "timeframe": "1d"})
    env = SpotTradingEnv({"data_path": str(bars_file), "timeframe": "1h", "episode_length": 50})
    assert env.market.timeframe == "1h"


def test_timeframe_that_contradicts_the_bar_spacing_is_an_error(tmp_path):
    """Without metadata (another tool's parquet) the bars' own spacing decides."""
    bars = random_walk_bars(200)
    bars.attrs = {}
    path = tmp_path / "foreign.parquet"
    bars.reset_index().to_parquet(path)
    with pytest.raises(InputError, match="bars are 1h apart: use timeframe 1h"):
        load_bars(path, "1d")
    with pytest.raises(InputError, match="bars are 1h apart"):
        load_bars(path, "4h")
    assert len(load_bars(path, "1h")) == 200


def test_import_refuses_a_timeframe_finer_than_the_file(tmp_path):
    """Daily bars imported as 1h would be forward-filled into 23 fake flat bars a day."""
    daily = random_walk_bars(30, freq="1D").reset_index()
    path = tmp_path / "daily.csv"
    daily.to_csv(path, index=False)
    with pytest.raises(InputError, match="bars are 1d apart: use timeframe 1d"):
        import_csv(path, "1h")
    assert len(import_csv(path, "1d")[0]) == 30
