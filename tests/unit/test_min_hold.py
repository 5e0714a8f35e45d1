"""`min_hold` on `trading/Spot-v0`: a position is held for at least that many decisions before it may change.

The one rule (`envs.trading.positions.hold_rule`) is applied by the env, the batched env, the backtest's walk, the
served model's reader and the paper book, so they agree: the batched env equals the single envs bit for bit, the
backtest trades what the env traded, a served decision is the env's applied one, and a paper replay is the
backtest's equity curve to the last digit. Bad values are one line.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from envs.errors import InputError
from envs.trading.backtest import agent_targets, evaluate_policy
from envs.trading.bar_reader import BarReader
from envs.trading.data import load_bars, save_bars
from envs.trading.env import SpotTradingEnv
from envs.trading.paper import PaperBook, new_book, replay
from experiments.run import main
from tests.conftest import REPO, paper_replay_of_test_window, random_walk_bars
from tests.unit.test_bars_policy import linear_policy
from tests.unit.test_trading_vector_env import _compare, _gap_up_file

BTC = REPO / "data" / "raw" / "BTC-USD_1h.parquet"
BARS = load_bars(BTC)
WALK = {"type": "walk_forward", "folds": 4, "train": "expanding", "validation_size": 1500, "test_size": 1500,
        "embargo": 24}


@pytest.fixture(scope="module")
def walk_file(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("walk")
    return str(save_bars(random_walk_bars(n=900, seed=3), folder / "WALK-USD_1h.parquet", "WALK-USD", "1h"))


def _walk(config: dict, actions: list[int]) -> list[dict]:
    env = SpotTradingEnv(config)
    env.reset(seed=0)
    return [env.step(action)[4] for action in actions]


def btc_config(**extra) -> dict:
    return {"data_path": str(BTC), "features": ["basic"], "protocol": WALK, "fold": 3, "positions": "long_short",
            **extra}


# --- The env


def test_a_new_position_is_held_for_min_hold_decisions_then_may_change(walk_file):
    """Asked to flip every decision, a long_flat env with min_hold 3 holds each position three decisions; the info
    says what was asked, what was applied, and the held position's age (the flat start is free to change)."""
    config = {"data_path": walk_file, "window": 6, "episode_length": 60, "min_hold": 3}
    infos = _walk(config, [1, 0] * 6)
    assert [info["asked_action"] for info in infos] == [1, 0] * 6
    assert [info["applied_action"] for info in infos] == [1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0]
    assert [info["held_for"] for info in infos] == [1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3]
    assert [info["position"] for info in infos] == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0] * 2
    assert infos[-1]["trades"] == 4  # without min_hold: 12


def test_a_held_position_old_enough_may_stay_and_change_later(walk_file):
    """Held past min_hold the position is free: the next asked change is applied at once."""
    config = {"data_path": walk_file, "window": 6, "episode_length": 60, "min_hold": 2, "positions": "long_short"}
    infos = _walk(config, [2, 2, 2, 2, 0, 1, 1])
    assert [info["applied_action"] for info in infos] == [2, 2, 2, 2, 0, 0, 1]
    assert [info["held_for"] for info in infos] == [1, 2, 2, 2, 1, 2, 1]


@pytest.mark.parametrize("interval", [1, 4])
def test_every_position_of_a_walk_lasts_min_hold_decisions(walk_file, interval):
    """A policy that churns, walked over a test window: every position the env held but the last lasted at least
    min_hold decisions of `interval` bars, and the walk trades fewer times than without min_hold."""
    config = {"data_path": walk_file, "window": 6, "positions": "long_short", "decision_interval": interval,
              "split": "test", "episode_length": None, "split_fractions": [0.5, 0.1, 0.4]}
    policy = linear_policy(6 * 8 + 3, 3, seed=1)
    free = agent_targets(policy, SpotTradingEnv(config))
    held = agent_targets(policy, SpotTradingEnv({**config, "min_hold": 4}))
    changes = np.flatnonzero(np.diff(held)) + 1
    assert len(changes) >= 5 and np.diff(changes).min() >= 4 * interval
    assert len(changes) < len(np.flatnonzero(np.diff(free)))


