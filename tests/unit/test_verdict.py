"""The verdict's statistics against hand computation, and its judgement on made-up trials."""
from __future__ import annotations

import dataclasses
import math
from itertools import pairwise

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from envs.report import EvaluationReport
from experiments.results.verdict import (
    ScoredTrial,
    _pbo,
    build_verdict,
    family_threshold,
    per_period_sharpe,
    select_configurations,
)

EULER = 0.5772156649015329


def hand_dsr(returns: np.ndarray, n_trials: int, sharpe_variance: float, raw_kurtosis: bool = True) -> float:
    """Bailey & Lopez de Prado (2014), written out: PSR at the deflated benchmark SR0.

    SR0 = sqrt(V) * ((1 - g) * z(1 - 1/N) + g * z(1 - 1/(N e))); PSR = Phi((SR - SR0) sqrt(T - 1) /
    sqrt(1 - skew SR + (kurt - 1) / 4 SR^2)) with the raw (not excess) kurtosis."""
    t = len(returns)
    sr = returns.mean() / returns.std()
    skew = stats.skew(returns, bias=False)
    kurtosis = stats.kurtosis(returns, bias=False) + (3.0 if raw_kurtosis else 0.0)  # scipy's is excess
    sr0 = 0.0 if n_trials == 1 else math.sqrt(sharpe_variance) * (
        (1 - EULER) * stats.norm.ppf(1 - 1 / n_trials) + EULER * stats.norm.ppf(1 - 1 / (n_trials * math.e)))
    z = (sr - sr0) * math.sqrt(t - 1) / math.sqrt(1 - skew * sr + (kurtosis - 1) / 4 * sr ** 2)
    return float(stats.norm.cdf(z))


def report(returns: dict[str, np.ndarray], start: str) -> EvaluationReport:
    """A trading-like report: per-bar log returns and the matching table rows."""
    index = pd.date_range(start, periods=len(next(iter(returns.values()))), freq="h", tz="UTC")
    frame = pd.DataFrame(returns, index=index)
    table = pd.DataFrame({name: {"total_return": float(np.expm1(r.sum())), "sharpe": per_period_sharpe(r) * 93.6,
                                 "trades": 10.0, "sortino": 0.0, "max_drawdown": 0.0, "fees_paid": 0.0, "turnover": 0.0}
                          for name, r in returns.items()}).T
    return EvaluationReport("made up", table, {}, np.exp(frame.cumsum()), "equity", returns=frame)


def test_deflated_sharpe_matches_the_formula():
    from purgedcv import deflated_sharpe_ratio_full

    rng = np.random.default_rng(3)
    returns = rng.standard_t(5, 500) * 0.01 + 0.002  # fat tails: the kurtosis convention matters
    for n_trials, variance in ((1, 0.0), (10, 0.002), (100, 0.01)):
        ours = deflated_sharpe_ratio_full(returns, n_trials=n_trials, var_sharpe=variance).dsr
        assert ours == pytest.approx(hand_dsr(returns, n_trials, variance), abs=1e-12)
        # Excess kurtosis in the formula would give another answer: the check can tell the conventions apart.
        assert abs(ours - hand_dsr(returns, n_trials, variance, raw_kurtosis=False)) > 1e-6


def test_pbo_on_hand_cases():
    """Two configurations, two blocks. A is better in both blocks: the in-sample winner always stays on
    top (PBO 0). A wins block 1 and B wins block 2: the winner always loses out of sample (PBO 1)."""
    a = np.r_[np.full(10, 0.02), np.full(10, 0.01)] + np.tile([0.001, -0.001], 10)
    b = a - 0.005
    assert _pbo(pd.DataFrame({"a": a, "b": b})).pbo == 0.0
    swapped = np.r_[b[:10], a[10:] + 0.02]
    assert _pbo(pd.DataFrame({"a": a, "b": swapped})).pbo == 1.0
    assert _pbo(pd.DataFrame({"a": a})) is None  # one trial: nothing to overfit


def test_selection_uses_the_mean_validation_score_over_seeds():
    r = report({"agent": np.zeros(5), "flat": np.zeros(5)}, "2024-01-01")
    trials = [ScoredTrial(0, 0, "lr=1", 10.0, r), ScoredTrial(0, 1, "lr=1", -8.0, r),
              ScoredTrial(0, 0, "lr=2", 2.0, r), ScoredTrial(0, 1, "lr=2", 3.0, r)]
    assert select_configurations(trials, "max") == {0: "lr=2"}  # 2.5 beats 1.0 despite the single 10
    assert select_configurations(trials, "min") == {0: "lr=1"}


