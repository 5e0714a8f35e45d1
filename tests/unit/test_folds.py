"""Evaluation protocols (envs.splits) and the trading env's folds: layout, errors, and the leak canary."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from purgedcv import WalkForwardSplit

from envs.errors import InputError
from envs.splits import Protocol
from envs.trading.backtest import agent_targets, evaluate_policy
from envs.trading.data import save_bars
from envs.trading.env import SpotTradingEnv
from tests.conftest import random_walk_bars

WALK = {"type": "walk_forward", "folds": 3, "validation_size": 300, "test_size": 300, "embargo": 10}


def test_holdout_fold_is_the_split_fractions():
    fold = Protocol.from_dict("holdout").fold(1000, 0)
    assert (fold.train, fold.validation, fold.test) == ((0, 700), (700, 850), (850, 1000))
    embargoed = Protocol.from_dict({"type": "holdout", "fractions": [0.6, 0.2, 0.2], "embargo": 5}).fold(1000, 0)
    assert (embargoed.train, embargoed.validation, embargoed.test) == ((0, 600), (605, 800), (805, 1000))


def test_walk_forward_tiles_the_end_with_embargoes():
    folds = Protocol.from_dict(WALK).folds_for(3000)
    assert [f.test for f in folds] == [(2100, 2400), (2400, 2700), (2700, 3000)]  # one time axis, oldest first
    for fold in folds:
        assert fold.validation == (fold.test[0] - 10 - 300, fold.test[0] - 10)
        assert fold.train == (0, fold.validation[0] - 10)  # expanding: everything before
    rolling = Protocol.from_dict({**WALK, "train": "rolling", "train_size": 1000}).folds_for(3000)
    assert [f.train for f in rolling] == [(780, 1780), (1080, 2080), (1380, 2380)]


def test_walk_forward_agrees_with_purgedcv():
    """The same test windows and (train + validation + embargoes) as purgedcv's expanding WalkForwardSplit."""
    n = 3000
    ours = Protocol.from_dict(WALK).folds_for(n)
    times = pd.Series(pd.date_range("2024-01-01", periods=n, freq="h"))
    theirs = list(WalkForwardSplit(n_splits=3, test_size=300, prediction_times=times, evaluation_times=times)
                  .split(np.zeros((n, 1))))
    for fold, (train_index, test_index) in zip(ours, theirs, strict=True):
        assert fold.test == (test_index[0], test_index[-1] + 1)
        assert (fold.train[0], fold.test[0]) == (train_index[0], train_index[-1] + 1)


@pytest.mark.parametrize(
    "protocol, fragment",
    [
        ({"type": "walk_forwrd"}, "type 'walk_forwrd'"),
        ({"type": "walk_forward", "folds": 3, "test_size": 100}, "validation_size: walk_forward needs it"),
        ({**WALK, "train": "rolling"}, "train_size: a rolling train window"),
        ({**WALK, "train_size": 50}, "only for train: rolling"),
        ({**WALK, "folds": -1}, "folds: a whole number"),
        ({**WALK, "embargo": 1.5}, "embargo: a whole number"),
        ({**WALK, "fold": 2}, "unknown key"),
        ({"type": "holdout", "folds": 4}, "holdout has one fold"),
        ({"type": "holdout", "fractions": [0.5, 0.6, 0.1]}, "fractions"),
    ],
)
def test_protocol_errors_name_the_key(protocol, fragment):
    with pytest.raises(InputError, match=fragment):
        Protocol.from_dict(protocol)


def test_folds_that_do_not_fit_the_data_are_an_error():
    with pytest.raises(InputError, match="fold 0's train part has 0 rows"):
        Protocol.from_dict({**WALK, "folds": 10}).fold(3000, 0)
    with pytest.raises(InputError, match="rolling train window"):
        Protocol.from_dict({**WALK, "train": "rolling", "train_size": 2000}).fold(3000, 0)


@pytest.fixture
def market_file(tmp_path):
    return save_bars(random_walk_bars(3000), tmp_path / "WF-USD_1h.parquet", "WF-USD", "1h")


def make(path, fold: int, **overrides) -> SpotTradingEnv:
    """An env on one fold; 200-bar training episodes fit the 300-bar held-out parts."""
    return SpotTradingEnv({"data_path": str(path), "window": 8, "protocol": WALK, "fold": fold,
                           "episode_length": 200, **overrides})


def test_env_trades_its_fold(market_file):
    for index, fold in enumerate(Protocol.from_dict(WALK).folds_for(3000)):
        env = make(market_file, index)
        assert env.market.bounds["validation"] == fold.validation
        assert env.market.bounds["test"] == fold.test
        # once the 8-bar window is whole: the features' 96-bar warm-up (row 95) + 7 rows
        assert env.market.bounds["train"] == (102, fold.train[1])