@pytest.mark.parametrize("min_hold", [None, 1])
def test_min_hold_off_is_todays_env_bit_for_bit(walk_file, min_hold):
    """None and 1 leave the env as it was: the same rewards, observations and infos (no min_hold keys)."""
    config = {"data_path": walk_file, "window": 6, "episode_length": 40, "positions": "long_short"}
    actions = np.random.default_rng(2).integers(0, 3, 30).tolist()
    first, second = SpotTradingEnv(config), SpotTradingEnv({**config, "min_hold": min_hold})
    for env in (first, second):
        env.reset(seed=4)
    for action in actions:
        a, b = first.step(action), second.step(action)
        assert np.array_equal(a[0], b[0]) and a[1:4] == b[1:4] and a[4] == b[4]


# --- The batched env


@pytest.mark.parametrize("interval", [1, 3])
@pytest.mark.parametrize("positions", ["long_flat", "long_short"])
@pytest.mark.parametrize("min_hold", [2, 5])
def test_batched_env_equals_single_envs_with_min_hold(walk_file, interval, positions, min_hold):
    config = {"data_path": walk_file, "window": 6, "episode_length": 30, "decision_interval": interval,
              "positions": positions, "fee_bps": 10, "slippage_bps": 2, "min_hold": min_hold}
    assert _compare(config) >= 12  # across many episode ends (autoreset restores the free flat start)


def test_batched_env_equals_single_envs_with_min_hold_through_margin_calls(tmp_path):
    config = {"data_path": _gap_up_file(tmp_path), "window": 6, "episode_length": 150, "decision_interval": 5,
              "positions": "long_short", "maintenance_margin": 0.9, "split_fractions": [0.6, 0.2, 0.2],
              "min_hold": 3}
    assert _compare(config, num_envs=8, steps=400, seed=5, action_p=[0.8, 0.1, 0.1], count="terminated") >= 10


# --- The backtest, the served model and paper trading


@pytest.mark.parametrize("interval", [1, 24])
def test_the_backtest_trades_what_the_env_traded(interval):
    """The backtest's replay of the agent's targets gives the env walk's equity at every decision and its fills."""
    cfg = btc_config(decision_interval=interval, min_hold=3)
    env = SpotTradingEnv({**cfg, "split": "test", "episode_length": None})
    policy = linear_policy(env.observation_space.shape[0], 3, seed=3)
    report = evaluate_policy(policy, cfg)
    obs, info = env.reset(seed=0)
    lo = env.market.bounds["test"][0]
    walked, ended = {}, False
    while not ended:
        obs, _, terminated, truncated, info = env.step(int(policy(obs[None])[0]))
        walked[info["row"]] = info["equity"]
        ended = terminated or truncated
    equity = report.series["agent"].to_numpy()
    assert all(equity[row - lo] == value for row, value in walked.items())
    assert report.table.loc["agent", "trades"] == info["trades"]
    free = evaluate_policy(policy, {**cfg, "min_hold": None})
    assert report.table.loc["agent", "trades"] < free.table.loc["agent", "trades"]


def test_a_served_decision_is_the_envs_applied_one_on_every_bar():
    """A request with the held position and its held_for gets the env's applied target, and the held_for the env
    has after that decision (what the next request sends)."""
    cfg = btc_config(decision_interval=1, min_hold=4)
    env = SpotTradingEnv({**cfg, "split": "test", "episode_length": None})
    reader = BarReader.for_env_config(cfg)
    policy = linear_policy(env.observation_space.shape[0], 3, seed=3)
    obs, info = env.reset(seed=0)
    held_back = 0
    for _ in range(300):
        row = info["row"]
        window = BARS.iloc[row + 1 - reader.bars_needed:row + 1]
        decision = reader.decide(window.assign(position=info["position"], held_for=info["held_for"]).reset_index(),
                                 policy)
        obs, _, _, _, info = env.step(int(policy(obs[None])[0]))
        assert decision["action"].iloc[0] == info["asked_action"]
        assert decision["applied_action"].iloc[0] == info["applied_action"]
        assert decision["target_position"].iloc[0] == env.targets[info["applied_action"]] == info["position"]
        assert decision["held_for"].iloc[0] == info["held_for"]
        held_back += info["asked_action"] != info["applied_action"]
    assert held_back >= 20  # the rule did override the policy
    assert "held_for (min_hold 4 decisions)" in reader.describe()


@pytest.mark.parametrize("interval, min_hold", [(1, 5), (24, 3)])
def test_a_paper_replay_is_the_backtests_equity_curve_with_min_hold(interval, min_hold):
    cfg = btc_config(decision_interval=interval, min_hold=min_hold)
    reader = BarReader.for_env_config(cfg)
    env = SpotTradingEnv({**cfg, "split": "test", "episode_length": None})
    policy = linear_policy(env.observation_space.shape[0], 3, seed=3)
    report = evaluate_policy(policy, cfg)
    equity, book = paper_replay_of_test_window(reader, policy, BARS, env)
    assert np.array_equal(equity, report.series["agent"].to_numpy())
    assert book.ledger.trades == report.table.loc["agent", "trades"]


