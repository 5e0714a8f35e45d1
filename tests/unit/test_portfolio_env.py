"""trading/Portfolio-v0 on universes built here: spaces, assets that come and go, the walk vs the replay, and bad
input refused in one line."""
from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

import envs  # noqa: F401  (registers the ids)
from envs.errors import InputError
from envs.portfolio.book import replay_weights
from envs.portfolio.env import PortfolioEnv
from envs.portfolio.weights import check_user_weights, scores_to_weights
from envs.trading.data import save_bars

BITFINEX = Path(__file__).resolve().parents[2] / "data" / "raw" / "bitfinex"
CRYPTO = [str(BITFINEX / f"{coin}-USD_1h.parquet") for coin in ("BTC", "ETH", "LTC")]


def random_bars(start: str, n: int, seed: int, freq: str = "1h") -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    close = 100.0 * np.exp(np.cumsum(rng.normal(0.0, 0.01, n)))
    open_ = np.concatenate([[close[0]], close[:-1]]) * np.exp(rng.normal(0.0, 0.001, n))
    high = np.maximum(open_, close) * 1.002
    low = np.minimum(open_, close) * 0.998
    index = pd.date_range(start, periods=n, freq=freq, tz="UTC", name="timestamp")
    return pd.DataFrame({"open": open_, "high": high, "low": low, "close": close, "volume": rng.uniform(1, 5, n)},
                        index=index)


def write(tmp_path: Path, name: str, bars: pd.DataFrame, timeframe: str = "1h") -> str:
    return str(save_bars(bars, tmp_path / f"{name}_{timeframe}.parquet", name, timeframe))


@pytest.fixture()
def coming_and_going(tmp_path: Path) -> list[str]:
    """A from the start, B listed 300 bars later, C whose bars end 400 bars before the others'."""
    return [write(tmp_path, "AAA-USD", random_bars("2021-01-01", 2000, 1)),
            write(tmp_path, "BBB-USD", random_bars("2021-01-13 12:00", 1700, 2)),
            write(tmp_path, "CCC-USD", random_bars("2021-01-01", 1600, 3))]


CONFIG = {"window": 4, "decision_interval": 6, "episode_length": None, "fee_bps": 10.0, "slippage_bps": 2.0,
          "features": ["log_return", {"transform": "volatility", "window": 12}]}


def walk(env: PortfolioEnv, seed: int = 0) -> tuple[list[float], np.ndarray]:
    """A random-score walk of the env's part: equity after each step and the targets at decision rows."""
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    lo, hi = env.market.bounds[env.cfg.split]
    targets = np.full((hi - lo, env.n_assets + 1), np.nan)
    equities, done = [], False
    while not done:
        row = info["row"]
        assert env.observation_space.contains(obs)
        obs, _, terminated, truncated, info = env.step(rng.uniform(-1, 1, env.n_assets + 1).astype(np.float32))
        targets[row - lo] = info["weights"]
        equities.append(info["equity"])
        done = terminated or truncated
    return equities, targets


def test_the_bundled_coins_make_a_universe_with_one_row_per_asset() -> None:
    env = gym.make("trading/Portfolio-v0", config={"data_paths": CRYPTO, "window": 8}).unwrapped
    assert env.observation_space.shape == (3, 8 * 5 + 2)
    assert env.action_space.shape == (4,)
    assert env.market.universe.symbols == ("BTC-USD", "ETH-USD", "LTC-USD")
    assert env.market.bars_per_year == pytest.approx(8760.0)
    obs, _ = env.reset(seed=1)
    obs, reward, _, _, info = env.step(np.array([0.0, 1.0, -1.0, 0.0], dtype=np.float32))
    assert np.isfinite(reward) and info["weights"].sum() == pytest.approx(1.0, abs=1e-12)
    assert info["costs_paid"] > 0.0


