"""The inputs that read the whole universe (envs.portfolio.inputs): features ranked or z-scored across the assets at
each bar, and each window's prices over its last close. The env and the served reader build them alike, from no bar
after the decision, and what does not fit is refused in one line."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from envs.errors import InputError
from envs.portfolio.env import PortfolioEnv
from envs.portfolio.inputs import cross_sectional
from envs.portfolio.universe_reader import UniverseReader
from envs.trading.data import save_bars
from envs.trading.env import TradingConfig
from experiments.run import main
from tests.conftest import REPO
from tests.unit.test_universe_reader import wide_table  # the same request table the reader's tests send

BITFINEX = REPO / "data" / "raw" / "bitfinex"
CRYPTO = [str(BITFINEX / f"{coin}-USD_1h.parquet") for coin in ("BTC", "ETH", "LTC")]
CROSSED = ["log_return", {"transform": "trend", "window": 24, "cross_section": "rank"},
           {"transform": "volatility", "window": 12, "cross_section": "zscore"},
           {"ta": "RSI", "timeperiod": 14, "cross_section": "rank"}]
BOTH = {"window": 6, "decision_interval": 24, "features": CROSSED, "window_normalization": "last_close"}
PRICES = 3  # close, high, low per bar of an OHLCV universe
NAN = np.nan


def random_bars(start: str, n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    close = 100.0 * np.exp(np.cumsum(rng.normal(0.0, 0.01, n)))
    open_ = np.concatenate([[close[0]], close[:-1]]) * np.exp(rng.normal(0.0, 0.001, n))
    index = pd.date_range(start, periods=n, freq="1h", tz="UTC", name="timestamp")
    return pd.DataFrame({"open": open_, "high": np.maximum(open_, close) * 1.002,
                         "low": np.minimum(open_, close) * 0.998, "close": close,
                         "volume": rng.uniform(1, 5, n)}, index=index)


def write(folder: Path, name: str, bars: pd.DataFrame) -> str:
    return str(save_bars(bars, folder / f"{name}_1h.parquet", name, "1h"))


def coming_and_going(folder: Path, change_after: pd.Timestamp | None = None) -> list[str]:
    """A from the start, B listed 300 bars later, C whose bars end 400 bars before the others'; with
    `change_after`, every bar after that time has other prices."""
    frames = {"AAA-USD": random_bars("2021-01-01", 2000, 1), "BBB-USD": random_bars("2021-01-13 12:00", 1700, 2),
              "CCC-USD": random_bars("2021-01-01", 1600, 3)}
    paths = []
    for name, bars in frames.items():
        if change_after is not None:
            later = bars.index > change_after
            bars.loc[later, ["open", "high", "low", "close"]] *= 1.5
            bars.loc[later, "volume"] *= 3.0
        paths.append(write(folder, name, bars))
    return paths


def price_block(env: PortfolioEnv, obs: np.ndarray) -> np.ndarray:
    """(N, window, P): the last_close columns of an observation."""
    start = env.cfg.window * len(env.market.feature_names)
    return obs[:, start:-2].reshape(env.n_assets, env.cfg.window, -1)


def test_ranks_and_zscores_across_three_assets_are_the_hand_computed_ones() -> None:
    table = np.array([[1.0, 2.0, 3.0],     # in order
                      [2.0, 2.0, 5.0],     # a tie: the mean of its ranks
                      [NAN, 1.0, 3.0],     # an asset not listed (or in warm-up): left out
                      [NAN, NAN, 4.0],     # one asset left: 0
                      [7.0, 7.0, 7.0]])    # no spread
    ranks = cross_sectional(table, "rank")
    expected = [[-1, 0, 1], [-0.5, -0.5, 1], [NAN, -1, 1], [NAN, NAN, 0], [0, 0, 0]]
    np.testing.assert_array_equal(ranks, np.array(expected))
    z = cross_sectional(table, "zscore")
    third = np.sqrt(1.5)  # (x - 2) / sqrt(2/3) at x = 3
    np.testing.assert_allclose(z, [[-third, 0, third], [-1 / np.sqrt(2), -1 / np.sqrt(2), np.sqrt(2)],
                                   [NAN, -1, 1], [NAN, NAN, 0], [0, 0, 0]], rtol=0, atol=1e-15)


def test_the_env_sees_the_cross_section_of_the_raw_values_not_a_per_asset_zscore(tmp_path: Path) -> None:
    """A hand-made close-only table of three assets, C listed at row 100, A and B tied on rows 200..209: the
    feature `value` (the close) ranked and z-scored is the cross-section of the closes at each row."""
    n = 600
    closes = {"A": np.linspace(10.0, 20.0, n), "B": np.linspace(20.0, 5.0, n), "C": np.full(n, 12.0)}
    closes["B"][200:210] = closes["A"][200:210]
    closes["C"][:100] = NAN
    stamps = pd.date_range("2020-01-01", periods=n, freq="1D").strftime("%Y-%m-%d")
    path = tmp_path / "closes.csv"
    pd.DataFrame({"time": stamps, **{f"{k}:close": v for k, v in closes.items()}}).to_csv(path, index=False)
    env = PortfolioEnv({"table_path": str(path), "timeframe": "1d", "window": 1, "split": "test",
                        "features": [{"transform": "value", "cross_section": "rank"},
                                     {"transform": "value", "cross_section": "zscore"}]})
    assert env.market.feature_names == ("rank(value)", "zscore(value)")
    table = np.column_stack(list(closes.values()))
    for row in (50, 205, 300, 599):
        obs = env.observation_at(row, np.zeros(3))
        expected = np.nan_to_num(np.stack([cross_sectional(table, mode)[row] for mode in ("rank", "zscore")], 1))
        assert np.array_equal(obs[:, :2], expected.astype(np.float32)), row
    assert env.observation_at(50, np.zeros(3))[:, 0].tolist() == [-1.0, 1.0, 0.0]   # C not listed: 0
    assert env.observation_at(205, np.zeros(3))[:, 0].tolist() == [0.5, 0.5, -1.0]  # A = B > C
    assert env.market.feature_mean.tolist() == [[0.0, 0.0]] * 3  # no per-asset train z-score on top
    assert env.market.feature_std.tolist() == [[1.0, 1.0]] * 3


@pytest.fixture(scope="module")
def crypto() -> tuple[PortfolioEnv, UniverseReader]:
    config = {**BOTH, "data_paths": CRYPTO, "split_fractions": [0.8, 0.1, 0.1]}
    return PortfolioEnv({**config, "split": "test", "episode_length": None}), UniverseReader.for_env_config(config)


def test_the_served_observation_is_the_envs_with_both_inputs_at_every_decision(crypto) -> None:
    env, reader = crypto
    assert env.observation_space.shape == (3, 6 * 4 + 6 * PRICES + 2)
    lo, hi = env.market.bounds["test"]
    held = np.array([0.1, 0.5, 0.3, 0.1])
    for row in range(lo, hi - 1, 24):
        table = wide_table(env, row, reader.bars_needed + 5).assign(
            **{f"weight:{name}": w for name, w in zip(["cash", *env.market.universe.symbols], held, strict=True)})
        observation, tradable, _ = reader.read(table)
        assert np.array_equal(observation[0], env.observation_at(row, held[1:])), row
        assert np.array_equal(tradable, env.market.tradable[row])


def test_the_last_close_column_is_exactly_one_and_the_window_is_the_prices_over_it(crypto) -> None:
    env, _ = crypto
    lo, hi = env.market.bounds["test"]
    universe = env.market.universe
    for row in range(lo, hi, 24):
        prices = price_block(env, env.observation_at(row, np.zeros(3)))
        assert np.all(prices[:, -1, 0] == 1.0)
        for i, frame in enumerate(universe.frames):
            window = frame.loc[universe.timestamps[row - 5]:universe.timestamps[row], ["close", "high", "low"]]
            expected = (window.to_numpy() / window["close"].iloc[-1]).astype(np.float32)
            assert np.array_equal(prices[i], expected)


def test_last_close_appends_to_the_features_and_none_is_todays_observation(crypto) -> None:
    env, _ = crypto
    plain = PortfolioEnv({**BOTH, "data_paths": CRYPTO, "split_fractions": [0.8, 0.1, 0.1], "split": "test",
                          "episode_length": None, "window_normalization": "none"})
    assert plain.observation_space.shape == (3, 6 * 4 + 2)
    assert np.array_equal(plain.market.features, env.market.features)
    row, held = env.market.bounds["test"][0] + 7, np.array([0.2, 0.3, 0.1])
    ours, theirs = env.observation_at(row, held), plain.observation_at(row, held)
    assert np.array_equal(ours[:, :24], theirs[:, :24]) and np.array_equal(ours[:, -2:], theirs[:, -2:])


def test_assets_that_come_and_go_read_alike_served_and_in_the_env(tmp_path: Path) -> None:
    """Around B's listing (row 300) its features enter the cross-sections before it can trade, and C's stop at its
    last bar; the reader, given the bars from before B's listing, builds the env's numbers."""
    config = {**BOTH, "window": 4, "decision_interval": 6, "data_paths": coming_and_going(tmp_path),
              "split_fractions": [0.7, 0.15, 0.15]}
    env = PortfolioEnv({**config, "episode_length": None})
    reader = UniverseReader.for_env_config(config)
    # Not row 1599, C's last bar: the env knows that C has no bar to fill at next, a server cannot
    for row in [*range(290, 360, 3), *range(1590, 1615, 2)]:
        observation, tradable, _ = reader.read(wide_table(env, row, reader.bars_needed + 5))
        assert np.array_equal(observation[0], env.observation_at(row, np.zeros(3))), row
        assert np.array_equal(tradable, env.market.tradable[row])
    before_b = env.observation_at(295, np.zeros(3))
    assert np.all(price_block(env, before_b)[1] == 0.0) and before_b[1, -1] == 0.0  # not listed: 0, cannot trade


def test_no_input_reads_the_bar_after_the_decision(tmp_path: Path) -> None:
    """Other prices after bar t leave the observation at t as it was; other prices at t change it."""
    first, second, third = (tmp_path / name for name in ("first", "second", "third"))
    for folder in (first, second, third):
        folder.mkdir()
    config = {**BOTH, "window": 4, "decision_interval": 6, "split": "test", "episode_length": None,
              "split_fractions": [0.7, 0.15, 0.15]}
    env = PortfolioEnv({**config, "data_paths": coming_and_going(first)})
    row = env.market.bounds["test"][0] + 20
    stamp = env.market.timestamps[row]
    later = PortfolioEnv({**config, "data_paths": coming_and_going(second, change_after=stamp)})
    now = PortfolioEnv({**config, "data_paths": coming_and_going(third, change_after=stamp - pd.Timedelta("1h"))})
    held = np.array([0.3, 0.3, 0.0])
    assert not np.array_equal(later.market.universe.closes[row + 1], env.market.universe.closes[row + 1])
    assert np.array_equal(later.observation_at(row, held), env.observation_at(row, held))
    assert not np.array_equal(now.observation_at(row, held), env.observation_at(row, held))


def one_line_refusal(build, words: str) -> None:
    with pytest.raises(InputError, match=words) as error:
        build()
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("features", [
    [{"transform": "trend", "window": 24, "cross_section": "rank"}],
    ["log_return", {"resample": "4h", "features": [{"ta": "RSI", "cross_section": "zscore"}]}],
])
def test_a_cross_sectional_transform_on_one_asset_is_refused_in_one_line(features) -> None:
    one_line_refusal(lambda: TradingConfig.from_dict({"features": features}),
                     "a cross-sectional transform on one asset.*trading/Portfolio-v0")


def test_spot_dry_run_with_a_cross_section_is_exit_2_in_one_line(tmp_path: Path, capsys) -> None:
    code = main([str(REPO / "conf" / "dqn_btc.yaml"), "--dry-run", "--output", str(tmp_path / "out"), "--set",
                 "environment.env_config.features=[log_return, {transform: trend, cross_section: rank}]"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "cross-sectional transform on one asset" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("change, words", [
    ({"window_normalization": "last"}, "window_normalization: Input should be 'none' or 'last_close'"),
    ({"features": [{"transform": "trend", "cross_section": "rnak"}]}, "did you mean 'rank'"),
    ({"features": [{"ta": "RSI", "cross_section": "mean"}]}, "not a cross-sectional transform"),
    ({"features": [{"asset": str(BITFINEX / "ETH-USD_1h.parquet"),
                    "features": [{"transform": "trend", "cross_section": "rank"}]}]}, "inside the asset: block"),
    ({"features": [{"series": "funding.csv", "lag": "8h",
                    "features": [{"transform": "value", "cross_section": "rank"}]}]}, "outside series"),
])
def test_an_unknown_value_is_refused_in_one_line(change, words) -> None:
    one_line_refusal(lambda: PortfolioEnv({"data_paths": CRYPTO, **change}), words)


def test_the_crypto_conf_dry_runs_with_last_close(capsys) -> None:
    code = main([str(REPO / "conf" / "ppo_portfolio_crypto.yaml"), "--dry-run", "--output",
                 "/nonexistent-never-written", "--set", "environment.env_config.window_normalization=last_close"])
    out = capsys.readouterr().out
    assert code == 0
    assert "close, high, low / its last close (window_normalization: last_close): rows of 194 columns" in out
