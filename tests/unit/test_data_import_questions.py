"""What the CSV import questions or reports instead of passing silently, through the real CLI: gaps kept
on purpose, empty files, missing volume, off-grid and close-time stamps, duplicates, overwrites, symbol
spelling, a history too short for its splits, and wide multi-asset tables."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from envs.errors import InputError
from envs.trading.csv_import import import_csv
from envs.trading.data import load_bars
from envs.trading.env import SpotTradingEnv
from envs.trading.symbols import canonical_symbol
from tests.conftest import REPO, random_walk_bars

HEADER = "timestamp,open,high,low,close,volume\n"


def cli(*args: str | Path, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "experiments.data", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)},
                          check=False)


def bars_csv(tmp_path: Path, n: int = 400, drop: slice | None = None, name: str = "bars.csv",
             fmt=lambda stamp: stamp.isoformat()) -> Path:
    """A generic export of `n` hourly random-walk bars (rows in `drop` removed: a gap)."""
    bars = random_walk_bars(n)
    if drop is not None:
        bars = bars.drop(index=bars.index[drop])
    rows = [f"{fmt(t)},{o},{h},{lo},{c},{v}" for t, (o, h, lo, c, v) in zip(bars.index, bars.to_numpy(), strict=True)]
    path = tmp_path / name
    path.write_text(HEADER + "\n".join(rows) + "\n")
    return path


def assert_one_line_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


def test_gaps_dropped_on_purpose_are_accepted_by_show_and_the_env(tmp_path):
    out = tmp_path / "GAPPY-USD_1h.parquet"
    result = cli("import", bars_csv(tmp_path, 2000, drop=slice(500, 520)), "--symbol", "GAPPY-USD",
                 "--timeframe", "1h", "--gaps", "drop", "--out", out)
    assert result.returncode == 0, result.stderr
    assert "20 missing bars" in result.stdout and "(handled: drop)" in result.stdout
    shown = cli("show", out)
    assert shown.returncode == 0 and "kept on purpose" in shown.stdout, shown.stderr
    env = SpotTradingEnv({"data_path": str(out), "episode_length": 200})
    assert len(env.market.closes) == 1980


def test_a_file_with_gaps_not_dropped_on_purpose_is_still_refused(tmp_path):
    bars = random_walk_bars(300).drop(index=random_walk_bars(300).index[100:103])
    path = tmp_path / "HOLES_1h.parquet"
    frame = bars.copy()
    frame.attrs = {"symbol": "HOLES", "timeframe": "1h"}  # another tool's file: no gap policy recorded
    frame.to_parquet(path)
    with pytest.raises(InputError, match="re-import with --gaps ffill"):
        load_bars(path)


def test_a_header_without_rows_is_one_line(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text(HEADER)
    assert_one_line_error(cli("import", empty, "--symbol", "BTC-USD", "--timeframe", "1h",
                              "--out", tmp_path / "x.parquet"), "a header and no rows")
    assert not (tmp_path / "x.parquet").exists()


def test_no_volume_column_is_refused_unless_asked_for(tmp_path):
    bars = random_walk_bars(50)
    path = tmp_path / "novol.csv"
    path.write_text("time,open,high,low,close\n" + "\n".join(
        f"{t.isoformat()},{o},{h},{lo},{c}" for t, (o, h, lo, c, _) in zip(bars.index, bars.to_numpy(), strict=True)))
    out = tmp_path / "NOVOL-USD_1h.parquet"
    assert_one_line_error(cli("import", path, "--symbol", "NOVOL-USD", "--timeframe", "1h", "--out", out),
                          "no volume column", "--no-volume")
    assert not out.exists()
    accepted = cli("import", path, "--symbol", "NOVOL-USD", "--timeframe", "1h", "--out", out, "--no-volume")
    assert accepted.returncode == 0 and "the volume feature is constant" in accepted.stdout
    assert (load_bars(out)["volume"] == 0).all()


def test_bars_off_the_hour_are_refused(tmp_path):
    path = bars_csv(tmp_path, 30, fmt=lambda t: (t + pd.Timedelta(minutes=30)).isoformat())
    with pytest.raises(InputError, match=r"not on the 1h grid \(bars open at multiples of 1h from 00:00 UTC\)"):
        import_csv(path, "1h")


@pytest.mark.parametrize("before", [pd.Timedelta(milliseconds=1), pd.Timedelta(seconds=1)])
def test_close_time_stamps_are_named_and_shifted_only_when_asked(tmp_path, before):
    # A bar that opens at 10:00 stamped at its close, 10:59:59.999 (Binance's close_time) or 10:59:59.
    path = bars_csv(tmp_path, 30, fmt=lambda t: (t + pd.Timedelta(hours=1) - before).isoformat())
    with pytest.raises(InputError, match="look like close times; pass --stamps close"):
        import_csv(path, "1h")
    bars, report = import_csv(path, "1h", stamps="close")
    assert bars.index.equals(random_walk_bars(30).index)
    assert "close times shifted" in " ".join(report.lines())


def test_exact_duplicates_are_counted_and_conflicting_ones_refused(tmp_path):
    path = bars_csv(tmp_path, 30)
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines, lines[5], lines[6], lines[6]]) + "\n")
    bars, report = import_csv(path, "1h")
    assert len(bars) == 30 and report.duplicates_dropped == 3
    assert "duplicates: dropped 3 row(s) repeated to the letter" in report.lines()
    conflicting = lines[7].rsplit(",", 1)[0] + ",999"
    path.write_text("\n".join([*lines, conflicting]) + "\n")
    with pytest.raises(InputError, match="two different bars share the timestamp"):
        import_csv(path, "1h")


def test_an_existing_parquet_is_replaced_only_with_force(tmp_path):
    out = tmp_path / "KEEP-USD_1h.parquet"
    first = cli("import", bars_csv(tmp_path, 40), "--symbol", "KEEP-USD", "--timeframe", "1h", "--out", out)
    assert first.returncode == 0, first.stderr
    before = out.read_bytes()
    other = bars_csv(tmp_path, 60, name="other.csv")
    assert_one_line_error(cli("import", other, "--symbol", "KEEP-USD", "--timeframe", "1h", "--out", out),
                          "exists", "--force")
    assert out.read_bytes() == before
    forced = cli("import", other, "--symbol", "KEEP-USD", "--timeframe", "1h", "--out", out, "--force")
    assert forced.returncode == 0 and "(replaced)" in forced.stdout and len(load_bars(out)) == 60


@pytest.mark.parametrize("given, suggested", [("btc", "BTC-USD"), ("eth-usdt", "ETH-USDT"), ("SOL/USD", "SOL-USD")])
def test_symbols_are_spelled_one_way(given, suggested):
    with pytest.raises(InputError, match=f"--symbol {suggested}"):
        canonical_symbol(given)
    assert canonical_symbol(suggested) == suggested


def test_the_cli_refuses_a_lowercase_symbol_before_writing(tmp_path):
    assert_one_line_error(cli("import", bars_csv(tmp_path, 30), "--symbol", "btc", "--timeframe", "1h",
                              "--out", tmp_path / "b.parquet"), "--symbol BTC-USD")
    assert not (tmp_path / "b.parquet").exists()


def test_a_history_too_short_for_its_splits_fails_the_dry_run(tmp_path):
    out = tmp_path / "SHORT-USD_1h.parquet"
    assert cli("import", bars_csv(tmp_path, 260), "--symbol", "SHORT-USD", "--timeframe", "1h",
               "--out", out).returncode == 0
    result = subprocess.run(
        [sys.executable, "-m", "experiments.run", "conf/dqn_btc.yaml", "--dry-run", "--set",
         f"environment.env_config.data_path={out}", "--set", "evaluation.protocol=holdout"],
        capture_output=True, text=True, cwd=REPO, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False)
    assert_one_line_error(result, "parts shorter than episode_length 720 bars", "validation 39", "test 39")


def _wide_daily_csv(tmp_path: Path) -> Path:
    """A multi-asset daily table: unnamed date column, then BTC:open ... ETH:volume (e.g. a data vendor's
    panel export)."""
    btc, eth = random_walk_bars(40, seed=1, freq="1D"), random_walk_bars(40, seed=2, freq="1D") * 0.05
    columns = [f"{asset}:{field}" for asset in ("BTC", "ETH") for field in btc.columns]
    rows = [",".join([t.strftime("%Y-%m-%d"), *map(str, [*btc.loc[t], *eth.loc[t]])]) for t in btc.index]
    path = tmp_path / "panel.csv"
    path.write_text("," + ",".join(columns) + "\n" + "\n".join(rows) + "\n")
    return path


def test_a_wide_multi_asset_table_gives_the_asked_symbol(tmp_path):
    path = _wide_daily_csv(tmp_path)
    bars, _ = import_csv(path, "1d", symbol="ETH-USD")
    expected = random_walk_bars(40, seed=2, freq="1D") * 0.05
    assert len(bars) == 40 and (bars["close"] - expected["close"]).abs().max() < 1e-9
    with pytest.raises(InputError, match=r"no columns for DOGE-USD \(assets in the file: BTC, ETH\)"):
        import_csv(path, "1d", symbol="DOGE-USD")
    out = tmp_path / "BTC-USD_1d.parquet"
    result = cli("import", path, "--symbol", "BTC-USD", "--timeframe", "1d", "--out", out)
    assert result.returncode == 0, result.stderr
    assert load_bars(out)["open"].iloc[0] == pytest.approx(random_walk_bars(40, seed=1, freq="1D")["open"].iloc[0])
