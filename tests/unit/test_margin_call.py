"""A short's margin call (envs.trading.ledger): liquidated at the mark that revealed the breach, equity
floored, the episode terminated; the same in the ledger, the single env, the batched env and the backtest."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from envs.errors import InputError
from envs.trading.backtest import agent_targets, evaluate_policy
from envs.trading.data import save_bars
from envs.trading.env import Market, SpotTradingEnv
from envs.trading.ledger import EQUITY_FLOOR, Ledger, simulate_positions
from envs.trading.vector_env import SpotTradingVectorEnv
from tests.conftest import bare_market

SHORT = 0  # long_short's action order is (-1, 0, 1)


def _short_ledger(maintenance_margin: float = 0.1) -> Ledger:
    ledger = Ledger(fee_rate=0.0, slippage_rate=0.0, maintenance_margin=maintenance_margin)
    ledger.rebalance(-1.0, 100.0)  # sells 0.01 coin: cash 2, units -0.01
    return ledger


def test_a_short_is_called_at_the_maintenance_margin_and_not_before():
    # equity = 2 - p/100, borrowed value = p/100: called when 2 - p/100 <= 0.1 p/100, i.e. p >= 181.818...
    ledger = _short_ledger()
    assert not ledger.margin_call(181.8) and ledger.units == -0.01 and not ledger.margin_called
    assert ledger.margin_call(181.82)
    assert ledger.units == 0.0 and ledger.position == 0.0 and ledger.margin_called and ledger.trades == 2
    assert math.isclose(ledger.equity(500.0), 2 - 1.8182)  # flat: later prices no longer matter


def test_a_gap_past_zero_equity_floors_the_account_instead_of_going_negative():
    ledger = _short_ledger()
    assert ledger.margin_call(350.0)  # equity would be 2 - 3.5 < 0
    assert ledger.cash == EQUITY_FLOOR and ledger.equity(350.0) > 0


def test_longs_are_never_called():
    ledger = Ledger(fee_rate=0.001, slippage_rate=0.0)
    ledger.rebalance(1.0, 100.0)
    assert not ledger.margin_call(1.0) and ledger.units > 0


def test_simulated_equity_stays_at_the_liquidated_value_after_a_call():
    # Short 1/120 coin at the first open (cash 2); at 220, equity 2 - 220/120 = 1/6 <= 0.1 x 220/120.
    closes = np.array([100.0, 120.0, 150.0, 220.0, 130.0, 90.0])
    equity, ledger = simulate_positions(np.full(6, -1.0), closes, closes, 0.0, 0.0)
    assert ledger.margin_called
    assert np.allclose(equity, [1.0, 1.0, 0.75, 1 / 6, 1 / 6, 1 / 6])


def test_always_short_through_a_rally_terminates_with_a_margin_call_on_the_bundled_data():
    """The case that raised "math domain error": reset(seed=38) of the bundled BTC train split, held short."""
    env = SpotTradingEnv({"positions": "long_short"})
    env.reset(seed=38)
    rewards, terminated, truncated = [], False, False
    while not (terminated or truncated):
        _, reward, terminated, truncated, info = env.step(SHORT)
        rewards.append(reward)
    assert terminated and not truncated and info["margin_call"] and info["position"] == 0.0
    assert all(math.isfinite(r) for r in rewards)
    # The rewards still add up to the log of the final equity (reward_scale 100).
    assert math.isclose(sum(rewards) / 100.0, math.log(info["equity"]), rel_tol=1e-9)
    assert 0 < info["equity"] < 0.2


def test_the_validation_walk_ends_at_the_call_before_equity_would_go_negative():
    env = SpotTradingEnv({"positions": "long_short", "split": "validation", "episode_length": None})
    env.reset(seed=0)
    terminated = truncated = False
    while not (terminated or truncated):
        _, reward, terminated, truncated, info = env.step(SHORT)
        assert math.isfinite(reward)
    called_at = pd.Timestamp(env.market.timestamps[info["row"]])
    assert terminated and called_at < pd.Timestamp("2019-05-11 06:00", tz="UTC")


def _rally_file(tmp_path) -> str:
    """1% up every hour: any short held for a few days of the test split is called."""
    n = 600
    closes = 100 * 1.01 ** np.arange(1, n + 1)
    opens = closes / 1.01
    bars = pd.DataFrame({"open": opens, "high": closes * 1.001, "low": opens * 0.999, "close": closes,
                         "volume": np.ones(n)},
                        index=pd.date_range("2022-01-01", periods=n, freq="1h", tz="UTC", name="timestamp"))
    return str(save_bars(bars, tmp_path / "RALLY-USD_1h.parquet", "RALLY-USD", "1h"))


def always_short(obs: np.ndarray) -> np.ndarray:
    return np.full(len(obs), SHORT)


def test_the_backtest_replays_the_call_like_the_env_walk(tmp_path):
    config = {"data_path": _rally_file(tmp_path), "positions": "long_short", "window": 8, "episode_length": 50,
              "split_fractions": [0.6, 0.2, 0.2], "split": "test"}
    env = SpotTradingEnv({**config, "episode_length": None})
    targets = agent_targets(always_short, env)
    assert env.ledger.margin_called and targets[-1] == 0.0 and targets[0] == -1.0
    report = evaluate_policy(always_short, config)
    agent = report.table.loc["agent"]
    assert math.isclose(agent["final_equity"], env.ledger.equity(env.market.closes[-1]), rel_tol=1e-12)
    assert 0 < agent["final_equity"] < 0.2 and agent["trades"] == 2


@pytest.mark.parametrize("margin", [0.0, 1.0, -0.5])
def test_maintenance_margin_must_be_a_fraction(margin):
    with pytest.raises(InputError, match="maintenance_margin"):
        SpotTradingEnv({"positions": "long_short", "maintenance_margin": margin})


# --- A short held between decisions (decision_interval > 1) is checked at every open and close it is held
# through, in time order, by the single env, the batched env and the backtest alike.



def _walk_config(interval: int, **overrides) -> dict:
    return {"positions": "long_short", "decision_interval": interval, "window": 1, "episode_length": None,
            "split": "test", **overrides}


def _scripted(actions):
    """A policy that plays `actions` in order (then flat), for `agent_targets`."""
    moves = iter(actions)
    return lambda obs: np.full(len(obs), next(moves, 1))


def _single_and_backtest(market: Market, config: dict, actions) -> tuple[tuple[bool, float, int], tuple[bool, float]]:
    """The single env's walk (margin call, final equity, last row) and the backtest's replay of its positions
    (margin call, final equity), both as `evaluate_policy` computes them."""
    env = SpotTradingEnv(config, market=market)
    targets = agent_targets(_scripted(actions), env)
    lo, hi = market.bounds["test"]
    walk = (env.ledger.margin_called, env.ledger.equity(market.closes[hi - 1]), env._t)
    equity, ledger = simulate_positions(targets, market.opens[lo:hi], market.closes[lo:hi], env.fee_rate,
                                        env.slippage_rate, env.cfg.maintenance_margin)
    return walk, (ledger.margin_called, float(equity[-1]))


def _batched(market: Market, config: dict, actions: np.ndarray) -> list[tuple[bool, float, int]]:
    """One sub-env per row of `actions` (num_envs x steps), stepped together: each sub-env's first episode end
    (margin call, final equity, last row). Sub-envs called early autoreset while the others go on."""
    env = SpotTradingVectorEnv(config, num_envs=len(actions), market=market)
    env.reset(seed=0)
    ended: list[tuple[bool, float, int] | None] = [None] * len(actions)
    for step in range(actions.shape[1]):
        _, _, terminated, truncated, info = env.step(actions[:, step])
        for i in np.flatnonzero(terminated | truncated):
            if ended[i] is None:
                ended[i] = (bool(info["margin_call"][i]), float(info["equity"][i]), int(info["row"][i]))
        if all(e is not None for e in ended):
            return ended
    raise AssertionError(f"episodes did not end in {actions.shape[1]} steps: {ended}")


@pytest.mark.parametrize("spike", [200.0, 190.0])  # 200: past zero equity (floored); 190: some equity is left
def test_a_gap_at_an_open_inside_a_held_interval_is_called_by_env_batched_env_and_backtest(spike):
    """Flat at 100 but for one bar opening at `spike` (and closing back at 100) in the middle of a 24-bar hold
    of a short: its open breaches the margin (called at >= ~181.8), so all three liquidate there, at that open."""
    opens = np.full(60, 100.0)
    closes = np.full(60, 100.0)
    opens[10] = spike  # the short is sold at bar 1's open and held through bars 1..24
    market, config = bare_market(opens, closes), _walk_config(24)
    (called, equity, row), (replay_called, replay_equity) = _single_and_backtest(market, config, [SHORT] * 3)
    [(batched_called, batched_equity, batched_row)] = _batched(market, config, np.full((1, 3), SHORT))
    assert called and batched_called and replay_called
    assert row == batched_row == 10
    assert equity == batched_equity and math.isclose(equity, replay_equity, rel_tol=1e-12)
    ledger = Ledger(fee_rate=10 / 1e4, slippage_rate=2 / 1e4)  # by hand: the env's short, called at the spike
    ledger.rebalance(-1.0, 100.0)
    assert ledger.margin_call(spike) and math.isclose(equity, ledger.cash, rel_tol=1e-12)
    assert (equity == EQUITY_FLOOR) == (spike == 200.0)


def _gap_market(rng: np.random.Generator, n: int) -> Market:
    """A random walk of closes whose opens mostly follow the last close but sometimes gap far up or down
    (and the bar closes back near where it was): breaches at opens that the closes do not show."""
    closes = 100.0 * np.exp(np.cumsum(rng.normal(0.0, 0.01, n)))
    gaps = np.where(rng.random(n) < 0.15, rng.normal(0.0, 0.25, n), rng.normal(0.0, 0.002, n))
    opens = np.concatenate([[100.0], closes[:-1]]) * np.exp(gaps)
    return bare_market(opens, closes)


@pytest.mark.parametrize("interval", [1, 3, 24])
def test_env_batched_env_and_backtest_agree_on_random_gap_markets(interval):
    """Random markets with gaps, random short/flat/long decisions, several maintenance margins and costs: the
    single env, the batched env (all of a market's action sequences in one vector env) and the backtest give
    the same margin calls and final equity."""
    rng = np.random.default_rng(1234 + interval)
    calls = 0
    for case in range(16):
        market = _gap_market(rng, int(rng.integers(40, 80)))
        config = _walk_config(interval, maintenance_margin=float(rng.choice([0.1, 0.5, 0.9])),
                              fee_bps=float(rng.choice([0.0, 10.0])), slippage_bps=float(rng.choice([0.0, 2.0])))
        steps = -(-len(market.closes) // interval) + 1
        actions = rng.choice(3, size=(3, steps), p=[0.6, 0.2, 0.2])  # mostly short
        batched = _batched(market, config, actions)
        for sequence, (batched_called, batched_equity, batched_row) in zip(actions, batched, strict=True):
            (called, equity, row), (replay_called, replay_equity) = _single_and_backtest(market, config, sequence)
            where = f"case {case}, actions {sequence.tolist()}"
            assert called == batched_called == replay_called, where
            assert (equity, row) == (batched_equity, batched_row), where
            assert np.isclose(equity, replay_equity, rtol=1e-9, atol=0.0), where
            calls += called
    assert calls >= 10  # the comparison crossed margin calls
