"""Export formats the CSV importer reads without guessing: CryptoDataDownload's Bitfinex files (volume in
the coin's units is `VolumeFrom`, never the quote `VolumeTo`), and wide multi-asset tables in which an asset
listed after the table starts has empty cells until its first bar."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from envs.errors import InputError
from envs.trading.csv_import import import_csv
from envs.trading.data import load_bars
from tests.conftest import REPO, random_walk_bars

BITFINEX_HEADER = "Date,Symbol,Open,High,Low,Close,VolumeFrom,VolumeTo"
FIELDS = ("open", "high", "low", "close", "volume")


def _bitfinex_csv(tmp_path: Path, bars: pd.DataFrame, fmt: str, columns: str = BITFINEX_HEADER) -> Path:
    """CryptoDataDownload's layout: a URL line, the header, then rows newest first; VolumeTo = close * VolumeFrom."""
    rows = [f"{t.strftime(fmt)},BTCUSD,{o},{h},{lo},{c},{v},{v * c}"
            for t, (o, h, lo, c, v) in zip(bars.index[::-1], bars.to_numpy()[::-1], strict=True)]
    if "VolumeFrom" not in columns:  # the same rows without the VolumeFrom cell
        rows = [",".join(row.split(",")[:6] + row.split(",")[7:]) for row in rows]
    path = tmp_path / "Bitfinex_BTCUSD_1h.csv"
    path.write_text("https://www.CryptoDataDownload.com\n" + columns + "\n" + "\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("fmt", ["%Y-%m-%d %I-%p", "%Y-%m-%d %H:%M:%S"])
def test_a_bitfinex_export_takes_volumefrom_as_the_volume(tmp_path, fmt):
    expected = random_walk_bars(48)
    bars, report = import_csv(_bitfinex_csv(tmp_path, expected, fmt), "1h")
    assert bars.index.equals(expected.index)
    np.testing.assert_allclose(bars["volume"], expected["volume"])
    np.testing.assert_allclose(bars["close"], expected["close"])
    assert report.volume_column == "volumefrom"
    assert "volume: column volumefrom (left aside: volumeto)" in report.lines()


def test_a_bitfinex_export_with_only_the_quote_volumeto_is_refused(tmp_path):
    path = _bitfinex_csv(tmp_path, random_walk_bars(24), "%Y-%m-%d %I-%p",
                         columns="Date,Symbol,Open,High,Low,Close,VolumeTo")
    with pytest.raises(InputError, match=r"no volume column .*volumeto is not volume in the coin's units") as caught:
        import_csv(path, "1h")
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def _cell(value: float) -> str:
    return "" if np.isnan(value) else repr(float(value))


def _wide_csv(tmp_path: Path, eth_rows: pd.DataFrame, newest_first: bool = False) -> tuple[Path, pd.DataFrame]:
    """An hourly table of BTC and ETH (unnamed time column first); ETH cells are empty where `eth_rows` is NaN."""
    btc = random_walk_bars(60, seed=1)
    header = "," + ",".join(f"{asset}:{field}" for asset in ("BTC", "ETH") for field in FIELDS)
    rows = [",".join([t.strftime("%Y-%m-%d %H:%M"), *map(_cell, btc.loc[t]), *map(_cell, eth_rows.loc[t])])
            for t in btc.index]
    path = tmp_path / "panel.csv"
    path.write_text(header + "\n" + "\n".join(rows[::-1] if newest_first else rows) + "\n")
    return path, btc


def _late_eth(first: int) -> pd.DataFrame:
    eth = random_walk_bars(60, seed=2) * 0.05
    eth.iloc[:first] = np.nan
    return eth


@pytest.mark.parametrize("newest_first", [False, True])
def test_an_asset_listed_late_starts_at_its_first_prices(tmp_path, newest_first):
    eth = _late_eth(17)
    path, _ = _wide_csv(tmp_path, eth, newest_first)
    bars, report = import_csv(path, "1h", symbol="ETH-USD")
    assert len(bars) == 43 and bars.index[0] == eth.index[17]
    np.testing.assert_allclose(bars.to_numpy(), eth.iloc[17:].to_numpy())
    assert report.unlisted_rows == 17
    assert ("ETH-USD starts 2021-01-01 17:00 UTC: 17 earlier row(s) with no ETH-USD prices left out "
            "(not listed yet)") in report.lines()
    btc, btc_report = import_csv(path, "1h", symbol="BTC-USD")
    assert len(btc) == 60 and btc_report.unlisted_rows == 0
    assert not any("not listed yet" in line for line in btc_report.lines())


def test_the_cli_prints_where_a_late_asset_starts(tmp_path):
    path, _ = _wide_csv(tmp_path, _late_eth(5))
    out = tmp_path / "ETH-USD_1h.parquet"
    result = subprocess.run([sys.executable, "-m", "experiments.data", "import", str(path), "--symbol", "ETH-USD",
                             "--timeframe", "1h", "--out", str(out)], capture_output=True, text=True, cwd=REPO,
                            timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)
    assert result.returncode == 0, result.stderr
    assert "ETH-USD starts 2021-01-01 05:00 UTC: 5 earlier row(s)" in result.stdout
    assert len(load_bars(out)) == 55


@pytest.mark.parametrize("empty, refusal, said", [
    (["close"], r"1 bar\(s\) of ETH-USD with an empty or unreadable price cell, first at 2021-01-02 06:00",
     "empty cells: 1 bar(s) of ETH-USD with an empty or unreadable price, first at 2021-01-02 06:00: filled at the "
     "last close (--gaps ffill)"),
    (list(FIELDS), r"1 missing bars, longest gap 0 days 01:00:00 after 2021-01-02 05:00.*--gaps ffill",
     "gaps: 1 missing bars, longest gap 0 days 01:00:00 after 2021-01-02 05:00:00+00:00 (handled: ffill)"),
])
def test_an_empty_cell_after_the_first_bar_follows_the_gap_rule(tmp_path, empty, refusal, said):
    """A bar with an empty price cell inside the asset's span is broken, a row with none a missing bar: refused under
    --gaps error, a flat bar at the last close under ffill (and said), a hole under drop: the gap rule, as in a
    universe's table (envs.trading.bar_checks)."""
    eth = _late_eth(10)
    eth.iloc[30, [FIELDS.index(f) for f in empty]] = np.nan
    path, _ = _wide_csv(tmp_path, eth)
    with pytest.raises(InputError, match=refusal) as caught:
        import_csv(path, "1h", symbol="ETH-USD", gaps="error")
    assert str(caught.value).startswith(str(path)) and "\n" not in str(caught.value)
    filled, report = import_csv(path, "1h", symbol="ETH-USD")
    assert len(filled) == 50 and filled.loc[eth.index[30], "close"] == filled.loc[eth.index[29], "close"]
    assert filled.loc[eth.index[30], "volume"] == 0.0
    assert said in report.lines()
    holed, _ = import_csv(path, "1h", symbol="ETH-USD", gaps="drop")
    assert len(holed) == 49 and eth.index[30] not in holed.index


def test_text_in_a_price_column_is_refused_naming_the_cell(tmp_path):
    path, _ = _wide_csv(tmp_path, _late_eth(10))
    lines = path.read_text().splitlines()
    cells = lines[5].split(",")
    cells[9] = "abc"  # ETH:close
    lines[5] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"column 'eth:close' row 5: 'abc' is not a number") as caught:
        import_csv(path, "1h", symbol="ETH-USD")
    assert "\n" not in str(caught.value)


def test_an_asset_without_any_prices_is_refused_naming_it(tmp_path):
    path, _ = _wide_csv(tmp_path, _late_eth(60))
    with pytest.raises(InputError, match=r"no ETH-USD prices in any of its 60 row\(s\)") as caught:
        import_csv(path, "1h", symbol="ETH-USD")
    assert str(caught.value).startswith(str(path)) and "\n" not in str(caught.value)
