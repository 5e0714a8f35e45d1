"""The ensemble's verdict (experiments/results/ensembles.py): its members are each fold's chosen configuration's seeds
(or every trial of the fold), it is deflated by the ledger's attempts, this run's trials and itself (one more
configuration and attempt), and the caveat "one seed" reads its members' seeds, not its one series."""
from __future__ import annotations

import numpy as np
import pandas as pd

from envs.report import EvaluationReport
from experiments.records.checkpoints import ScoredCheckpoint
from experiments.results.ensembles import ENSEMBLE, ensemble_members, with_this_run
from experiments.results.trials import Trial
from experiments.results.verdict import PriorTrials, ScoredTrial, build_verdict, per_period_sharpe

BARS = 400


def _report(agent: np.ndarray, market: np.ndarray, start: pd.Timestamp) -> EvaluationReport:
    returns = pd.DataFrame({"agent": agent, "buy_and_hold": market},
                           index=pd.date_range(start, periods=len(agent), freq="h", tz="UTC"))
    table = pd.DataFrame({name: {"total_return": float(np.expm1(r.sum())), "sharpe": per_period_sharpe(r) * 93.6,
                                 "trades": 10.0} for name, r in returns.items()}).T
    return EvaluationReport("made up", table, {}, np.exp(returns.cumsum()), "equity", returns=returns)


def _run(drift: float, folds: int = 3, seeds: int = 2, seed: int = 0):
    """A run's trials (one configuration x seeds per fold) and an ensemble's per-fold reports on the same windows."""
    rng = np.random.default_rng(seed)
    trials, ensemble = [], []
    for fold in range(folds):
        start = pd.Timestamp("2024-01-01") + pd.Timedelta(hours=BARS * fold)
        market = rng.normal(0.0, 0.01, BARS)
        agents = [rng.normal(drift, 0.005, BARS) for _ in range(seeds)]
        trials += [ScoredTrial(fold, s, "default", float(a.sum()), _report(a, market, start))
                   for s, a in enumerate(agents)]
        ensemble.append(ScoredTrial(fold, 0, ENSEMBLE, 0.0, _report(np.mean(agents, axis=0), market, start)))
    return trials, ensemble


def test_the_ensembles_verdict_counts_this_run_and_itself_and_reads_its_members_seeds():
    trials, ensemble = _run(0.002)
    single = build_verdict(trials, "max", periods_per_year=8760)
    prior = with_this_run(None, single)
    assert (prior.configurations, prior.attempts) == (1, 1)
    assert list(prior.trial_returns.columns) == ["this run: default | seed 0", "this run: default | seed 1"]
    verdict = build_verdict(ensemble, "max", 8760, prior=prior, seeds_spanned=2)
    assert (verdict.n_tried, verdict.attempt, verdict.n_configurations) == (2, 2, 1)
    assert verdict.caveats == [] and all(edge.supported for edge in verdict.edges)
    # Its one series alone would be "one seed": that caveat is about the seeds its members were trained with.
    alone = build_verdict(ensemble, "max", 8760, prior=prior)
    assert alone.caveats == ["one seed"] and not any(edge.supported for edge in alone.edges)
    # Earlier attempts in the ledger count too, before this run's.
    ledger = PriorTrials(trial_returns=prior.trial_returns.add_prefix("earlier "),
                         configuration_returns=prior.configuration_returns.add_prefix("earlier "),
                         configurations=3, attempts=2)
    later = build_verdict(ensemble, "max", 8760, prior=with_this_run(ledger, single), seeds_spanned=2)
    assert (later.n_tried, later.attempt) == (5, 4)


def test_members_are_the_chosen_configurations_seeds_or_every_trial_of_the_fold():
    trials = [Trial(None, ScoredCheckpoint(f"{fold}{point}{seed}", 1.0, 1), "all", fold, seed, point)
              for fold in (0, 1) for point in ("lr=1", "lr=2") for seed in (0, 1)]
    again = Trial(None, ScoredCheckpoint("drawn again", 2.0, 1), "all", 0, 1, "lr=1")  # the same point and seed
    selected = {0: "lr=1", 1: "lr=2"}
    seeds = ensemble_members([*trials, again], "seeds", selected, "max")
    assert [(t.point, t.seed) for t in seeds[0]] == [("lr=1", 0), ("lr=1", 1)] and seeds[0][1] is again
    assert [(t.point, t.seed) for t in seeds[1]] == [("lr=2", 0), ("lr=2", 1)]
    assert ensemble_members([*trials, again], "seeds", selected, "min")[0][1] is not again
    assert [len(m) for m in ensemble_members(trials, "configurations", selected, "max").values()] == [4, 4]


def test_the_ledger_counts_an_ensemble_as_one_more_attempt_but_never_in_its_own_runs_verdict(tmp_path):
    """Recorded under its run's id marked as the ensemble's: a later run counts both attempts, and the run itself,
    scored again after --resume, counts neither (its verdict is made again, and its ensemble on top of it)."""
    from mlflow.tracking import MlflowClient

    from experiments.results.trials_ledger import Attempt, LedgerKey, LedgerRun, TrialsLedger, ensemble_attempt_id

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    trials, ensemble = _run(0.001)
    single = build_verdict(trials, "max", periods_per_year=8760)
    key = LedgerKey("digest", (("2024-01-01", "2024-03-01"),))
    run_id = "3f9c2a7be1d04c56a8e7f0b1c2d3e4f5"  # an MLflow run id: 32 hex digits, as its ensemble's id begins
    run = LedgerRun(TrialsLedger(MlflowClient(uri), uri), "exp", run_id, "me", "abc", False)
    stamp = "20261205T120000Z"  # both recorded in the same second, as on a quick machine
    run.ledger.record(key, Attempt("exp", run_id, "me", "abc", False, ["default"], single.returns, stamp=stamp))
    run.ledger.record(key, Attempt("exp", ensemble_attempt_id(run_id), "me", "abc", False, ["ensemble over seeds"],
                                   build_verdict(ensemble, "max", 8760, seeds_spanned=2).returns, stamp=stamp))
    later = TrialsLedger(MlflowClient(uri), uri)
    assert (later.prior(key).attempts, later.prior(key).configurations) == (2, 2)
    assert later.prior(key, run_id).attempts == 0
    assert later.prior(key, run_id[:-1]).attempts == 2  # another run whose id is a prefix is not this one
