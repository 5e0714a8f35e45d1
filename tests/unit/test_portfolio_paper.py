"""Paper trading a universe: a replay of the test window through the served model's reader is the backtest's
equity curve to the last digit, a resumed session continues as if never stopped, and a universe that is not the
model's is refused in one line."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from envs.errors import InputError
from envs.portfolio.backtest import evaluate_policy
from envs.portfolio.paper import UniversePaper
from envs.portfolio.universe_reader import UniverseReader

BITFINEX = Path(__file__).resolve().parents[2] / "data" / "raw" / "bitfinex"
FILES = [str(BITFINEX / f"{coin}-USD_1h.parquet") for coin in ("BTC", "ETH", "LTC")]
CONFIG = {"data_paths": FILES, "window": 6, "decision_interval": 24, "split_fractions": [0.8, 0.1, 0.1],
          "fee_bps": 10.0, "slippage_bps": 5.0}


def policy(obs: np.ndarray) -> np.ndarray:
    """Scores from each asset's last log return and its held weight (so costs and holdings matter), cash 0.2."""
    return np.concatenate([[0.2], np.tanh(3.0 * obs[0, :, -8] - obs[0, :, -2])])[None]


@pytest.fixture(scope="module")
def reader() -> UniverseReader:
    return UniverseReader.for_env_config(CONFIG)


def ask_with(reader: UniverseReader):
    return lambda request: reader.decide(request, policy)


def test_a_paper_replay_of_the_test_window_is_the_backtest_to_the_last_digit(reader) -> None:
    report = evaluate_policy(policy, CONFIG)
    paper = UniversePaper(reader, list(reversed(FILES)))  # files in any order: the model's order is used
    data = paper.read()
    index = paper.index(data)
    lo = int(index.searchsorted(pd.Timestamp(reader.test_start)))
    hi = int(index.searchsorted(pd.Timestamp(reader.test_end))) + 1
    book = paper.new_book()
    equity = paper.replay(book, data, range(lo, hi), ask_with(reader))
    backtest = report.series["agent"].to_numpy()
    assert len(equity) == len(backtest) and np.array_equal(equity, backtest)
    assert book.book.rebalances == report.table.loc["agent", "trades"] > 0
    assert book.book.costs_paid == report.table.loc["agent", "fees_paid"] > 0


def test_a_resumed_session_continues_as_if_never_stopped(reader) -> None:
    paper = UniversePaper(reader, FILES)
    data = paper.read()
    lo = int(paper.index(data).searchsorted(pd.Timestamp(reader.test_start)))
    rows = range(lo, lo + 300)
    whole = paper.replay(paper.new_book(), data, rows, ask_with(reader))
    first = paper.new_book()
    head = paper.replay(first, data, rows[:137], ask_with(reader))
    resumed = UniversePaper.book_from_state(json.loads(json.dumps(first.to_state())))
    tail = paper.replay(resumed, data, rows[137:], ask_with(reader))
    assert np.array_equal(np.concatenate([head, tail]), whole)


def test_a_wide_table_of_the_same_bars_is_the_same_session(reader, tmp_path) -> None:
    paper = UniversePaper(reader, FILES)
    universe, table = paper.read()
    path = tmp_path / "wide.csv"
    table.rename_axis("timestamp").reset_index().to_csv(path, index=False)
    wide = UniversePaper(reader, [str(path)])
    data = wide.read()
    lo = int(wide.index(data).searchsorted(pd.Timestamp(reader.test_start)))
    rows = range(lo, lo + 100)
    assert np.array_equal(wide.replay(wide.new_book(), data, rows, ask_with(reader)),
                          paper.replay(paper.new_book(), (universe, table), rows, ask_with(reader)))


@pytest.mark.parametrize("files, message", [
    (FILES[:2], "missing LTC-USD"),
    ([*FILES, str(BITFINEX / "EOS-USD_1h.parquet")], "extra EOS-USD"),
])
def test_a_universe_that_is_not_the_models_is_refused_in_one_line(reader, files, message) -> None:
    with pytest.raises(InputError) as caught:
        UniversePaper(reader, files).read()
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_an_answer_for_other_assets_is_refused_in_one_line(reader) -> None:
    paper = UniversePaper(reader, FILES)
    data = paper.read()
    lo = int(paper.index(data).searchsorted(pd.Timestamp(reader.test_start)))

    def other(request: pd.DataFrame) -> pd.DataFrame:
        return reader.decide(request, policy).iloc[::-1]

    with pytest.raises(InputError, match="paper-trade it on the universe it was registered with"):
        paper.replay(paper.new_book(), data, range(lo, lo + 2), other)
