"""The OLPS study's tables: a library price table written as a close-only universe reads back through the portfolio
family's reader with the same prices on the stated exchange's sessions, with odd asset names made safe."""
import numpy as np
import pandas as pd
import pytest

from envs.errors import InputError
from envs.portfolio.universe import load_universe
from experiments.studies.olps_goals import DATA_SETS, chosen_sets, markdown, sanitize_names, write_table


def library_like(columns: list[str], days: int = 40, seed: int = 0) -> pd.DataFrame:
    """Prices as universal-portfolios ships them: cumulated daily relatives, anonymous columns, no dates."""
    relatives = np.random.default_rng(seed).uniform(0.95, 1.05, size=(days, len(columns)))
    return pd.DataFrame(np.cumprod(relatives, axis=0), columns=columns)


def test_odd_and_repeated_names_become_their_column_position():
    assert sanitize_names(["A", "x7", "[", "\\", "a", "\u0080", "A", ""]) == [
        "A", "x7", "C3", "C4", "a", "C6", "C7", "C8"]


def test_a_kept_name_that_clashes_with_a_position_name_is_refused():
    with pytest.raises(InputError, match="C2"):
        sanitize_names(["C2", "["])


def test_the_written_table_reads_back_with_the_same_prices_on_the_exchange_sessions(tmp_path):
    prices = library_like(["A", "B", "[", "\\", "a", "~"])
    path = write_table(prices, DATA_SETS["tse"], tmp_path)
    universe = load_universe(None, str(path), None, None)
    assert universe.symbols == ("A", "B", "C3", "C4", "a", "C6")
    assert universe.close_only and universe.timeframe == "1d"
    np.testing.assert_array_equal(universe.closes, prices.to_numpy())
    # XTSE's sessions from 1994-01-04: no bar on Saturday 1994-01-08
    assert universe.timestamps[0] == pd.Timestamp("1994-01-04", tz="UTC")
    assert pd.Timestamp("1994-01-08", tz="UTC") not in universe.timestamps
    assert pd.read_parquet(path).attrs["calendar"] == "XTSE"


def test_nyse_sessions_skip_the_exchange_holidays(tmp_path):
    prices = library_like(["A", "B"], days=300)
    universe = load_universe(None, str(write_table(prices, DATA_SETS["djia"], tmp_path)), None, None)
    assert universe.timestamps[0] == pd.Timestamp("2001-01-16", tz="UTC")
    assert pd.Timestamp("2001-09-11", tz="UTC") not in universe.timestamps  # NYSE closed 9/11 to 9/14
    assert pd.Timestamp("2001-07-04", tz="UTC") not in universe.timestamps
    np.testing.assert_array_equal(universe.closes, prices.to_numpy())


def test_unknown_sets_are_refused_in_one_line():
    with pytest.raises(InputError, match="unknown sp400"):
        chosen_sets("djia,sp400")
    assert [data_set.key for data_set in chosen_sets("nyse_o, djia")] == ["nyse_o", "djia"]


def test_a_run_without_a_verdict_keeps_the_table_s_columns_and_misses_the_goal():
    failed = {"set": "DJIA", "status": "failed", "why": "no trial could be scored", "overrides": ["training.lr=1"],
              "date": "2026-12-05 10:00"}
    for with_overrides in (False, True):
        header, _, row = markdown([failed], with_overrides).splitlines()
        assert row.count("|") == header.count("|")
        assert "missed" in row and "no trial could be scored" in row