def test_an_asset_gets_no_weight_before_it_lists_and_is_sold_when_its_bars_end(coming_and_going: list[str]) -> None:
    env = PortfolioEnv({**CONFIG, "data_paths": coming_and_going, "split": "train",
                        "split_fractions": [0.9, 0.05, 0.05]})
    universe = env.market.universe
    first_b = int(universe.first_rows[1])
    assert first_b == 300 and int(universe.last_rows[2]) == 1599
    assert int(universe.last_rows[0]) == len(universe.timestamps)
    _, targets = walk(env)
    lo = env.market.bounds["train"][0]
    decided = ~np.isnan(targets[:, 0])
    rows = np.arange(lo, lo + len(targets))[decided]
    weights = targets[decided]
    # B: nothing until its features are whole over the window after its listing; C: nothing from its last bar on.
    assert np.all(weights[rows < first_b + 12 + 4 - 1, 2] == 0.0)
    assert np.all(weights[rows >= 1599, 3] == 0.0)
    assert (weights[rows < 1599, 3] > 0).any() and (weights[rows > first_b + 20, 2] > 0).any()
    assert env.book.units[2] == 0.0  # sold at its last close


@pytest.mark.parametrize("rule", ["long_only", "long_short"])
def test_the_env_walk_and_the_scorers_replay_reach_the_same_equity_to_the_last_digit(
        coming_and_going: list[str], rule: str) -> None:
    env = PortfolioEnv({**CONFIG, "data_paths": coming_and_going, "split": "train", "weights": rule,
                        "split_fractions": [0.9, 0.05, 0.05]})
    equities, targets = walk(env, seed=3)
    lo = env.market.bounds["train"][0]
    universe = env.market.universe
    replayed, book = replay_weights(targets, lo, universe.opens, universe.closes, universe.last_rows, env.cfg.cost_rate)
    decided = np.flatnonzero(~np.isnan(targets[:, 0]))
    marks = np.minimum(decided + env.cfg.decision_interval, len(targets) - 1)
    assert replayed[marks].tolist() == equities
    assert book.costs_paid == env.book.costs_paid


def test_long_short_weights_keep_their_gross_under_the_cap_and_cash_takes_the_rest() -> None:
    rng = np.random.default_rng(0)
    scores = rng.uniform(-1, 1, (500, 6))
    tradable = rng.random((500, 5)) < 0.8
    weights = scores_to_weights(scores, tradable, "long_short", kappa=3.0, gross_cap=0.7)
    assert np.all(np.abs(weights[:, 1:]).sum(axis=1) <= 0.7 + 1e-12)
    assert np.allclose(weights.sum(axis=1), 1.0, atol=1e-12)
    assert np.all(weights[:, 1:][~tradable] == 0.0)
    long_only = scores_to_weights(scores, tradable, "long_only", kappa=3.0)
    assert np.all(long_only >= 0.0) and np.all(long_only[:, 1:][~tradable] == 0.0)


def test_a_close_only_wide_table_trades_at_the_decision_close(tmp_path: Path) -> None:
    closes = {f"S{i}:close": random_bars("2000-01-03", 800, i, freq="B")["close"].to_numpy() for i in range(4)}
    table = pd.DataFrame({"date": pd.bdate_range("2000-01-03", periods=800).strftime("%Y-%m-%d"), **closes})
    path = tmp_path / "stocks.csv"
    table.to_csv(path, index=False)
    env = PortfolioEnv({**CONFIG, "table_path": str(path), "timeframe": "1d", "decision_interval": 1})
    universe = env.market.universe
    assert universe.close_only and universe.symbols == ("S0", "S1", "S2", "S3")
    assert np.array_equal(universe.opens[1:], universe.closes[:-1])
    assert 245 < env.market.bars_per_year < 265  # weekdays, not 365


def test_a_user_gives_weights_that_sum_to_one_without_nan_or_shorts_under_long_only() -> None:
    check_user_weights(np.array([0.2, 0.3, 0.5]), "long_only", "w")
    for bad, words in (([0.2, np.nan, 0.8], "NaN"), ([1.2, -0.2, 0.0], "negative"), ([0.2, 0.3, 0.5 + 2e-9], "sum")):
        with pytest.raises(InputError, match=words):
            check_user_weights(np.array(bad), "long_only", "w")
    check_user_weights(np.array([1.2, -0.2, 0.0]), "long_short", "w")