def _trials(agent_drift: float, folds: int = 4, seeds: int = 2, bars: int = 400, seed: int = 0):
    rng = np.random.default_rng(seed)
    trials = []
    for fold in range(folds):
        start = pd.Timestamp("2024-01-01") + pd.Timedelta(hours=bars * fold)
        market = rng.normal(0.0, 0.01, bars)
        for s in range(seeds):
            agent = rng.normal(agent_drift, 0.005, bars)
            trials.append(ScoredTrial(fold, s, "default", float(agent.sum()),
                                      report({"agent": agent, "buy_and_hold": market, "flat": np.zeros(bars)},
                                             str(start))))
    return trials


def test_a_real_edge_is_supported_and_noise_is_not():
    strong = build_verdict(_trials(0.002), "max", periods_per_year=8760)
    assert all(edge.supported for edge in strong.edges)
    assert strong.lines()[0].startswith("edge over buy_and_hold: supported (DSR 1.00")
    noise = build_verdict(_trials(-0.0002, seed=1), "max", periods_per_year=8760)
    assert not any(edge.supported for edge in noise.edges)
    assert noise.returns.shape == (1600, 2)  # 4 folds x 400 bars on one axis, 2 seeds as trial columns
    assert noise.pbo is not None and 0.0 <= noise.pbo.pbo <= 1.0


def test_one_split_or_one_seed_is_labelled():
    verdict = build_verdict(_trials(0.002, folds=1, seeds=1), "max", periods_per_year=8760)
    assert verdict.caveats == ["one split", "one seed"]
    assert all(": not supported: one split, one seed (DSR" in line for line in verdict.lines())
    assert "not enough for a verdict" in verdict.scope()


def test_an_agent_that_never_trades_has_no_evidence_against_flat():
    trials = _trials(0.0)
    for trial in trials:
        trial.report.returns["agent"] = 0.0
    verdict = build_verdict(trials, "max", periods_per_year=8760)
    flat = next(edge for edge in verdict.edges if edge.baseline == "flat")
    assert math.isnan(flat.dsr) and not flat.supported
    assert flat.left_out == ("seed 0: its excess returns never vary", "seed 1: its excess returns never vary")


def test_a_seed_left_out_of_the_dsr_is_named_in_the_verdict_line():
    """The verdict dropped a seed whose DSR could not be computed without saying so."""
    trials = _trials(0.0)
    for trial in trials:
        if trial.seed == 1:
            trial.report.returns["agent"] = 0.0
    verdict = build_verdict(trials, "max", periods_per_year=8760)
    line = next(line for line in verdict.lines() if line.startswith("edge over flat"))
    assert line.endswith("; DSR without seed 1: its excess returns never vary)")
    assert math.isfinite(next(edge for edge in verdict.edges if edge.baseline == "flat").dsr)  # seed 0's
    buy_and_hold = next(line for line in verdict.lines() if line.startswith("edge over buy_and_hold"))
    assert "DSR without" not in buy_and_hold


def test_many_verdicts_at_once_need_a_stricter_dsr():
    """Twenty coins judged at 0.95 each would show one lucky "edge" on average: Bonferroni's 1 - 0.05/n."""
    assert family_threshold(1) == 0.95 and family_threshold(20) == pytest.approx(0.9975)
    trials = _trials(0.0003, seed=1)  # a modest edge: DSR about 0.97 against both baselines
    alone = build_verdict(trials, "max", periods_per_year=8760)
    among_twenty = build_verdict(trials, "max", periods_per_year=8760, threshold=family_threshold(20))
    assert all(0.95 <= edge.dsr < 0.9975 for edge in alone.edges)
    assert all(edge.supported for edge in alone.edges)
    assert not any(edge.supported for edge in among_twenty.edges)
    assert "DSR threshold 0.9975" in among_twenty.scope()


def test_a_seed_whose_moments_break_the_normal_approximation_makes_no_claim():
    """PSR's denominator 1 - skew*SR + (kurtosis-1)/4*SR^2 uses bias-corrected moments, which can break
    Pearson's bound and make it negative, e.g. for returns that take two values. purgedcv then raises;
    that seed gives no evidence instead of crashing the run."""
    from purgedcv import deflated_sharpe_ratio_full

    two_valued = np.full(400, 0.0047)
    two_valued[:101] = 0.0147
    with pytest.raises(ValueError, match="denominator"):
        deflated_sharpe_ratio_full(two_valued, n_trials=2, var_sharpe=0.0)
    trials = _trials(0.0, folds=1, seeds=1)
    trials[0].report.returns["agent"] = two_valued
    flat = next(edge for edge in build_verdict(trials, "max", periods_per_year=8760).edges
                if edge.baseline == "flat")
    assert math.isnan(flat.dsr) and not flat.supported