def _walk(env: SpotTradingEnv, policy, seed: int = 0, steps: int = 10_000):
    obs, info = env.reset(seed=seed)
    observations, rewards = [obs], []
    for _ in range(steps):
        obs, reward, _, truncated, info = env.step(policy(obs))
        observations.append(obs)
        rewards.append(reward)
        if truncated:
            break
    return np.array(observations), np.array(rewards)


def test_leak_canary(tmp_path):
    """Changing every price after a fold's validation end changes nothing in that fold's training, its
    features' normalization or its model selection (the validation walk); it does change the test walk."""
    bars = random_walk_bars(3000)
    original = save_bars(bars, tmp_path / "A_1h.parquet", "A", "1h")
    rng = np.random.default_rng(7)

    def policy(obs):  # any fixed function of what the agent sees
        return int(obs[:-2].sum() > 0)

    for index, fold in enumerate(Protocol.from_dict(WALK).folds_for(3000)):
        end = fold.validation[1]
        changed = bars.copy()
        factor = np.where(np.arange(len(bars)) >= end, rng.uniform(0.5, 2.0, len(bars)), 1.0)
        for column in ("open", "high", "low", "close"):
            changed[column] = bars[column] * factor
        changed["volume"] = bars["volume"] * factor
        changed_file = save_bars(changed, tmp_path / f"B{index}_1h.parquet", "B", "1h")
        a, b = make(original, index), make(changed_file, index)
        np.testing.assert_array_equal(a.market.features[:end], b.market.features[:end])  # same normalization
        for split, seed in (("train", 0), ("train", 1), ("validation", 0)):
            a_obs, a_rewards = _walk(make(original, index, split=split, episode_length=200), policy, seed)
            b_obs, b_rewards = _walk(make(changed_file, index, split=split, episode_length=200), policy, seed)
            np.testing.assert_array_equal(a_obs, b_obs)
            np.testing.assert_array_equal(a_rewards, b_rewards)
        a_test = evaluate_policy(lambda o: (o[:, :-2].sum(axis=1) > 0).astype(int), {**_config(original, index)})
        b_test = evaluate_policy(lambda o: (o[:, :-2].sum(axis=1) > 0).astype(int), {**_config(changed_file, index)})
        assert not np.allclose(a_test.returns["buy_and_hold"], b_test.returns["buy_and_hold"])


def _config(path, fold: int) -> dict:
    return {"data_path": str(path), "window": 8, "protocol": WALK, "fold": fold}


def test_changing_the_train_part_changes_the_normalization(tmp_path):
    """The other side of the leak canary: the features are fitted on the fold's train rows."""
    bars = random_walk_bars(3000)
    changed = bars.copy()
    changed.loc[changed.index[500:600], "volume"] *= 50
    a = make(save_bars(bars, tmp_path / "A_1h.parquet", "A", "1h"), 0)
    b = make(save_bars(changed, tmp_path / "B_1h.parquet", "B", "1h"), 0)
    later = slice(2000, 2100)  # rows whose own raw features the change cannot reach
    assert not np.allclose(a.market.features[later], b.market.features[later])


def test_decision_interval_holds_the_position(market_file):
    env = make(market_file, 2, split="test", episode_length=None, decision_interval=6)
    obs, info = env.reset(seed=0)
    rows = [info["row"]]
    rng = np.random.default_rng(0)
    while True:
        obs, reward, _, truncated, info = env.step(int(rng.integers(2)))
        rows.append(info["row"])
        if truncated:
            break
    assert all(b - a == 6 for a, b in zip(rows[:-2], rows[1:-1], strict=True)) and 0 < rows[-1] - rows[-2] <= 6
    assert info["trades"] <= len(rows) - 1


@pytest.mark.parametrize("interval", [1, 5])
def test_backtest_replays_the_env_walk(market_file, interval):
    """The agent's equity in the backtest (replayed by the ledger from its positions, every bar) equals
    the env's own equity at every decision."""
    def policy(obs):
        return (obs[:, :-2].sum(axis=1) > 0).astype(int)

    config = {**_config(market_file, 1), "decision_interval": interval}
    env = SpotTradingEnv({**config, "split": "test", "episode_length": None})
    obs, info = env.reset(seed=0)
    lo = info["row"]
    marks = {info["row"]: info["equity"]}
    truncated = False
    while not truncated:
        obs, _, _, truncated, info = env.step(int(policy(obs[None])[0]))
        marks[info["row"]] = info["equity"]
    report = evaluate_policy(policy, config)
    equity = report.series["agent"].to_numpy()
    for row, value in marks.items():
        assert equity[row - lo] == pytest.approx(value, rel=1e-12)
    test_env = SpotTradingEnv({**config, "split": "test", "episode_length": None})
    assert len(agent_targets(policy, test_env)) == len(equity)
