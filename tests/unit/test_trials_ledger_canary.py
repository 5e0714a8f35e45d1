"""The trials ledger's canary: thirty hypotheses on a random walk.

Judged one by one, at least one of thirty noise hypotheses passes the verdict: that is the luck a user who
tries thirty ideas and keeps the best is fooled by. Through the ledger (a real MLflow store on disk), each
verdict is deflated by every configuration tried before it on the same data and windows, and none passes.
The hypotheses (experiments/studies/ledger_canary.py) are persistent random long/flat positions on a seeded random walk,
with fees; their out-of-sample returns are simulated, as the verdict would receive them from 30 sweeps that do
not fit in CI.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

import envs
from envs.baselines import Baseline
from experiments.results.trials_ledger import LedgerKey, LedgerRun, TrialsLedger
from experiments.results.verdict import build_verdict
from experiments.studies.ledger_canary import BARS, CONFIGURATIONS, ENV_ID, FOLDS, HOURS_PER_YEAR, HYPOTHESES
from experiments.studies.ledger_canary import hypothesis as _hypothesis
from experiments.studies.ledger_canary import position_returns as _position_returns
from experiments.studies.ledger_canary import random_walk_market as _market
from experiments.studies.ledger_canary import supported as _supported


def test_thirty_noise_hypotheses_pass_one_by_one_but_not_through_the_ledger(tmp_path):
    market = _market(seed=7)
    hypotheses = [_hypothesis(number, market) for number in range(HYPOTHESES)]

    alone = [_supported(build_verdict(trials, "max", HOURS_PER_YEAR)) for trials in hypotheses]
    assert any(alone), "the canary needs a lucky hypothesis: judged alone, one of thirty should pass"

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    ledger = TrialsLedger(MlflowClient(uri), uri)
    windows = tuple((str(market[0][f * BARS]), str(market[0][(f + 1) * BARS - 1])) for f in range(FOLDS))
    key = LedgerKey("random-walk", windows, "RANDOM WALK")
    through = []
    for number, trials in enumerate(hypotheses):
        run = LedgerRun(ledger, f"hypothesis-{number}", f"run{number:04d}", "canary", "", smoke_test=False)
        verdict = build_verdict(trials, "max", HOURS_PER_YEAR, prior=run.prior(key))
        run.record(key, sorted({t.point for t in trials}), verdict.returns)
        assert verdict.attempt == number + 1
        assert verdict.n_tried == CONFIGURATIONS * (number + 1)
        through.append(_supported(verdict))
    lucky = [number for number, edges in enumerate(alone) if edges]
    assert not any(through), f"through the ledger, hypotheses {[i for i, e in enumerate(through) if e]} passed"
    # The lucky ones were judged against everything tried before them: their DSR fell below the bar.
    assert lucky and all(number > 0 for number in lucky)
    last = build_verdict(hypotheses[-1], "max", HOURS_PER_YEAR, prior=ledger.prior(key))
    assert last.attempt == HYPOTHESES + 1 and last.n_tried == CONFIGURATIONS * (HYPOTHESES + 1)
    assert 1.0 < last.n_effective <= last.n_tried


def test_a_fresh_ledger_is_recorded_with_its_reason_and_counts_from_there(tmp_path):
    market = _market(seed=7)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    ledger = TrialsLedger(MlflowClient(uri), uri)
    key = LedgerKey("random-walk", (("a", "b"),), "RANDOM WALK")
    for number in range(3):
        trials = _hypothesis(number, market)
        fresh = "new data vendor" if number == 2 else ""
        run = LedgerRun(ledger, "h", f"run{number}", "canary", "", smoke_test=number == 0, fresh_reason=fresh)
        verdict = build_verdict(trials, "max", HOURS_PER_YEAR, prior=run.prior(key))
        run.record(key, sorted({t.point for t in trials}), verdict.returns)
    assert verdict.attempt == 1 and "new data vendor" in verdict.ledger_note and "2 earlier" in verdict.ledger_note
    following = ledger.prior(key)
    assert following.attempts == 1 and following.configurations == CONFIGURATIONS
    assert "new data vendor" in following.note
    tags = MlflowClient(uri).get_experiment_by_name("trials-ledger").tags
    assert tags[f"ledger.{key.id}.attempts"] == "3"
    assert "new data vendor" in tags[f"ledger.{key.id}.fresh"]
    # A run scored again (after --resume) is not recorded twice, nor deflated by its own record.
    run = LedgerRun(ledger, "h", "run2", "canary", "", smoke_test=False)
    assert run.prior(key).attempts == 0
    run.record(key, ["x"], verdict.returns)
    assert len(ledger.attempts(key)) == 3


@pytest.mark.parametrize("duplicates", [1, 3])
def test_a_rerun_counts_as_tried_but_not_as_independent(duplicates):
    """The count grows with every rerun; the effective number absorbs exact duplicates."""
    from experiments.results.verdict import PriorTrials, configuration_series

    market = _market(seed=7)
    trials = _hypothesis(0, market)
    first = build_verdict(trials, "max", HOURS_PER_YEAR)
    columns = pd.concat([first.returns.add_prefix(f"earlier {i}: ") for i in range(duplicates)], axis=1)
    prior = PriorTrials(columns, configuration_series(columns), CONFIGURATIONS * duplicates, duplicates)
    again = build_verdict(trials, "max", HOURS_PER_YEAR, prior=prior)
    assert again.n_tried == CONFIGURATIONS * (duplicates + 1)
    assert again.n_effective == pytest.approx(first.n_effective)
    for before, after in zip(first.edges, again.edges, strict=True):
        if np.isfinite(before.dsr):
            assert after.dsr < before.dsr  # the count deflates a rerun...
            assert after.dsr_effective == pytest.approx(before.dsr_effective)  # ...the effective number does not


def test_the_walk_is_judged_against_the_family_table_as_it_was_by_name():
    """The baselines are the trading family's table run on the walk, and the three the canary computed by name before
    give what they gave: buy-and-hold is the walk itself, flat earns nothing, the SMA crossover enters flat and pays
    its fees."""
    _, log_returns, baselines = _market(seed=7)
    assert list(baselines) == [baseline.name for baseline in envs.family(ENV_ID).baseline_table()]
    close = pd.Series(100.0 * np.exp(np.cumsum(log_returns)))
    sma = (close.rolling(24, min_periods=1).mean() > close.rolling(96, min_periods=1).mean()).to_numpy(float)
    assert np.array_equal(baselines["buy_and_hold"], log_returns)
    assert np.array_equal(baselines["flat"], np.zeros_like(log_returns))
    assert np.array_equal(baselines["sma_24_96"], _position_returns(sma, log_returns))


def test_a_baseline_added_to_the_family_table_is_judged_too(monkeypatch):
    from envs.trading import backtest

    half = Baseline("half", lambda closes, lo, hi: np.full(hi - lo, 0.5), "half the market, held throughout")
    names = [baseline.name for baseline in backtest.BASELINES]
    monkeypatch.setattr(backtest, "BASELINES", (*backtest.BASELINES, half))
    market = _market(seed=7)
    assert list(market[2]) == [*names, "half"]
    assert np.array_equal(market[2]["half"], 0.5 * market[1])
    verdict = build_verdict(_hypothesis(0, market), "max", HOURS_PER_YEAR)
    assert [edge.baseline for edge in verdict.edges] == list(market[2])
