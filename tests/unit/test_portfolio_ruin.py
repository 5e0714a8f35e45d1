"""The portfolio book's ruin rule (envs/portfolio/book.py): a long-short book whose liquidation value reaches 0 at an
open or a close is liquidated there, in the env (which ends its episode terminated, info ruin), the scorer's replay
and paper trading alike; the issue-51 reproduction steps and dry-runs without a traceback."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from envs.portfolio.backtest import evaluate_policy
from envs.portfolio.book import PortfolioBook, replay_weights, step_book
from envs.portfolio.env import PortfolioEnv
from envs.portfolio.paper import UniversePaperBook
from envs.trading.data import save_bars
from envs.trading.ledger import EQUITY_FLOOR

ROOT = Path(__file__).resolve().parents[2]
CRYPTO_CONF = ROOT / "conf" / "ppo_portfolio_crypto.yaml"
BARS = 600
SQUEEZE_ROW = 460  # inside the test part (rows 420 .. 599), within its first decision's 60 held bars
CONFIG = {"window": 4, "episode_length": None, "fee_bps": 10.0, "slippage_bps": 2.0, "weights": "long_short",
          "split": "test", "split_fractions": [0.5, 0.2, 0.3],
          "features": ["log_return", {"transform": "volatility", "window": 12}]}
SHORT_B = np.array([0.0, 0.0, -1.0, 0.0], dtype=np.float32)  # scores: cash, A, B, C -> B short, the rest in cash


def crypto_reproduction(fee_bps: float) -> dict:
    """The issue's reproduction: the crypto file's env_config at `fee_bps`, long_short, gross_cap 3."""
    raw = yaml.safe_load(CRYPTO_CONF.read_text())
    config = raw["environment"]["env_config"]
    config["data_paths"] = [str((CRYPTO_CONF.parent / path).resolve()) for path in config["data_paths"]]
    return {**config, "fee_bps": fee_bps, "weights": "long_short", "gross_cap": 3}


def bars(closes: np.ndarray, opens: np.ndarray) -> pd.DataFrame:
    index = pd.date_range("2022-01-01", periods=len(closes), freq="1h", tz="UTC", name="timestamp")
    return pd.DataFrame({"open": opens, "high": np.maximum(opens, closes) * 1.001,
                         "low": np.minimum(opens, closes) * 0.999, "close": closes, "volume": 1.0}, index=index)


def quiet_walk(seed: int) -> np.ndarray:
    return 100.0 * np.exp(np.cumsum(np.random.default_rng(seed).normal(0.0, 0.002, BARS)))


@pytest.fixture(params=["gap", "grind"])
def squeeze(request, tmp_path: Path) -> tuple[str, list[str]]:
    """A, B, C: quiet walks, except B, which triples from SQUEEZE_ROW on: in one gap at that bar's open (its close
    another 10% up), or a grind of ten closes each 3^(1/10) x the last (opens at the previous close)."""
    paths = []
    for seed, name in enumerate(("AAA-USD", "BBB-USD", "CCC-USD")):
        closes = quiet_walk(seed)
        opens = np.concatenate([[closes[0]], closes[:-1]])
        if name == "BBB-USD":
            if request.param == "gap":
                closes[SQUEEZE_ROW:] *= 3.3
                opens[SQUEEZE_ROW:] = np.concatenate([[3.0 * closes[SQUEEZE_ROW - 1]], closes[SQUEEZE_ROW:-1]])
            else:
                rise = np.minimum(np.arange(BARS) - SQUEEZE_ROW + 1, 10).clip(0)
                closes *= 3.0 ** (rise / 10)
                opens = np.concatenate([[closes[0]], closes[:-1]])
        paths.append(str(save_bars(bars(closes, opens), tmp_path / f"{name}_1h.parquet", name, "1h")))
    return request.param, paths


def walk(env: PortfolioEnv, scores: np.ndarray) -> tuple[list[float], list[float], np.ndarray, dict]:
    """The env's test part stepped with the same scores until it ends: equities, rewards, the targets at decision
    rows (NaN between), and the last info."""
    obs, info = env.reset(seed=0)
    lo, hi = env.market.bounds["test"]
    targets = np.full((hi - lo, env.n_assets + 1), np.nan)
    equities, rewards, terminated, truncated = [], [], False, False
    while not (terminated or truncated):
        row = info["row"]
        obs, reward, terminated, truncated, info = env.step(scores)
        targets[row - lo] = info["weights"]
        equities.append(info["equity"])
        rewards.append(reward)
    assert terminated != truncated
    return equities, rewards, targets, info


def held_short_ruin(env: PortfolioEnv) -> tuple[int, str]:
    """Where a book that shorts B from all cash at the part's first fill and holds is ruined, worked out by hand:
    it holds cash k and -u of B, so selling everything leaves k - u p (1 + c), which is <= 0 once B's price
    p >= k / (u (1 + c)). The first open or close (time order) at or past that price."""
    lo, hi = env.market.bounds["test"]
    universe, c = env.market.universe, env.cfg.cost_rate
    target = env.weights_of(SHORT_B, lo)
    mu = 1.0 / (1.0 + c * float(np.abs(target[1:]).sum()))  # the cost of a rebalance from all cash
    cash, short = target[0] * mu, -target[2] * mu / universe.opens[lo + 1, 1]
    breach = cash / (short * (1.0 + c))
    for row in range(lo + 1, hi):
        if row > lo + 1 and universe.opens[row, 1] >= breach:
            return row, "open"
        if universe.closes[row, 1] >= breach:
            return row, "close"
    raise AssertionError("the planted squeeze does not ruin the held short")


def test_the_issue_reproduction_steps_end_terminated_with_ruin_not_a_math_domain_error() -> None:
    env = PortfolioEnv(crypto_reproduction(3000))
    env.reset(seed=0)
    rng = np.random.default_rng(1)  # a walk that raised ValueError: math domain error at its 24th step before
    for _ in range(30):
        _, reward, terminated, truncated, info = env.step(rng.uniform(-1, 1, 6).astype(np.float32))
        assert math.isfinite(reward)
        if terminated or truncated:
            break
    assert terminated and not truncated and info["ruin"]
    assert info["equity"] == EQUITY_FLOOR and env.book.ruined and not env.book.units.any()
    # A ruined book trades no more, whatever is asked, and the reward stays finite.
    _, reward, terminated, _, info = env.step(np.ones(6, dtype=np.float32))
    assert terminated and reward == 0.0 and info["equity"] == EQUITY_FLOOR


def test_the_dry_run_of_the_reproduction_exits_0(tmp_path: Path) -> None:
    """At fee_bps 3330 (c x gross_cap = 0.9996, within the bound) the dry run's random example steps raised
    `ValueError: math domain error` in every one of 30 tries before the rule; at 3000 in about half."""
    raw = yaml.safe_load(CRYPTO_CONF.read_text())
    raw["environment"]["env_config"] = crypto_reproduction(3330)
    conf = tmp_path / "repro.yaml"
    conf.write_text(yaml.safe_dump(raw))
    done = subprocess.run([sys.executable, "-m", "experiments.run", str(conf), "--dry-run"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def test_a_held_short_is_ruined_where_the_squeeze_crosses_its_breach_in_the_env_and_the_replay(squeeze) -> None:
    kind, paths = squeeze
    env = PortfolioEnv({**CONFIG, "data_paths": paths, "decision_interval": 60})  # held past the squeeze
    lo, _ = env.market.bounds["test"]
    ruin_row, mark = held_short_ruin(env)
    if kind == "gap":
        assert (ruin_row, mark) == (SQUEEZE_ROW, "open")
    else:
        assert SQUEEZE_ROW <= ruin_row < SQUEEZE_ROW + 10 and mark == "close"
    equities, rewards, targets, info = walk(env, SHORT_B)
    assert info["ruin"] and len(equities) == 1 and equities[0] == EQUITY_FLOOR and math.isfinite(rewards[0])
    universe = env.market.universe
    replayed, book = replay_weights(targets, lo, universe.opens, universe.closes, universe.last_rows,
                                    env.cfg.cost_rate)
    ruin_bar = ruin_row - lo
    assert book.ruined and np.all(replayed[ruin_bar:] == EQUITY_FLOOR) and replayed[ruin_bar - 1] > 0.0
    assert replayed[-1] == equities[0] and book.costs_paid == env.book.costs_paid
    assert book.traded_notional == env.book.traded_notional
    # Liquidated at the mark that revealed it: the notional sold there is the short at that open's or close's price.
    prices = universe.opens if mark == "open" else universe.closes
    first_fill = float(np.abs(targets[0, 1:]).sum()) / (1.0 + env.cfg.cost_rate * np.abs(targets[0, 1:]).sum())
    short = -targets[0, 2] / (1.0 + env.cfg.cost_rate * np.abs(targets[0, 1:]).sum()) / universe.opens[lo + 1, 1]
    assert book.traded_notional == pytest.approx(first_fill + short * prices[ruin_row, 1], rel=1e-12)
    returns = np.diff(np.log(replayed))
    assert np.all(np.isfinite(returns)) and np.all(returns[ruin_bar:] == 0.0)


def gap_universe(tmp_path: Path) -> list[str]:
    """A, B, C: quiet walks, except B, which opens 3x its last close at SQUEEZE_ROW and stays there."""
    paths = []
    for seed, name in enumerate(("AAA-USD", "BBB-USD", "CCC-USD")):
        closes = quiet_walk(seed)
        if name == "BBB-USD":
            closes[SQUEEZE_ROW:] *= 3.0
        opens = np.concatenate([[closes[0]], closes[:-1]])
        if name == "BBB-USD":
            opens[SQUEEZE_ROW] *= 3.0  # the gap is at the open
        paths.append(str(save_bars(bars(closes, opens), tmp_path / f"{name}_1h.parquet", name, "1h")))
    return paths


@pytest.mark.parametrize("interval", [1, 7])
def test_a_rebalanced_short_ruins_at_the_gap_with_equal_env_and_replay_paths(tmp_path: Path, interval: int) -> None:
    env = PortfolioEnv({**CONFIG, "data_paths": gap_universe(tmp_path), "decision_interval": interval})
    lo, _ = env.market.bounds["test"]
    equities, rewards, targets, info = walk(env, SHORT_B)
    assert info["ruin"] and equities[-1] == EQUITY_FLOOR and all(math.isfinite(r) for r in rewards)
    universe = env.market.universe
    replayed, book = replay_weights(targets, lo, universe.opens, universe.closes, universe.last_rows,
                                    env.cfg.cost_rate)
    decided = np.flatnonzero(~np.isnan(targets[:, 0]))
    marks = np.minimum(decided + interval, len(targets) - 1)
    assert replayed[marks].tolist() == equities
    assert np.flatnonzero(replayed == EQUITY_FLOOR)[0] == SQUEEZE_ROW - lo and book.costs_paid == env.book.costs_paid


def test_paper_trading_resumed_at_every_bar_stays_ruined_as_the_replay_does(tmp_path: Path) -> None:
    """Asked to short B at every bar, before and after the gap that ruins it: a resumed session must not trade
    its floored cash again."""
    env = PortfolioEnv({**CONFIG, "data_paths": gap_universe(tmp_path), "decision_interval": 1})
    lo, hi = env.market.bounds["test"]
    universe = env.market.universe
    target = env.weights_of(SHORT_B, lo)
    paper, equity = UniversePaperBook(PortfolioBook(env.n_assets, env.cfg.cost_rate)), []
    for row in range(lo, hi):
        paper = UniversePaperBook.from_state(json.loads(json.dumps(paper.to_state())))  # stopped and resumed
        equity.append(paper.step(row, universe, lambda held: target).equity)
    replayed, book = replay_weights(np.tile(target, (hi - lo, 1)), lo, universe.opens, universe.closes,
                                    universe.last_rows, env.cfg.cost_rate)
    assert book.ruined and paper.book.ruined and equity == replayed.tolist()
    assert equity[-1] == EQUITY_FLOOR and paper.book.rebalances == book.rebalances


def test_the_backtest_names_the_ruin_bar_and_its_returns_stay_finite(squeeze) -> None:
    kind, paths = squeeze
    report = evaluate_policy(lambda obs: SHORT_B[None], {**CONFIG, "data_paths": paths, "decision_interval": 60})
    agent = report.series["agent"]
    assert agent.iloc[-1] == EQUITY_FLOOR and np.isfinite(report.returns.to_numpy()).all()
    ruined = [note for note in report.notes if "ruined" in note]
    assert len(ruined) == 1 and ruined[0].startswith("agent's book was ruined at ")
    assert pd.Timestamp(ruined[0].split(" at ")[1].split(": ")[0]) == agent.index[int(np.argmax(agent == EQUITY_FLOOR))]
    assert report.table.loc["agent", "total_return"] == pytest.approx(EQUITY_FLOOR - 1.0)


def test_only_a_book_that_borrows_is_liquidated_paying_its_cost_as_far_as_its_equity_allows() -> None:
    prices = np.array([[1.0, 1.0]])
    book = PortfolioBook(2, cost_rate=0.1)
    book.rebalance(np.array([1.5, 0.5, -1.0]), prices[0])
    assert book.borrows() and book.liquidation_values(prices)[0] > 0.0
    # B up 90%: the equity, mu (1.5 + 0.5 - 1.9), is still positive, but selling everything would cost
    # 0.1 mu (0.5 + 1.9), more than it.
    squeezed = np.array([[1.0, 1.9]])
    equity = book.equity(squeezed[0])
    assert 0.0 < equity and book.liquidation_values(squeezed)[0] <= 0.0
    paid = book.costs_paid
    opens = closes = np.vstack([prices, squeezed])
    assert step_book(book, None, 1, 1, opens, closes, np.array([5, 5])) == EQUITY_FLOOR
    assert book.ruined and book.costs_paid == pytest.approx(paid + equity, abs=1e-15)
    assert book.rebalance(np.array([0.0, 1.0, 0.0]), prices[0]) == 0.0 and not book.units.any()
    # A book that borrows nothing (cash >= 0, no short) keeps a positive liquidation value however far prices fall.
    long_only = PortfolioBook(3, cost_rate=0.5)
    long_only.rebalance(np.array([0.0, 0.2, 0.3, 0.5]), np.ones(3))
    crash = np.array([[1.0, 1.0, 1.0], [1e-12, 1e-12, 1e-12]])
    assert not long_only.borrows()
    assert step_book(long_only, None, 1, 1, crash, crash, np.array([9, 9, 9])) > 0.0 and not long_only.ruined
