"""Paper trading a universe reads only what changed (issue 51 point 10): a wide CSV's appended rows are checked from
the last row read and give the universe a fresh whole read gives; a bars parquet whose size and time stay the same
is not loaded again; a CSV rewritten, or whose new rows fail a check, is read whole (a defect in one line); while
following, a last line without its newline waits."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import envs.portfolio.universe as universe_module
import envs.portfolio.universe_table as universe_table
from envs.errors import InputError
from envs.portfolio.universe import Universe, load_universe
from envs.portfolio.universe_files import UniverseFiles
from envs.trading.data import save_bars
from tests.conftest import random_walk_bars

FIELDS = ("open", "high", "low", "close", "volume")
COINS = ("BTC", "ETH", "SOL")


def _table(n: int = 100) -> pd.DataFrame:
    """Daily bars of three coins (SOL listed late) and one equity index (SPY: empty cells on weekends), as pandas
    holds a wide table."""
    columns = {}
    for seed, asset in enumerate((*COINS, "SPY")):
        bars = random_walk_bars(n, seed=seed, freq="1d") * (1 + seed)
        for field in FIELDS:
            columns[f"{asset}:{field}"] = bars[field].to_numpy()
    table = pd.DataFrame(columns, index=random_walk_bars(n, freq="1d").index.tz_localize(None))
    table.iloc[:10, [table.columns.get_loc(f"SOL:{field}") for field in FIELDS]] = np.nan
    weekend = table.index.dayofweek >= 5
    table.loc[weekend, [f"SPY:{field}" for field in FIELDS]] = np.nan
    return table


def _append(path: Path, rows: pd.DataFrame) -> None:
    rows.rename_axis(None).to_csv(path, mode="a", header=False)


def _same(got: Universe, fresh: Universe) -> None:
    assert got.symbols == fresh.symbols and got.timestamps.equals(fresh.timestamps)
    for name in ("opens", "closes", "listed"):
        np.testing.assert_array_equal(getattr(got, name), getattr(fresh, name))
    for mine, theirs in zip(got.frames, fresh.frames, strict=True):
        pd.testing.assert_frame_equal(mine, theirs)


@pytest.fixture
def parsed(monkeypatch) -> list[str | None]:
    """The text of every wide table `check_table` parses (None: the file itself)."""
    texts: list[str | None] = []
    read_table = universe_table.read_table

    def spy(path: str, text: str | None = None) -> pd.DataFrame:
        texts.append(text)
        return read_table(path, text)

    monkeypatch.setattr(universe_table, "read_table", spy)
    return texts


def test_rows_appended_to_a_csv_are_parsed_alone_and_give_the_fresh_whole_reads_universe(tmp_path, parsed):
    table = _table(103)
    path = tmp_path / "universe.csv"
    table.iloc[:60].rename_axis(None).to_csv(path)
    files = UniverseFiles([str(path)])
    files.read()
    assert len(parsed) == 1 and parsed[0].count("\n") == 61  # the whole file: its header and 60 rows
    table.iloc[63:66, table.columns.get_loc("BTC:close")] = np.nan  # broken cells in the new rows: filled
    table.loc[table.index[85]:, [f"ETH:{field}" for field in FIELDS]] = np.nan  # ETH's last price at row 84
    # Rows 60-99 run from a Tuesday to a Saturday, the last row SPY's weekend; rows 100-102 SPY trades again
    # after its last price (Sunday, Monday, Tuesday): that is read whole, as its weekend cells are then filled.
    for start, stop, whole in ((60, 70, False), (70, 90, False), (90, 100, False), (100, 103, True)):
        parsed.clear()
        _append(path, table.iloc[start:stop])
        got = files.read()
        if whole:
            assert parsed == [path.read_text()]
        else:  # the header, the last row read and the new rows (checked once per calendar the assets are on)
            header, seam, *new = parsed[0].splitlines()
            assert header == path.read_text().splitlines()[0] and seam == path.read_text().splitlines()[start]
            assert len(new) == stop - start and parsed == [parsed[0]] * len(parsed)
        _same(got, load_universe(None, str(path), None, None))
    assert got.listed[:, 1].sum() == 85 and got.listed[-1].tolist() == [True, False, True, True]


def test_a_poll_with_nothing_new_returns_the_last_universe_and_reads_no_rows(tmp_path, parsed):
    path = tmp_path / "universe.csv"
    _table().rename_axis(None).to_csv(path)
    files = UniverseFiles([str(path)])
    first = files.read()
    assert files.read() is first and len(parsed) == 1


def test_a_parquet_whose_size_and_time_did_not_change_is_not_loaded_again(tmp_path, monkeypatch):
    bars = {coin: random_walk_bars(200, seed=seed) for seed, coin in enumerate(COINS)}
    paths = [str(save_bars(b.iloc[:150], tmp_path / f"{coin}-USD_1h.parquet", f"{coin}-USD", "1h"))
             for coin, b in bars.items()]
    files = UniverseFiles(paths)
    first = files.read()
    loaded: list[str] = []
    load_bars = universe_module.load_bars
    monkeypatch.setattr(universe_module, "load_bars", lambda path: loaded.append(path) or load_bars(path))
    assert files.read() is first and loaded == []
    save_bars(bars["ETH"], paths[1], "ETH-USD", "1h")  # `experiments.data update`: rewritten whole, one bar more
    got = files.read()
    assert loaded == [paths[1]]
    _same(got, load_universe(paths, None, None, None))


def test_a_rewritten_csv_is_read_whole(tmp_path, parsed):
    table = _table()
    path = tmp_path / "universe.csv"
    table.iloc[:60].rename_axis(None).to_csv(path)
    files = UniverseFiles([str(path)])
    files.read()
    prices = [column for column in table.columns if not column.endswith(":volume")]
    table[prices] *= 1.5  # a corrected export: other prices, one more row
    table.iloc[:61].rename_axis(None).to_csv(path)
    parsed.clear()
    got = files.read()
    assert parsed == [path.read_text()]
    _same(got, load_universe(None, str(path), None, None))


def test_text_in_an_appended_price_cell_is_refused_in_one_line_naming_the_file(tmp_path, parsed):
    table = _table()
    path = tmp_path / "universe.csv"
    table.iloc[:60].rename_axis(None).to_csv(path)
    files = UniverseFiles([str(path)])
    files.read()
    rows = table.iloc[60:62].astype(object)
    rows.iloc[1, rows.columns.get_loc("BTC:close")] = "abc"
    _append(path, rows)
    parsed.clear()
    with pytest.raises(InputError) as error:
        files.read()
    message = str(error.value)
    assert str(path) in message and "'abc' is not a number" in message and "\n" not in message
    assert parsed[0].count("\n") == 4 and parsed[1] == path.read_text()  # the new rows, then the whole file


def test_while_following_a_last_line_without_its_newline_waits(tmp_path):
    table = _table()
    path = tmp_path / "universe.csv"
    table.iloc[:60].rename_axis(None).to_csv(path)
    files = UniverseFiles([str(path)], follow=True)
    first = files.read()
    line = table.iloc[60:61].rename_axis(None).to_csv(header=False)
    with path.open("a") as handle:
        handle.write(line[:-8])  # the row half written
    assert files.read() is first
    with path.open("a") as handle:
        handle.write(line[-8:])
    got = files.read()
    assert len(got.timestamps) == 61
    _same(got, load_universe(None, str(path), None, None))


def test_a_paper_poll_with_nothing_new_returns_the_last_universe_and_table_and_a_refusal_stays(monkeypatch):
    from envs.portfolio.paper import UniversePaper
    from envs.portfolio.universe_reader import UniverseReader

    bitfinex = Path(__file__).resolve().parents[2] / "data" / "raw" / "bitfinex"
    files = [str(bitfinex / f"{coin}-USD_1h.parquet") for coin in ("LTC", "BTC", "ETH")]
    reader = UniverseReader(symbols=("BTC-USD", "ETH-USD", "LTC-USD"), features=[], timeframe="1h", window=1,
                            close_only=False)
    paper = UniversePaper(reader, files, follow=True)
    universe, table = paper.read()
    assert universe.symbols == reader.symbols  # the model's order, whatever the files' order
    loaded: list[str] = []
    load_bars = universe_module.load_bars
    monkeypatch.setattr(universe_module, "load_bars", lambda path: loaded.append(path) or load_bars(path))
    again = paper.read()
    assert again[0] is universe and again[1] is table and loaded == []
    daily = UniversePaper(UniverseReader(symbols=reader.symbols, features=[], timeframe="1d", window=1,
                                         close_only=False), files)
    for _ in range(2):  # refused at every poll, never served from the poll before
        with pytest.raises(InputError, match="1h bars, but the model trades 1d bars"):
            daily.read()