def refusal(config: dict) -> str:
    with pytest.raises(InputError) as error:
        PortfolioEnv({**CONFIG, **config})
    message = str(error.value)
    assert "\n" not in message
    return message


def test_bad_universes_are_refused_in_one_line_naming_the_fix(tmp_path: Path) -> None:
    hourly = write(tmp_path, "AAA-USD", random_bars("2021-01-01", 500, 1))
    daily = write(tmp_path, "BBB-USD", random_bars("2021-01-01", 500, 2, freq="1D"), timeframe="1d")
    later = write(tmp_path, "CCC-USD", random_bars("2022-01-01", 500, 3))
    assert "different timeframes" in refusal({"data_paths": [hourly, daily]})
    assert "two assets trade" in refusal({"data_paths": [hourly, later]})
    assert "trading/Spot-v0" in refusal({"data_paths": [hourly]})
    table = tmp_path / "wide.csv"
    pd.DataFrame({"date": pd.date_range("2020-01-01", periods=300).strftime("%Y-%m-%d"),
                  "A:close": np.linspace(1, 2, 300), "B:close": np.linspace(2, 1, 300)}).to_csv(table, index=False)
    assert "no columns for C" in refusal({"table_path": str(table), "assets": ["A", "C"], "timeframe": "1d"})
    assert "'range' reads high, low" in refusal({"table_path": str(table), "timeframe": "1d", "features": ["range"]})
    assert "high, low" in refusal({"table_path": str(table), "timeframe": "1d", "features": [{"ta": "ATR"}]})
    assert "reads volume" in refusal({"table_path": str(table), "timeframe": "1d", "features": ["volume_z"]})
    assert "weekdays" in refusal({"table_path": str(table), "timeframe": "1d", "calendar": "weekdays"})
    short = write(tmp_path, "DDD-USD", random_bars("2021-01-01", 500, 4))
    assert "fewer than" in refusal({"data_paths": [hourly, short],
                                    "protocol": {"type": "walk_forward", "folds": 4, "test_size": 200,
                                                 "validation_size": 100}})


def test_a_wide_export_with_a_late_listing_and_a_delisting_keeps_their_weights_at_zero_outside(tmp_path: Path) -> None:
    """An exchange's wide export: C's cells are empty until its listing (row 300), B's after its delisting (row
    1,500), and A has a one-day hole; each is on the table's one calendar."""
    n = 2000
    frames = {name: random_bars("2021-01-01", n, seed) for name, seed in (("A", 1), ("B", 2), ("C", 3))}
    table = pd.DataFrame({"time": frames["A"].index.strftime("%Y-%m-%d %H:%M")})
    for name, bars in frames.items():
        for field in ("open", "high", "low", "close", "volume"):
            table[f"{name}:{field}"] = bars[field].to_numpy()
    table.loc[:299, [c for c in table.columns if c.startswith("C:")]] = np.nan
    table.loc[1500:, [c for c in table.columns if c.startswith("B:")]] = np.nan
    table.loc[700:723, [c for c in table.columns if c.startswith("A:")]] = np.nan
    path = tmp_path / "export.csv"
    table.to_csv(path, index=False)
    env = PortfolioEnv({**CONFIG, "table_path": str(path), "timeframe": "1h", "split": "train",
                        "split_fractions": [0.9, 0.05, 0.05]})
    universe = env.market.universe
    assert not universe.close_only and int(universe.first_rows[2]) == 300 and int(universe.last_rows[1]) == 1499
    assert universe.listed[700:724, 0].all()  # a hole inside A's span is a flat bar, not a delisting
    assert np.all(universe.closes[700:724, 0] == universe.closes[699, 0])
    _, targets = walk(env)
    lo = env.market.bounds["train"][0]
    rows = np.arange(lo, lo + len(targets))
    decided = ~np.isnan(targets[:, 0])
    assert np.all(targets[decided & (rows < 300), 3] == 0.0)
    assert np.all(targets[decided & (rows >= 1499), 2] == 0.0)
    assert env.book.units[1] == 0.0
