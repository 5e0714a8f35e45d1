"""`python -m experiments.data update`: new bars are appended to a local dataset only when they continue its
history; every refusal is one line, exit 2, and leaves the folder exactly as it was."""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

from envs.trading.data import load_bars, save_bars
from experiments import data as data_cli
from tests.conftest import random_walk_bars

SYMBOL = "TEST-USD"
ALL = random_walk_bars(300)  # the dataset holds the first 200 of these bars; the new ones continue them
STORED = 200


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return save_bars(ALL.iloc[:STORED], tmp_path / "data" / f"{SYMBOL}_1h.parquet", SYMBOL, "1h")


def csv_of(bars: pd.DataFrame, tmp_path: Path, name: str = "new.csv") -> Path:
    path = tmp_path / name
    bars.to_csv(path)
    return path


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def update(*args: str) -> int:
    return data_cli.main(["update", *map(str, args)])


def assert_refused(code: int, capsys, dataset: Path, before: dict, *words: str) -> str:
    """Exit 2, one line on stderr naming the file and the fix, and the dataset's folder untouched."""
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), captured
    for word in words:
        assert word in lines[0], lines[0]
    assert snapshot(dataset.parent) == before  # same bytes, same mtimes, no temp file, no dated copy
    return lines[0]


def dated_copies(dataset: Path) -> list[Path]:
    return [p for p in dataset.parent.iterdir() if p != dataset]


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_append_reports_the_range_and_keeps_the_previous_version(dataset, tmp_path, capsys, kind):
    old, mode = dataset.read_bytes(), dataset.stat().st_mode
    new = ALL.iloc[180:]  # 20 bars overlap the stored ones, 100 are new
    source = (csv_of(new, tmp_path) if kind == "csv"
              else save_bars(new, tmp_path / "new.parquet", SYMBOL, "1h"))
    assert update(dataset, "--from", source) == 0
    out = capsys.readouterr().out
    assert f"appended 100 1h bars 2021-01-09 08:00 .. 2021-01-13 11:00 from {source}" in out
    assert "overlap: 20 bars already stored and identical, skipped" in out
    assert "gaps in the new bars: no gaps" in out
    assert f"now 300 1h bars of {SYMBOL} 2021-01-01 00:00 .. 2021-01-13 11:00" in out
    bars = load_bars(dataset)
    assert (bars.attrs["symbol"], bars.attrs["timeframe"], bars.attrs["gaps"]) == (SYMBOL, "1h", "ffill")
    np.testing.assert_allclose(bars.to_numpy(), ALL.to_numpy(), rtol=1e-12)
    assert bars.index.equals(ALL.index)
    [copy] = dated_copies(dataset)
    assert re.fullmatch(rf"{SYMBOL}_1h\.\d{{8}}T\d{{6}}Z\.parquet", copy.name)
    assert copy.read_bytes() == old
    assert dataset.stat().st_mode == copy.stat().st_mode == mode  # readable by whoever could read it before
    assert f"previous version kept as {copy}" in out and f"wrote {dataset}" in out


def test_nothing_new_writes_nothing(dataset, tmp_path, capsys):
    source = csv_of(ALL.iloc[150:STORED], tmp_path)
    before = snapshot(dataset.parent)
    assert update(dataset, "--from", source) == 0
    captured = capsys.readouterr()
    assert captured.out.strip().splitlines() == [
        f"{dataset}: nothing to append: the 50 bars of {source} are already stored, identical; "
        "it ends 2021-01-09 07:00"]
    assert snapshot(dataset.parent) == before


def test_rewritten_history_is_refused_then_replaced_with_force(dataset, tmp_path, capsys):
    new = ALL.iloc[180:].copy()
    stored_volume, stored_low = float(new["volume"].iloc[3]), float(new["low"].iloc[5])
    new.iloc[3, new.columns.get_loc("volume")] += 1.0   # 2021-01-08 15:00, the first difference
    new.iloc[5, new.columns.get_loc("low")] *= 0.99     # 2021-01-08 17:00
    source = csv_of(new, tmp_path)
    before = snapshot(dataset.parent)
    line = assert_refused(update(dataset, "--from", source), capsys, dataset, before, str(source), "--force")
    assert (f"bar 2021-01-08 15:00 differs from {dataset}'s: volume stored {stored_volume!r}, "
            f"new {stored_volume + 1.0!r} (2 overlapping bar(s) differ): history was rewritten") in line

    assert update(dataset, "--from", source, "--force") == 0
    out = capsys.readouterr().out
    assert "overlap: 18 bars already stored and identical, skipped" in out
    assert "overlap: replaced 2 stored bars whose values differed (--force)" in out
    assert "appended 100 1h bars" in out
    bars = load_bars(dataset)
    assert bars["volume"].iloc[183] == pytest.approx(stored_volume + 1.0)
    assert bars["low"].iloc[185] == pytest.approx(stored_low * 0.99)
    assert len(bars) == 300 and len(dated_copies(dataset)) == 1


def test_a_hole_at_the_seam_is_refused(dataset, tmp_path, capsys):
    source = csv_of(ALL.iloc[STORED + 10:], tmp_path)
    before = snapshot(dataset.parent)
    assert_refused(update(dataset, "--from", source), capsys, dataset, before, str(source),
                   "starts at 2021-01-09 18:00", "ends at 2021-01-09 07:00",
                   "10 bars missing (2021-01-09 08:00 .. 2021-01-09 17:00)", "fetch the missing bars first")


