"""A policy that reads bars sees the env's observation bit for bit, and paper trading replays the backtest exactly.

Any deterministic function of the observation is a greedy policy; a fixed random linear one stands in for a trained
network here (tests/integration/test_retrain_loop.py does the same with a trained, registered model).
"""
from __future__ import annotations

import json
from dataclasses import fields

import numpy as np
import pandas as pd
import pytest

from envs.errors import InputError
from envs.trading.backtest import evaluate_policy
from envs.trading.bar_reader import BarReader
from envs.trading.data import load_bars, save_bars
from envs.trading.env import SpotTradingEnv
from envs.trading.paper import PaperBook, new_book, replay
from tests.conftest import REPO, paper_replay_of_test_window

DATA = REPO / "data" / "raw" / "BTC-USD_1h.parquet"
BARS = load_bars(DATA)
WALK = {"type": "walk_forward", "folds": 4, "train": "expanding", "validation_size": 1500, "test_size": 1500,
        "embargo": 24}
FEATURE_LISTS = {
    "basic": ["basic"],
    "ta-lib and a higher timeframe": ["basic", {"ta": "RSI"}, {"ta": "MACD", "outputs": ["macdhist"]},
                                      {"resample": "4h", "features": ["log_return", {"ta": "RSI"}]}],
}


def linear_policy(width: int, actions: int, seed: int = 0):
    weights = np.random.default_rng(seed).normal(size=(width, actions)).astype(np.float32)
    return lambda observations: np.argmax(np.asarray(observations, dtype=np.float32) @ weights, axis=1)


def config(features: list, **extra) -> dict:
    return {"data_path": str(DATA), "features": features, "protocol": WALK, "fold": 3, "decision_interval": 24,
            "positions": "long_short", **extra}


@pytest.mark.parametrize("name, bars", [("basic", None), ("ta-lib and a higher timeframe", 400)])
def test_the_action_from_bars_is_the_envs_greedy_action_on_every_bar_of_a_test_window(name, bars):
    """Every bar of the fold's 1,500-bar test window for `basic` (the shipped list); the first 400 for a list of
    TA-Lib functions and a 4h block, whose model reads 699 bars per decision (the whole window takes 12 s)."""
    cfg = config(FEATURE_LISTS[name], split="test", episode_length=None, decision_interval=1)  # a decision every bar
    env = SpotTradingEnv(cfg)
    reader = BarReader.for_env_config(cfg)
    policy = linear_policy(env.observation_space.shape[0], env.action_space.n)
    obs, info = env.reset(seed=0)
    lo, hi = env.market.bounds["test"]
    decisions = 0
    while True:
        row = info["row"]
        window = BARS.iloc[row + 1 - reader.bars_needed:row + 1]
        decision = reader.decide(window.assign(position=info["position"]).reset_index(), policy)
        action = int(policy(obs[None])[0])
        assert decision["action"].iloc[0] == action
        assert decision["target_position"].iloc[0] == env.targets[action]
        assert pd.Timestamp(decision["applies_from"].iloc[0]) == BARS.index[row + 1]
        if decisions % 50 == 0:  # the observation itself, bit for bit (decide computes it the same way)
            observation, _ = reader.read(window, info["position"])
            assert np.array_equal(observation[0], obs)
        decisions += 1
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated or decisions == bars:
            break
    assert decisions == (bars or hi - 1 - lo)  # every bar of the window but the last (its fill would be after it)


@pytest.mark.parametrize("interval", [1, 24])
def test_a_paper_replay_of_the_test_window_is_the_backtests_equity_curve_to_the_last_digit(interval):
    cfg = config(["basic"], decision_interval=interval)
    reader = BarReader.for_env_config(cfg)
    env = SpotTradingEnv({**cfg, "split": "test", "episode_length": None})
    policy = linear_policy(env.observation_space.shape[0], env.action_space.n, seed=3)
    report = evaluate_policy(policy, cfg)
    equity, book = paper_replay_of_test_window(reader, policy, BARS, env)
    assert np.array_equal(equity, report.series["agent"].to_numpy())
    assert book.ledger.trades == report.table.loc["agent", "trades"]


def test_paper_trading_resumed_from_its_state_continues_as_if_never_stopped():
    cfg = config(["basic"])
    reader = BarReader.for_env_config(cfg)
    policy = linear_policy(24 * 8 + 3, 3, seed=5)

    def decide(bars: pd.DataFrame, held: float) -> float:
        return float(reader.decide(bars.assign(position=held), policy)["target_position"].iloc[0])

    rows = range(len(BARS) - 600, len(BARS))
    whole = replay(new_book(reader), BARS, rows, reader.bars_needed, decide)
    first = new_book(reader)
    part = replay(first, BARS, rows[:250], reader.bars_needed, decide)
    resumed = PaperBook.from_state(json.loads(json.dumps(first.to_state())))  # as logged, as read back
    rest = replay(resumed, BARS, rows[250:], reader.bars_needed, decide)
    assert np.array_equal(np.r_[part, rest], whole)


@pytest.fixture(scope="module")
def reader() -> BarReader:
    return BarReader.for_env_config(config(["basic"]))


def last_bars(n: int) -> pd.DataFrame:
    return BARS.iloc[-n:].reset_index()


