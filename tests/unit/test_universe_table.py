"""A universe's wide table gets the importer's checks (issue 51 points 1-6): pandas' own CSV as written, the timeframe
from the bars' spacing, duplicates, high below low, broken cells under the gap rule and text refused, the same answer
as a one-asset import, and `experiments.data import --universe` writing one universe parquet that table_path reads."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from envs.errors import InputError
from envs.portfolio.config import PortfolioConfig
from envs.portfolio.universe import load_universe
from envs.trading.csv_import import import_csv
from tests.conftest import REPO, random_walk_bars

FIELDS = ("open", "high", "low", "close", "volume")
ASSETS = ("BTC", "ETH", "SOL")


def _table(n: int = 80, freq: str = "1d") -> pd.DataFrame:
    """Three coins' daily bars as pandas holds them: a DatetimeIndex and ASSET:field columns; SOL listed late."""
    columns = {}
    for seed, asset in enumerate(ASSETS):
        bars = random_walk_bars(n, seed=seed, freq=freq) * (1 + seed)
        for field in FIELDS:
            columns[f"{asset}:{field}"] = bars[field].to_numpy()
    table = pd.DataFrame(columns, index=random_walk_bars(n, freq=freq).index.tz_localize(None))
    table.iloc[:10, [list(columns).index(f"SOL:{field}") for field in FIELDS]] = np.nan
    return table


def _pandas_csv(tmp_path: Path, table: pd.DataFrame) -> Path:
    path = tmp_path / "coins.csv"
    table.rename_axis(None).to_csv(path)  # pandas' default: an unnamed index first (`,BTC:open,...`)
    return path


def _edit_cell(path: Path, row: int, column: str, value: str) -> None:
    """Write `value` into a CSV cell (row 1 = the first bar), as a hand-edited export has it."""
    lines = path.read_text().splitlines()
    at = lines[0].split(",").index(column)
    cells = lines[row].split(",")
    cells[at] = value
    lines[row] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")


def _one_line(error: pytest.ExceptionInfo, path: Path) -> str:
    message = str(error.value)
    assert "\n" not in message and str(path) in message
    return message


def test_a_pandas_written_csv_is_read_as_written_with_its_timeframe_from_the_spacing(tmp_path):
    table = _table()
    path = _pandas_csv(tmp_path, table)
    assert path.read_text().startswith(",BTC:open,")
    universe = load_universe(None, str(path), None, None)
    assert universe.symbols == ASSETS and universe.timeframe == "1d"
    assert len(universe.timestamps) == 80
    np.testing.assert_allclose(universe.closes[:, 0], table["BTC:close"])
    assert universe.first_rows.tolist() == [0, 0, 10]  # SOL's empty leading rows: not listed yet, not broken bars


def test_a_first_column_that_is_not_time_is_refused_naming_it(tmp_path):
    path = tmp_path / "t.csv"
    _table().reset_index(drop=True).to_csv(path)  # a 0, 1, 2 ... index: no time
    with pytest.raises(InputError, match=r"first column 'Unnamed: 0' read as epoch times puts a bar at 1970-01-01"
                                         r".*a row number, not a time") as error:
        load_universe(None, str(path), None, None)
    _one_line(error, path)
    _table().reset_index().assign(timestamp="day").to_csv(path, index=False)  # a text first column
    with pytest.raises(InputError, match=r"cannot read 'day' as a timestamp.*first column is its bar times"):
        load_universe(None, str(path), None, None)
    _table().reset_index(drop=True).to_csv(path, index=False)  # no time column at all: BTC:open first
    with pytest.raises(InputError, match=r"needs its time as the first column; found 'BTC:open'"):
        load_universe(None, str(path), None, None)


def test_an_ambiguous_spacing_is_refused_saying_what_was_found(tmp_path):
    table = _table(40)
    stamps = table.index.to_series()
    stamps.iloc[::2] += pd.Timedelta(hours=7)  # 7h and 17h apart by turns: no timeframe
    path = _pandas_csv(tmp_path, table.set_axis(pd.DatetimeIndex(stamps)))
    with pytest.raises(InputError, match=r"cannot tell the timeframe from the bars' spacing .*set "
                                         r"environment.env_config.timeframe") as error:
        load_universe(None, str(path), None, None)
    _one_line(error, path)
    with pytest.raises(InputError, match=r"timeframe '1h' contradicts the data"):
        load_universe(None, str(_pandas_csv(tmp_path, _table())), None, "1h")


def test_a_duplicated_timestamp_is_dropped_when_identical_and_refused_when_not(tmp_path):
    table = _table()
    repeated = pd.concat([table, table.iloc[[30]]])
    universe = load_universe(None, str(_pandas_csv(tmp_path, repeated)), None, None)
    assert len(universe.timestamps) == 80
    conflicting = repeated.copy()
    conflicting.iloc[-1, 3] *= 1.01  # BTC:close differs on the repeated day
    path = _pandas_csv(tmp_path, conflicting)
    with pytest.raises(InputError, match=r"two different bars share the timestamp 2021-01-31") as error:
        load_universe(None, str(path), None, None)
    _one_line(error, path)