def test_the_printed_verdict_keeps_its_caveats_and_bracketed_choices():
    """Rich reads '[one seed: ...]' and '[64, 64]' as markup and would silently drop them."""
    from rich.console import Console

    from experiments.results.printing import print_verdict

    trials = [dataclasses.replace(t, point="fcnet_hiddens=[64, 64]") for t in _trials(0.002, folds=2, seeds=1)]
    console = Console(record=True, width=200)
    print_verdict(console, build_verdict(trials, "max", periods_per_year=8760), "made up")
    text = console.export_text()
    assert "[one seed: not enough for a verdict]:" in text
    assert "chosen on validation: fcnet_hiddens=[64, 64]" in text


def test_expected_max_is_purgedcv_s_for_whole_trials_and_grows_smoothly_between():
    from purgedcv import deflated_sharpe_ratio_full

    from experiments.results.verdict import expected_max_z

    rng = np.random.default_rng(0)
    returns = rng.normal(0.001, 0.01, 300)
    for n in (1, 2, 7, 40):
        assert expected_max_z(n) == pytest.approx(
            deflated_sharpe_ratio_full(returns, n_trials=n, var_sharpe=1.0).expected_max_z, abs=1e-12)
    values = [expected_max_z(n) for n in np.linspace(1.0, 5.0, 41)]
    assert values[0] == 0.0 and all(b >= a for a, b in pairwise(values))


def test_participation_ratio_counts_independent_series_and_absorbs_copies():
    from experiments.results.verdict import distinct_columns, participation_ratio

    rng = np.random.default_rng(1)
    independent = pd.DataFrame(rng.normal(size=(5000, 4)), columns=list("abcd"))
    assert participation_ratio(independent) == pytest.approx(4.0, rel=0.01)
    copies = pd.concat([independent, independent.add_prefix("again ")], axis=1)
    assert distinct_columns(copies).shape[1] == 4 and participation_ratio(copies) == pytest.approx(4.0, rel=0.01)
    r = 0.8
    mixed = r * independent["a"] + math.sqrt(1 - r * r) * independent["b"]
    correlated = pd.DataFrame({"x": independent["a"], "y": mixed})
    assert participation_ratio(correlated) == pytest.approx(2 / (1 + r * r), rel=0.02)
    assert participation_ratio(independent[["a"]]) == 1.0


def test_the_verdict_gives_the_runs_table_words_to_filter_by():
    """The parent run's tags: supported | not_supported per baseline, matching the verdict lines, and the ledger's
    key and attempt when the run has a ledger."""
    strong, noise = (build_verdict(_trials(drift, seed=seed), "max", periods_per_year=8760)
                     for drift, seed in ((0.002, 0), (-0.0002, 1)))
    assert strong.tags() == {"verdict.buy_and_hold": "supported", "verdict.flat": "supported"}
    assert set(noise.tags().values()) == {"not_supported"}
    noise.ledger_key, noise.attempt = "96da259eead97675", 3
    assert noise.tags()["ledger.key"] == "96da259eead97675" and noise.tags()["ledger.attempt"] == "3"


@pytest.mark.parametrize("folds, seeds, missing, caveat", [
    (4, 1, "", "one seed"),
    (1, 2, "", "one split"),
    (4, 2, "fold 3 seed 1 missing", "fold 3 seed 1 missing"),
])
def test_a_verdict_with_a_caveat_supports_nothing(folds, seeds, missing, caveat):
    """A one-seed smoke verdict once said "not enough for a verdict" and flagged edges as supported (DSR 0.98), and a
    supported verdict makes the first champion. Evidence that would pass (DSR 1.00, every fold won) with any caveat:
    not supported, on the line, the tag and the metric."""
    trials = _trials(0.002, folds=folds, seeds=seeds, bars=30)  # short: CSCV's PBO takes fewer splits
    verdict = (build_verdict(trials, "max", periods_per_year=8760, missing=missing) if missing
               else build_verdict(trials, "max", periods_per_year=8760))
    assert verdict.caveats[-1] == caveat
    assert all(edge.dsr >= 0.95 and edge.wins == edge.folds for edge in verdict.edges)  # the evidence alone would pass
    assert not any(edge.supported for edge in verdict.edges)
    for line, edge in zip(verdict.lines(), verdict.edges, strict=True):
        assert line.startswith(f"edge over {edge.baseline}: not supported: {', '.join(verdict.caveats)} (DSR "
                               f"{edge.dsr:.2f}")
    assert set(verdict.tags().values()) == {"not_supported"}
    metrics = verdict.metrics()
    assert all(metrics[f"verdict/supported/{edge.baseline}"] == 0.0 for edge in verdict.edges)
    # the same evidence without a caveat is supported: test_the_verdict_gives_the_runs_table_words_to_filter_by