@pytest.mark.parametrize("bars, fragment", [
    (lambda: last_bars(50), "the model needs the last 119 1h bars (features' look-back 96 + window 24 - 1); got 50"),
    (lambda: last_bars(200).drop(index=150), "must be consecutive 1h bars, oldest first"),
    (lambda: load_bars(DATA).resample("4h").last().iloc[-200:].reset_index(), "must be consecutive 1h bars"),
    (lambda: last_bars(200).drop(columns="volume"), "missing: volume"),
    (lambda: last_bars(200).assign(symbol="ETH-USD"), "bars of ETH-USD: this model trades BTC-USD"),
    (lambda: last_bars(200).assign(close=lambda f: f["close"].where(f.index != 190)), "finite positive prices"),
    (lambda: last_bars(200).assign(position=0.5), "position 0.5 is not one of this model's positions (-1, 0, 1)"),
])
def test_bars_that_do_not_fit_the_model_are_refused_in_one_line(reader, bars, fragment):
    with pytest.raises(InputError, match=None) as refused:
        reader.decide(bars(), linear_policy(24 * 8 + 3, 3))
    assert fragment in str(refused.value) and "\n" not in str(refused.value)


def test_a_model_whose_features_read_another_market_is_refused_for_bars(tmp_path):
    other = save_bars(BARS.iloc[-3000:], tmp_path / "ETH-USD_1h.parquet", "ETH-USD", "1h")
    cut = save_bars(BARS.iloc[-3000:], tmp_path / "BTC-USD_1h.parquet", "BTC-USD", "1h")
    cfg = {"data_path": str(cut), "episode_length": 200,
           "features": ["basic", {"asset": str(other), "name": "ETH", "features": ["log_return"]}]}
    reader = BarReader.for_env_config(cfg)
    with pytest.raises(InputError, match=r"cannot read bars: its features read another series than the bars \(asset"):
        reader.decide(last_bars(300), linear_policy(24 * 9 + 2, 2))
    assert reader.describe().startswith("takes observations only: its features read another series")


def test_a_reader_is_saved_and_loaded_whole(reader, tmp_path):
    reader.save(tmp_path / "inputs.npz")
    again = BarReader.load(tmp_path / "inputs.npz")
    assert np.array_equal(again.mean, reader.mean) and np.array_equal(again.std, reader.std)
    settings = [f.name for f in fields(BarReader) if f.name not in ("mean", "std")]
    assert [getattr(again, name) for name in settings] == [getattr(reader, name) for name in settings]


def holed_copy(tmp_path, every: int = 450, hole: int = 30) -> pd.DataFrame:
    """The bundled bars with a `hole`-bar hole every `every` bars over the last 5,000 (several in the last fold's
    test window), saved as a file imported with --gaps drop keeps them."""
    keep = np.ones(len(BARS), dtype=bool)
    for start in range(len(BARS) - 5000, len(BARS) - 100, every):
        keep[start:start + hole] = False
    return load_bars(save_bars(BARS[keep], tmp_path / "BTC-USD_1h.parquet", "BTC-USD", "1h", gaps="drop"))


def test_paper_trading_steps_over_recorded_holes_as_the_backtest_does(tmp_path):
    """A file imported with --gaps drop: the reader steps over its holes as the env does (a higher timeframe's block
    included), so a paper replay of the test window is the backtest's equity curve to the last digit."""
    holed = holed_copy(tmp_path)
    features = ["basic", {"resample": "4h", "features": ["log_return", {"ta": "RSI"}]}]
    cfg = {**config(features, decision_interval=6), "data_path": str(tmp_path / "BTC-USD_1h.parquet")}
    reader = BarReader.for_env_config(cfg)
    env = SpotTradingEnv({**cfg, "split": "test", "episode_length": None})
    lo, hi = env.market.bounds["test"]
    assert reader.gaps == "drop" and (np.diff(holed.index[lo:hi].asi8) > np.diff(holed.index[:2].asi8)[0]).sum() >= 2
    policy = linear_policy(env.observation_space.shape[0], env.action_space.n, seed=7)
    report = evaluate_policy(policy, cfg)
    equity, book = paper_replay_of_test_window(reader, policy, holed, env)
    assert np.array_equal(equity, report.series["agent"].to_numpy())
    assert book.ledger.trades == report.table.loc["agent", "trades"] > 0


def test_holes_are_read_only_where_recorded(reader):
    """A model trained on bars without holes reads bars with holes only when they say the holes are recorded (the
    gaps column paper trading sends for a file imported with --gaps drop); a hole that is not whole bars never."""
    holed = last_bars(300).drop(index=range(240, 245)).reset_index(drop=True)
    policy = linear_policy(24 * 8 + 3, 3)
    with pytest.raises(InputError, match="must be consecutive 1h bars.*imported with --gaps drop"):
        reader.decide(holed, policy)
    decided = reader.decide(holed.assign(gaps="drop"), policy)
    assert decided["bar_time"].iloc[0] == holed["timestamp"].iloc[-1].isoformat()
    half_hour_off = holed["timestamp"].where(holed.index != 250, holed["timestamp"][250] + pd.Timedelta("30min"))
    shifted = holed.assign(gaps="drop", timestamp=half_hour_off)
    with pytest.raises(InputError, match="must be whole numbers of 1h bars"):
        reader.decide(shifted, policy)