def test_high_below_low_gets_the_importers_answer_in_both_families(tmp_path):
    table = _table()
    table["BTC:high"], table["BTC:low"] = table["BTC:low"].to_numpy(), table["BTC:high"].to_numpy()
    path = _pandas_csv(tmp_path, table)
    with pytest.raises(InputError, match=r"\(BTC\): high below open/close/low in 80 bar\(s\)") as error:
        load_universe(None, str(path), None, None)
    universe_message = _one_line(error, path)
    with pytest.raises(InputError, match=r"high below open/close/low in 80 bar\(s\)") as error:
        import_csv(path, "1d", symbol="BTC-USD")
    assert universe_message.split(": ", 1)[1].replace("(BTC): ", "") == str(error.value).split(": ", 1)[1]


@pytest.mark.parametrize("cell", ["n/a", ""])
def test_a_broken_close_is_filled_at_the_last_close_and_said(tmp_path, cell, capsys):
    path = _pandas_csv(tmp_path, _table())
    _edit_cell(path, 41, "ETH:close", cell)
    universe = load_universe(None, str(path), None, None)
    assert universe.closes[40, 1] == universe.closes[39, 1]
    said = capsys.readouterr().err
    assert f"{path}: empty cells: 1 bar(s) of ETH with an empty or unreadable price, first at 2021-02-10 00:00: " \
           "filled at the last close (--gaps ffill)" in said
    assert "of BTC" not in said and "gaps:" not in said  # a broken bar is said once, not again as a gap


def test_text_in_a_price_cell_is_refused_naming_the_cell(tmp_path):
    path = _pandas_csv(tmp_path, _table())
    _edit_cell(path, 5, "BTC:close", "abc")
    with pytest.raises(InputError, match=r"column 'BTC:close' row 5: 'abc' is not a number") as error:
        load_universe(None, str(path), None, None)
    _one_line(error, path)


def test_a_table_and_files_together_are_refused_naming_both():
    with pytest.raises(ValueError, match=r"data_paths .* or table_path .*, not both"):
        PortfolioConfig.from_dict({"data_paths": ["a.parquet", "b.parquet"], "table_path": "t.csv"})


def _data(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "experiments.data", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)


def test_the_importer_writes_a_whole_table_as_one_universe_that_table_path_reads(tmp_path):
    path = _pandas_csv(tmp_path, _table())
    _edit_cell(path, 41, "ETH:close", "n/a")
    out = tmp_path / "coins.parquet"
    result = _data("import", str(path), "--universe", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "a universe of 3 assets (BTC, ETH, SOL), 1d OHLCV bars, 80 bar times" in result.stdout
    assert "timeframe: 1d (the bars' spacing)" in result.stdout
    assert "  SOL starts 2021-01-11 00:00 UTC: 10 earlier row(s) with no SOL prices left out" in result.stdout
    assert "  empty cells: 1 bar(s) of ETH" in result.stdout and not result.stderr
    stored = pd.read_parquet(out)
    assert stored.attrs["kind"] == "universe" and stored.attrs["timeframe"] == "1d"
    assert stored.attrs["gaps"] == "ffill" and stored.attrs["calendar"]
    from_csv, from_parquet = (load_universe(None, str(p), None, None) for p in (path, out))
    np.testing.assert_array_equal(from_csv.closes, from_parquet.closes)
    assert from_parquet.timestamps.equals(from_csv.timestamps)


def test_a_bad_table_gets_one_line_exit_2_and_nothing_written(tmp_path):
    path = _pandas_csv(tmp_path, _table())
    _edit_cell(path, 5, "BTC:close", "abc")
    out = tmp_path / "coins.parquet"
    result = _data("import", str(path), "--universe", "--out", str(out))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "'abc' is not a number" in result.stderr
    assert not list(tmp_path.glob("coins.parquet*"))


def test_an_equitys_empty_weekends_in_a_crypto_table_are_closed_days_not_gaps(tmp_path, capsys):
    table = _table(70)
    weekend = table.index.dayofweek >= 5
    table.loc[weekend, [f"ETH:{field}" for field in FIELDS]] = np.nan  # ETH stands for an index: no weekend bars
    universe = load_universe(None, str(_pandas_csv(tmp_path, table)), None, None)
    said = capsys.readouterr().err
    assert "gaps" not in said and "empty cells" not in said
    assert universe.timeframe == "1d" and len(universe.timestamps) == 70
    saturday = int(np.flatnonzero(weekend)[0])
    assert universe.closes[saturday, 1] == universe.closes[saturday - 1, 1]  # flat over the weekend, never traded
