"""A served portfolio model reads the universe's last bars as the env does, bit for bit, and refuses what does not
fit it in one line."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from envs.errors import InputError
from envs.portfolio.env import PortfolioEnv
from envs.portfolio.universe_reader import UniverseReader

BITFINEX = Path(__file__).resolve().parents[2] / "data" / "raw" / "bitfinex"
CONFIG = {"data_paths": [str(BITFINEX / f"{coin}-USD_1h.parquet") for coin in ("BTC", "ETH", "LTC")],
          "window": 6, "decision_interval": 24, "split_fractions": [0.8, 0.1, 0.1]}


@pytest.fixture(scope="module")
def env_and_reader() -> tuple[PortfolioEnv, UniverseReader]:
    env = PortfolioEnv({**CONFIG, "split": "test", "episode_length": None})
    return env, UniverseReader.for_env_config(CONFIG)


def wide_table(env: PortfolioEnv, row: int, bars: int, held: np.ndarray | None = None) -> pd.DataFrame:
    """The universe's last `bars` bars up to `row` as a request table, with the held weights on every row."""
    universe = env.market.universe
    lo = row - bars + 1
    columns: dict[str, object] = {"timestamp": universe.timestamps[lo:row + 1].astype(str)}
    for symbol, frame in zip(universe.symbols, universe.frames, strict=True):
        part = frame.reindex(universe.timestamps[lo:row + 1])
        for name in ("open", "high", "low", "close", "volume"):
            columns[f"{symbol}:{name}"] = part[name].to_numpy()
    table = pd.DataFrame(columns)
    if held is not None:
        for name, weight in zip(["cash", *universe.symbols], held, strict=True):
            table[f"weight:{name}"] = weight
    return table


def test_the_served_observation_is_the_envs_at_every_decision_of_the_test_window(env_and_reader) -> None:
    env, reader = env_and_reader
    lo, hi = env.market.bounds["test"]
    held = np.array([0.1, 0.5, 0.3, 0.1])
    for row in range(lo, hi - 1, 24):
        observation, tradable, stamp = reader.read(wide_table(env, row, reader.bars_needed + 5, held))
        assert np.array_equal(observation[0], env.observation_at(row, held[1:])), row
        assert np.array_equal(tradable, env.market.tradable[row])
        assert stamp == env.market.timestamps[row]


def test_the_decision_is_the_envs_weight_map_of_the_policys_scores(env_and_reader) -> None:
    env, reader = env_and_reader
    row = env.market.bounds["test"][0] + 48

    def policy(obs: np.ndarray) -> np.ndarray:  # scores from each asset's last log return, cash 0
        return np.concatenate([[0.0], np.tanh(obs[0, :, -7])])[None]

    answer = reader.decide(wide_table(env, row, reader.bars_needed), policy)
    assert list(answer["asset"]) == ["cash", "BTC-USD", "ETH-USD", "LTC-USD"]
    expected = env.weights_of(policy(env.observation_at(row, np.zeros(3))[None])[0], row)
    assert np.array_equal(answer["target_weight"].to_numpy(), expected)
    assert answer["bar_time"].iloc[0] == env.market.timestamps[row].isoformat()


def test_a_saved_reader_reads_the_same(env_and_reader, tmp_path: Path) -> None:
    env, reader = env_and_reader
    reader.save(tmp_path / "reader.npz")
    loaded = UniverseReader.load(tmp_path / "reader.npz")
    table = wide_table(env, env.market.bounds["test"][0], reader.bars_needed)
    assert np.array_equal(loaded.read(table)[0], reader.read(table)[0])


@pytest.mark.parametrize("change, words", [
    (lambda t: t.drop(columns=[c for c in t.columns if c.startswith("LTC-USD:")]), "missing LTC-USD"),
    (lambda t: t.assign(**{"XRP-USD:close": 1.0}), "extra XRP-USD"),
    (lambda t: t.iloc[-5:], "this model reads the last"),
    (lambda t: t.assign(**{"weight:cash": 0.5, "weight:BTC-USD": 0.2}), "sum to"),
    (lambda t: t.assign(**{"weight:cash": 1.5, "weight:BTC-USD": -0.5}), "negative"),
    (lambda t: t.assign(**{"weight:cash": np.nan}), "NaN"),
])
def test_what_does_not_fit_the_model_is_refused_in_one_line(env_and_reader, change, words) -> None:
    env, reader = env_and_reader
    table = change(wide_table(env, env.market.bounds["test"][0], reader.bars_needed))
    with pytest.raises(InputError, match=words) as error:
        reader.read(table)
    assert "\n" not in str(error.value)


def test_a_replay_of_the_test_window_through_the_reader_is_the_backtest_to_the_last_digit(env_and_reader) -> None:
    """Decision by decision, the served model is given the bars up to the decision and the weights the book holds
    there; its targets, filled by the same book, give the backtest's equity exactly."""
    from envs.portfolio.backtest import agent_targets
    from envs.portfolio.book import PortfolioBook, replay_weights, step_book

    env, reader = env_and_reader

    def policy(obs: np.ndarray) -> np.ndarray:
        return np.concatenate([np.zeros((len(obs), 1)), np.tanh(3 * obs[:, :, -7])], axis=1)

    expected = agent_targets(policy, env)
    universe = env.market.universe
    lo, hi = env.market.bounds["test"]
    book, served = PortfolioBook(universe.n_assets, env.cfg.cost_rate), np.full_like(expected, np.nan)
    for row in range(lo, hi - 1, env.cfg.decision_interval):
        held = book.weights(universe.closes[row]) if row > lo else np.r_[1.0, np.zeros(universe.n_assets)]
        answer = reader.decide(wide_table(env, row, reader.bars_needed, held), policy)
        served[row - lo] = answer["target_weight"].to_numpy()
        step_book(book, served[row - lo], row + 1, min(row + env.cfg.decision_interval, hi - 1), universe.opens,
                  universe.closes, universe.last_rows)
    assert np.array_equal(np.isnan(served), np.isnan(expected))
    assert np.array_equal(served[~np.isnan(served)], expected[~np.isnan(expected)])
    ours, _ = replay_weights(served, lo, universe.opens, universe.closes, universe.last_rows, env.cfg.cost_rate)
    theirs, _ = replay_weights(expected, lo, universe.opens, universe.closes, universe.last_rows, env.cfg.cost_rate)
    assert ours.tolist() == theirs.tolist()
