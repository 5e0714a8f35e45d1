"""One baseline contract: every env family keeps its baselines in one table, headline first, and its scorer runs
the agent and every entry alike, so a baseline added to the table appears in the report with no other change."""
from __future__ import annotations

import numpy as np
import pytest

import envs
from envs.agents.testgen import baselines as testgen_baselines
from envs.agents.testprio import baselines as testprio_baselines
from envs.baselines import Baseline, baseline_table
from envs.trading import backtest

FAMILIES = sorted(envs.ENVIRONMENTS)


@pytest.mark.parametrize("env_id", FAMILIES)
def test_every_family_names_its_baselines_headline_first(env_id):
    table = envs.family(env_id).baseline_table()
    assert table and all(isinstance(b, Baseline) and b.why for b in table)
    assert len({b.name for b in table}) == len(table)


def test_a_table_refuses_a_repeated_name_or_the_agents():
    with pytest.raises(ValueError, match="unique"):
        baseline_table(Baseline("flat", print, "x"), Baseline("flat", print, "y"))
    with pytest.raises(ValueError, match="agent"):
        baseline_table(Baseline("agent", print, "x"))


def _names(env_id: str) -> list[str]:
    """The family's baselines by name, in report order, as its table gives them (a test never pins the list)."""
    return [b.name for b in envs.family(env_id).baseline_table()]


def test_the_trading_headline_is_buy_and_hold():
    names = _names("trading/Spot-v0")
    assert names[0] == "buy_and_hold"
    # What envs/trading/backtest.py's docstring and docs/DESIGN.md name beside it; a new entry adds to these.
    assert {"flat", "sma_24_96"} <= set(names[1:])


def test_a_trading_baseline_added_to_the_table_is_backtested_like_the_others(monkeypatch):
    half = Baseline("half", lambda closes, lo, hi: np.full(hi - lo, 0.5), "half the equity held")
    monkeypatch.setattr(backtest, "BASELINES", (*backtest.BASELINES, half))
    config = {"source": "synthetic", "synthetic_bars": 2_000, "episode_length": None}
    report = backtest.evaluate_policy(lambda obs: np.zeros(len(obs), dtype=np.int64), config)
    rows = ["agent", *(b.name for b in backtest.BASELINES)]
    assert list(report.table.index) == rows and rows[-1] == "half"
    assert list(report.returns.columns) == list(report.table.index)
    held = report.table.loc["half"]
    assert held["target_exposure"] == 0.5 and held["trades"] >= 1 and held["fees_paid"] > 0
    assert held["exposure"] == pytest.approx(0.5, abs=0.1)  # held, so it drifts with the price


def test_a_prioritization_baseline_added_to_the_table_is_scored_on_every_cycle(monkeypatch):
    from envs.agents.testprio.evaluate import LEARNED_BASELINE, evaluate_policy

    reverse = Baseline("reverse", lambda cycle, rng: np.arange(cycle.size)[::-1], "the cycle's rows backwards")
    monkeypatch.setattr(testprio_baselines, "BASELINES", (*testprio_baselines.BASELINES, reverse))
    report = evaluate_policy(lambda obs: np.zeros(len(obs), dtype=np.int64), {})
    rows = ["agent", LEARNED_BASELINE, *(b.name for b in testprio_baselines.BASELINES)]
    assert list(report.table.index) == rows and rows[-1] == "reverse"
    assert report.table.loc["reverse", "cycles"] == report.table.loc["random", "cycles"] > 0


def test_a_generation_baseline_is_a_strategy_factory():
    for baseline in testgen_baselines.BASELINES:
        strategy = baseline.decide(4, 0)
        action = strategy.act(np.zeros(3))
        assert 0 <= action < 4
        strategy.observe(action, 1)