def test_the_paper_book_holds_even_when_the_decision_ignores_held_for_and_resumes_with_its_age():
    """A decide that asks the policy alone (no held_for) still trades as the backtest: the book applies the rule;
    stopped and resumed from its logged state, it continues as if never stopped."""
    cfg = btc_config(decision_interval=1, min_hold=5)
    reader = BarReader.for_env_config(cfg)
    raw = BarReader.for_env_config(btc_config(decision_interval=1))  # the same model without the rule
    policy = linear_policy(24 * 8 + 3, 3, seed=5)

    def served(bars: pd.DataFrame, held: float) -> float:
        return float(reader.decide(bars.assign(position=held), policy)["target_position"].iloc[0])

    def unaware(bars: pd.DataFrame, held: float) -> float:
        return float(raw.decide(bars.drop(columns="held_for").assign(position=held), policy)["target_position"].iloc[0])

    rows = range(len(BARS) - 400, len(BARS))
    book, targets = new_book(reader), []
    whole = replay(book, BARS, rows, reader.bars_needed, served, lambda _stamp, _outcome: targets.append(book.pending))
    changes = np.flatnonzero(np.diff(targets)) + 1
    assert len(changes) >= 10 and np.diff(changes).min() >= 5  # each position held 5 decisions (bars) or more
    assert np.array_equal(replay(new_book(reader), BARS, rows, reader.bars_needed, unaware), whole)
    first = new_book(reader)
    part = replay(first, BARS, rows[:157], reader.bars_needed, served)
    resumed = PaperBook.from_state(json.loads(json.dumps(first.to_state())))
    assert resumed.held_for == first.held_for and resumed.min_hold == 5
    rest = replay(resumed, BARS, rows[157:], reader.bars_needed, served)
    assert np.array_equal(np.r_[part, rest], whole)


# --- Bad input: one line


@pytest.mark.parametrize("config, fragment", [
    ({"min_hold": 0}, "env_config.min_hold: Input should be greater than or equal to 1 (got 0)"),
    ({"min_hold": -3}, "env_config.min_hold: Input should be greater than or equal to 1 (got -3)"),
    ({"min_hold": 5, "positions": "continuous"}, "env_config.min_hold 5 applies to discrete positions only"),
    ({"min_hold": 1, "positions": "continuous_long_short"}, "env_config.min_hold 1 applies to discrete positions"),
])
def test_min_hold_below_one_or_with_continuous_positions_is_refused_in_one_line(walk_file, config, fragment):
    with pytest.raises(InputError) as refused:
        SpotTradingEnv({"data_path": walk_file, **config})
    assert fragment in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize("setting, fragment", [
    ("environment.env_config.min_hold=0", "env_config.min_hold: Input should be greater than or equal to 1"),
    ("environment.env_config.positions=continuous", "env_config.min_hold 3 applies to discrete positions only"),
])
def test_the_run_command_refuses_them_with_exit_2_and_one_line(tmp_path, capsys, setting, fragment):
    conf = REPO / "conf" / "dqn_btc.yaml"
    out = tmp_path / "out"
    code = main([str(conf), "--dry-run", "--output", str(out), "--set", "environment.env_config.min_hold=3",
                 "--set", setting])
    stderr = capsys.readouterr().err.strip()
    assert code == 2 and fragment in stderr and "\n" not in stderr and "Traceback" not in stderr
    assert not out.exists()


@pytest.mark.parametrize("extra, fragment", [
    ({}, "this model holds a position for at least min_hold 4 decisions: give a held_for column beside position"),
    ({"held_for": 0}, "held_for 0 is not a whole number of decisions of 1 or more"),
    ({"held_for": 2.5}, "held_for 2.5 is not a whole number"),
    ({"held_for": "two"}, "held_for 'two' is not a whole number"),
])
def test_a_request_without_a_valid_held_for_is_refused_in_one_line(extra, fragment):
    reader = BarReader.for_env_config(btc_config(min_hold=4))
    bars = BARS.iloc[-reader.bars_needed:].reset_index().assign(position=1.0, **extra)
    with pytest.raises(InputError) as refused:
        reader.decide(bars, linear_policy(24 * 8 + 3, 3))
    assert fragment in str(refused.value) and "\n" not in str(refused.value)
