"""The trials ledger is keyed on what a verdict judges, not on a file's bytes (issue 39, point 9).

Saving the bundled bars again (`save_bars(load_bars(f))`) gave another byte digest, and so did dropping the first
bar, with the same values and test windows: either started a fresh ledger at attempt 1 without --fresh-ledger, and
escaped the deflation the ledger exists for. The key is now the bars' values over every test window, plus the
windows; a ledger recorded under the old byte key is found and carried over.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from mlflow.tracking import MlflowClient

from envs.report import EvaluationReport
from envs.trading.data import load_bars, save_bars
from experiments.results.trials_ledger import LedgerKey, LedgerRun, TrialsLedger
from experiments.results.verdict import build_verdict
from experiments.studies.ledger_canary import BARS, CONFIGURATIONS, FOLDS, HOURS_PER_YEAR
from experiments.studies.ledger_canary import hypothesis as _hypothesis
from experiments.studies.ledger_canary import random_walk_market as _market
from tests.conftest import REPO

BUNDLED = REPO / "data" / "raw" / "BTC-USD_1h.parquet"
PROTOCOL = {"type": "walk_forward", "folds": 4, "validation_size": 1500, "test_size": 1500, "embargo": 24}


def scored_on(path: Path) -> EvaluationReport:
    """The trading scorer's report of a never-trading policy on the newest fold of `path`: what
    experiments.results.scoring keys the ledger on."""
    from envs.trading.backtest import evaluate_policy

    return evaluate_policy(lambda obs: np.zeros(len(obs), dtype=np.int64),
                           {"data_path": str(path), "protocol": PROTOCOL, "fold": 3})


def test_the_same_bars_saved_again_or_without_their_first_bar_are_the_same_ledger(tmp_path):
    bars = load_bars(BUNDLED)
    again = save_bars(load_bars(BUNDLED), tmp_path / "again.parquet", "BTC-USD", "1h")
    shorter = save_bars(bars.iloc[1:], tmp_path / "shorter.parquet", "BTC-USD", "1h")
    changed = bars.copy()
    row = len(bars) - 700  # inside the newest fold's test window (its last 1,500 bars)
    changed.iloc[row, changed.columns.get_loc("close")] *= 1.001
    changed.iloc[row, changed.columns.get_loc("high")] = changed.iloc[row][["open", "high", "close"]].max()
    edited = save_bars(changed, tmp_path / "edited.parquet", "BTC-USD", "1h")

    report = scored_on(BUNDLED)
    key = LedgerKey(report.data_digest, report.windows)
    assert len(key.windows) == 4
    for path in (again, shorter):
        other = scored_on(path)
        assert other.windows == key.windows
        # The bytes differ: keyed on them, this file would have started a new ledger at attempt 1.
        assert load_bars(path).attrs["digest"] != bars.attrs["digest"]
        assert LedgerKey(other.data_digest, other.windows).id == key.id
        assert other.file_digest == load_bars(path).attrs["digest"]  # what finds a byte-keyed ledger to carry over
    other = scored_on(edited)
    assert other.windows == key.windows
    assert LedgerKey(other.data_digest, other.windows).id != key.id  # one close inside a test window is other data


def attempt(ledger: TrialsLedger, key: LedgerKey, number: int, market) -> None:
    """Hypothesis `number` judged and recorded under `key`, as a run does."""
    trials = _hypothesis(number, market)
    run = LedgerRun(ledger, f"hypothesis-{number}", f"run{number:04d}", "canary", "", smoke_test=False)
    verdict = build_verdict(trials, "max", HOURS_PER_YEAR, prior=run.prior(key))
    run.record(key, sorted({t.point for t in trials}), verdict.returns)


def test_a_ledger_recorded_under_the_byte_key_is_carried_over(tmp_path):
    market = _market(seed=7)
    windows = tuple((str(market[0][f * BARS]), str(market[0][(f + 1) * BARS - 1])) for f in range(FOLDS))
    bars = pd.DataFrame({"open": 1.0, "high": 1.0, "low": 1.0, "close": 1.0, "volume": 1.0},
                        index=pd.date_range("2024-01-01", periods=10, freq="h", tz="UTC", name="timestamp"))
    # One file saved twice with other metadata: the same bars, two byte digests (load_bars' attrs["digest"]).
    first = load_bars(save_bars(bars, tmp_path / "a.parquet", "RW", "1h")).attrs["digest"]
    resaved = load_bars(save_bars(bars, tmp_path / "b.parquet", "RW", "1h", gaps="drop")).attrs["digest"]
    assert first != resaved
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    ledger = TrialsLedger(MlflowClient(uri), uri)
    byte_keyed = LedgerKey(first, windows, "RANDOM WALK")  # how ledgers were keyed before
    for number in range(2):
        attempt(ledger, byte_keyed, number, market)

    key = LedgerKey("values-of-the-windows", windows, "RANDOM WALK", file_digest=first)
    prior = TrialsLedger(MlflowClient(uri), uri).prior(key)  # a new process: nothing cached
    assert prior.attempts == 2 and prior.configurations == 2 * CONFIGURATIONS
    assert prior.note == f"2 attempt(s) carried over from the byte-keyed ledger {byte_keyed.id}"
    verdict = build_verdict(_hypothesis(2, market), "max", HOURS_PER_YEAR, prior=prior)
    assert verdict.attempt == 3 and verdict.n_tried == 3 * CONFIGURATIONS
    assert f"carried over from the byte-keyed ledger {byte_keyed.id}" in verdict.scope()

    attempt(ledger, key, 2, market)  # recorded under the new key; the old one is read where it is
    repository = ledger._repository()
    assert len(repository.list_artifacts(key.id)) == 1 and len(repository.list_artifacts(byte_keyed.id)) == 2
    tags = MlflowClient(uri).get_experiment_by_name("trials-ledger").tags
    assert tags[f"ledger.{key.id}.carried_from"] == byte_keyed.id and tags[f"ledger.{key.id}.attempts"] == "3"
    # The file saved again has other bytes: the new key still counts the carried attempts (through its tag).
    again = LedgerKey(key.data_digest, windows, "RANDOM WALK", file_digest=resaved)
    assert ledger.prior(again).attempts == 3
    # Other windows are another ledger, whatever the file.
    other = LedgerKey(key.data_digest, windows[1:], "RANDOM WALK", file_digest=first)
    assert ledger.prior(other).attempts == 0