def test_another_symbol_is_refused(dataset, tmp_path, capsys):
    before = snapshot(dataset.parent)
    other = save_bars(ALL.iloc[STORED:], tmp_path / "ETH-USD_1h.parquet", "ETH-USD", "1h")
    assert_refused(update(dataset, "--from", other), capsys, dataset, before, str(other), "holds ETH-USD bars",
                   f"holds {SYMBOL}")
    source = csv_of(ALL.iloc[STORED:], tmp_path)
    assert_refused(update(dataset, "--from", source, "--symbol", "ETH-USD"), capsys, dataset, before,
                   str(source), "holds ETH-USD bars")


@pytest.mark.parametrize("kind", ["csv", "parquet with metadata", "parquet without metadata"])
def test_another_timeframe_is_refused(dataset, tmp_path, capsys, kind):
    four_hourly = random_walk_bars(50, start="2021-01-09 08:00", freq="4h")
    if kind == "csv":
        source = csv_of(four_hourly, tmp_path)
    elif kind == "parquet with metadata":
        source = save_bars(four_hourly, tmp_path / "new.parquet", SYMBOL, "4h")
    else:
        source = tmp_path / "new.parquet"
        four_hourly.to_parquet(source)
    before = snapshot(dataset.parent)
    assert_refused(update(dataset, "--from", source), capsys, dataset, before, str(source), "holds 4h bars",
                   "holds 1h bars: update it with 1h bars")


def test_a_missing_or_foreign_dataset_is_refused(tmp_path, capsys):
    source = csv_of(ALL, tmp_path)
    before = snapshot(tmp_path)
    missing = tmp_path / "nope.parquet"
    assert_refused(update(missing, "--from", source), capsys, missing, before, str(missing), "not found")
    foreign = tmp_path / "plain.parquet"
    ALL.to_parquet(foreign)  # bars, but no symbol/timeframe metadata
    before = snapshot(tmp_path)
    assert_refused(update(foreign, "--from", source), capsys, foreign, before, str(foreign),
                   "no symbol and timeframe in its metadata")


def test_holes_in_the_new_bars_are_filled_from_the_last_stored_close(dataset, tmp_path, capsys):
    source = csv_of(ALL.iloc[STORED:].drop(ALL.index[250:253]), tmp_path)
    before = snapshot(dataset.parent)
    assert_refused(update(dataset, "--from", source, "--gaps", "drop"), capsys, dataset, before, str(source),
                   "--gaps drop would leave holes", "pass --gaps ffill")
    assert update(dataset, "--from", source) == 0
    assert "gaps in the new bars: 3 missing bars" in capsys.readouterr().out
    bars = load_bars(dataset)
    assert len(bars) == 300 and (bars["volume"].iloc[250:253] == 0).all()
    assert (bars["close"].iloc[250:253] == ALL["close"].iloc[249]).all()


def test_bars_before_the_start_are_left_out_and_holes_kept_with_drop_are_history(tmp_path, capsys):
    holes = ALL.index[100:103]
    dataset = save_bars(ALL.iloc[50:STORED].drop(holes), tmp_path / "data" / "TEST-USD_1h.parquet", SYMBOL, "1h",
                        gaps="drop")
    source = csv_of(ALL.iloc[:250], tmp_path)  # from before the dataset's start, with the bars of its holes
    before = snapshot(dataset.parent)
    assert_refused(update(dataset, "--from", source), capsys, dataset, before,
                   "bar 2021-01-05 04:00 differs", "not stored (a hole kept with --gaps drop)", "--force")
    assert update(dataset, "--from", source, "--force") == 0
    out = capsys.readouterr().out
    assert "left out 50 new bars before the dataset's first bar" in out
    assert "overlap: replaced 3 stored bars" in out and "appended 50 1h bars" in out
    bars = load_bars(dataset)
    assert bars.index.equals(ALL.index[50:250]) and bars.attrs["gaps"] == "drop"


class BarsExchange:
    """ccxt's fetch_ohlcv contract over a table of bars, without a network (cf. tests/unit/test_fetch.py)."""

    id = "fakex"
    timeframes: ClassVar[dict[str, str]] = {"1h": "1h"}

    def __init__(self, bars: pd.DataFrame):
        self.markets: dict = {}
        self.rows = [[int(t.value // 1_000_000), *row]
                     for t, row in zip(bars.index, bars.to_numpy().tolist(), strict=True)]
        self.sinces: list[int] = []

    def load_markets(self) -> dict:
        self.markets = {"TEST/USDT": {"active": True}}
        return self.markets

    def fetch_ohlcv(self, symbol, timeframe="1h", since=None, limit=None):
        self.sinces.append(since)
        return [list(r) for r in self.rows if r[0] >= since][: limit or 500]


def test_fetch_appends_from_the_exchange(dataset, capsys, monkeypatch):
    from envs.trading import fetch

    exchange = BarsExchange(ALL)
    monkeypatch.setattr(fetch, "make_exchange", lambda name, **_: exchange)
    assert update(dataset, "--fetch", "binance") == 0
    out = capsys.readouterr().out
    assert "appended 100 1h bars 2021-01-09 08:00 .. 2021-01-13 11:00 from fakex TEST/USDT" in out
    assert "overlap: 2 bars already stored and identical, skipped" in out
    assert exchange.sinces[0] == ALL.index[STORED - 2].value // 1_000_000
    np.testing.assert_array_equal(load_bars(dataset).to_numpy(), ALL.to_numpy())
    assert len(dated_copies(dataset)) == 1
    assert update(dataset, "--fetch", "binance") == 0
    assert "nothing to append" in capsys.readouterr().out
