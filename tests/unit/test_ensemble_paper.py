"""An ensemble paper-trades as it backtests, to the last digit, on both trading families: a DQN ensemble (mean
Q-values) and a target-exposure ensemble on one coin's bars through the served bar reader, and a portfolio ensemble
(mean weights, mapped back to scores) through the universe reader. Members are hand-made numpy policies of the env's
observation size (no torch, no Ray); tests/integration/test_ensemble.py does it with trained ones, through MLflow."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from algos.export.ensemble_policy import EnsemblePolicy, ensemble_for
from algos.export.numpy_policy import FORMAT, STRUCTURE_KEY, NumpyPolicy
from envs.portfolio.backtest import evaluate_policy as portfolio_backtest
from envs.portfolio.paper import UniversePaper
from envs.portfolio.universe_reader import UniverseReader
from envs.trading.backtest import evaluate_policy
from envs.trading.bar_reader import BarReader
from envs.trading.data import load_bars
from envs.trading.env import SpotTradingEnv
from tests.conftest import REPO, paper_replay_of_test_window

DATA = REPO / "data" / "raw" / "BTC-USD_1h.parquet"
WALK = {"type": "walk_forward", "folds": 4, "train": "expanding", "validation_size": 1500, "test_size": 1500,
        "embargo": 24}
BITFINEX = REPO / "data" / "raw" / "bitfinex"
UNIVERSE = {"data_paths": [str(BITFINEX / f"{coin}-USD_1h.parquet") for coin in ("BTC", "ETH", "LTC")], "window": 6,
            "decision_interval": 24, "split_fractions": [0.8, 0.1, 0.1], "fee_bps": 10.0, "slippage_bps": 5.0}


def _policy(structure: dict, arrays: dict) -> NumpyPolicy:
    return NumpyPolicy.from_arrays({**arrays, STRUCTURE_KEY: np.array(json.dumps({"format": FORMAT, **structure}))})


def _linear(arrays: dict, name: str, rng: np.random.Generator, rows: int, columns: int, scale: float) -> list[dict]:
    arrays[f"{name}.weight"] = (rng.normal(0, scale, (rows, columns))).astype(np.float32)
    arrays[f"{name}.bias"] = rng.normal(0, scale, rows).astype(np.float32)
    return [{"op": "linear", "weight": f"{name}.weight", "bias": f"{name}.bias"}]


def _one_coin_member(algorithm: str, head: str, size: int, outputs: int, seed: int, **extra) -> NumpyPolicy:
    rng = np.random.default_rng(seed)
    arrays = {key: np.asarray(value, np.float32) for key, value in extra.pop("arrays", {}).items()}
    nets = {"encoder": _linear(arrays, "encoder.0", rng, 16, size, 0.3) + [{"op": "tanh"}],
            head: _linear(arrays, f"{head}.0", rng, outputs, 16, 1.0)}
    return _policy({"algorithm": algorithm, "observation_size": size, **extra, "nets": nets}, arrays)


@pytest.mark.parametrize("positions, kind", [("long_short", "q_values"), ("continuous", "exposure")])
def test_a_paper_replay_of_a_one_coin_ensemble_is_its_backtest_to_the_last_digit(positions, kind):
    cfg = {"data_path": str(DATA), "features": ["basic"], "protocol": WALK, "fold": 3, "decision_interval": 24,
           "positions": positions}
    env = SpotTradingEnv({**cfg, "split": "test", "episode_length": None})
    size = env.observation_space.shape[0]
    if kind == "q_values":
        members = [_one_coin_member("dqn", "q", size, env.action_space.n, seed, num_actions=int(env.action_space.n))
                   for seed in range(3)]
    else:
        bounds = {"action.low": [0.0], "action.high": [1.0]}
        members = [_one_coin_member("sac", "pi", size, 2, seed, action_size=1, arrays=bounds) for seed in range(3)]
    ensemble = ensemble_for(members, cfg)
    assert ensemble.kind == kind
    report = evaluate_policy(ensemble, cfg)
    equity, book = paper_replay_of_test_window(BarReader.for_env_config(cfg), ensemble, load_bars(DATA), env)
    assert np.array_equal(equity, report.series["agent"].to_numpy())
    assert book.ledger.trades == report.table.loc["agent", "trades"] > 0


def test_a_paper_replay_of_a_portfolio_ensemble_is_its_backtest_to_the_last_digit():
    reader = UniverseReader.for_env_config(UNIVERSE)
    members = []
    for seed in range(2):
        rng = np.random.default_rng(seed)
        arrays = {"cash": np.array([rng.uniform(-0.5, 0.5), 0.0], np.float32)}
        nets = {"pi": _linear(arrays, "pi.0", rng, 2, reader.window * reader.mean.shape[1] + 2, 1.0)}
        members.append(_policy({"algorithm": "ppo", "layout": "portfolio", "shared": True,
                                "row_size": reader.window * reader.mean.shape[1] + 2, "nets": nets}, arrays))
    ensemble = ensemble_for(members, UNIVERSE)
    assert isinstance(ensemble, EnsemblePolicy) and ensemble.kind == "weights"
    report = portfolio_backtest(ensemble, UNIVERSE)
    paper = UniversePaper(reader, UNIVERSE["data_paths"])
    data = paper.read()
    index = paper.index(data)
    lo = int(index.searchsorted(pd.Timestamp(reader.test_start)))
    hi = int(index.searchsorted(pd.Timestamp(reader.test_end))) + 1
    book = paper.new_book()
    equity = paper.replay(book, data, range(lo, hi), lambda request: reader.decide(request, ensemble))
    assert np.array_equal(equity, report.series["agent"].to_numpy())
    assert book.book.rebalances == report.table.loc["agent", "trades"] > 0
