"""The portfolio scorer: the agent and every baseline through one ledger, the hindsight row shown and never judged."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from envs.portfolio.backtest import baseline_view, evaluate_policy
from envs.portfolio.baselines import BASELINES, HINDSIGHT, cross_sectional_momentum, momentum_lookback
from envs.portfolio.env import PortfolioEnv
from envs.portfolio.olps import library_available

pytestmark = pytest.mark.skipif(library_available() is not None, reason=str(library_available()))


def closes_table(tmp_path: Path, n_assets: int = 8, n_days: int = 700, seed: int = 0) -> str:
    """Daily closes of assets with different drifts (asset i drifts up by i bps a day), as a close-only table."""
    rng = np.random.default_rng(seed)
    returns = rng.normal(0.0, 0.02, (n_days, n_assets)) + np.arange(n_assets) * 1e-4
    closes = 50.0 * np.exp(np.cumsum(returns, axis=0))
    frame = pd.DataFrame(closes, columns=[f"A{i}:close" for i in range(n_assets)])
    frame.insert(0, "date", pd.date_range("2015-01-01", periods=n_days).strftime("%Y-%m-%d"))
    path = tmp_path / "universe.csv"
    frame.to_csv(path, index=False)
    return str(path)


CONFIG = {"timeframe": "1d", "window": 5, "decision_interval": 1, "fee_bps": 10.0, "slippage_bps": 0.0,
          "split_fractions": [0.6, 0.2, 0.2]}


def uniform_scores(obs: np.ndarray) -> np.ndarray:
    return np.zeros((len(obs), obs.shape[1] + 1))


def test_the_report_scores_every_baseline_and_shows_the_best_asset_only_as_a_marked_row(tmp_path: Path) -> None:
    report = evaluate_policy(uniform_scores, {**CONFIG, "table_path": closes_table(tmp_path)})
    names = ["agent", *(baseline.name for baseline in BASELINES)]
    assert list(report.table.index) == [*names, HINDSIGHT]
    assert list(report.returns.columns) == names  # the verdict judges these, not the hindsight row
    assert any(HINDSIGHT in note and "hindsight" in note for note in report.notes)
    table = report.table
    assert table.loc["flat", "final_equity"] == 1.0 and table.loc["flat", "turnover"] == 0.0
    others = table.drop(index=HINDSIGHT)["final_equity"].drop("flat")
    assert table.loc[HINDSIGHT, "final_equity"] >= others.max() - 1e-12
    # A uniform-score agent holds cash and every asset at 1/(N+1): UCRP's assets with cash beside them.
    assert table.loc["agent", "cash_weight"] == pytest.approx(1 / 9)
    assert table.loc["ucrp", "cash_weight"] == 0.0 and table.loc["ucrp", "trades"] > 100
    assert table.loc["ubah", "trades"] == 1.0
    assert 360 < report.periods_per_year < 370  # every calendar day has a bar: 24/7


def test_momentum_holds_the_top_quarter_by_its_trailing_30_day_return(tmp_path: Path) -> None:
    env = PortfolioEnv({**CONFIG, "table_path": closes_table(tmp_path), "split": "test", "episode_length": None})
    view = baseline_view(env)
    lo, hi = env.market.bounds["test"]
    targets = cross_sectional_momentum(view, lo, hi)
    lookback = momentum_lookback(view.timestamps)
    assert lookback == 30
    row = lo + 7
    trailing = view.closes[row] / view.closes[row - lookback]
    held = np.flatnonzero(targets[row - lo, 1:] > 0)
    assert sorted(held) == sorted(np.argsort(-trailing)[:2])  # ceil(8 / 4) = 2, equal weights
    assert np.allclose(targets[row - lo, 1:][held], 0.5)


def test_a_fixed_weight_rule_pays_the_same_exact_costs_whoever_gives_it(tmp_path: Path) -> None:
    """The agent that gives UCRP's weights (no cash) is UCRP to the last digit: one ledger for all."""
    def ucrp_scores(obs: np.ndarray) -> np.ndarray:
        scores = np.zeros((len(obs), obs.shape[1] + 1))
        scores[:, 0] = -1.0  # kappa 50 below: e^-50 of the weight on cash
        return scores

    report = evaluate_policy(ucrp_scores, {**CONFIG, "table_path": closes_table(tmp_path), "kappa": 50.0})
    agent, ucrp = report.table.loc["agent"], report.table.loc["ucrp"]
    assert agent["final_equity"] == pytest.approx(ucrp["final_equity"], rel=1e-9)
    assert agent["fees_paid"] == pytest.approx(ucrp["fees_paid"], rel=1e-6)


def test_a_files_fixed_weights_are_a_judged_baseline_through_the_same_ledger(tmp_path: Path) -> None:
    """fixed_weights of 1/N and no cash is UCRP to the last digit; other weights are their own judged column."""
    table = closes_table(tmp_path)
    equal = {f"A{i}": 1 / 8 for i in range(8)}
    report = evaluate_policy(uniform_scores, {**CONFIG, "table_path": table, "fixed_weights": equal})
    assert "fixed_weights" in report.returns.columns
    assert report.table.loc["fixed_weights", "final_equity"] == report.table.loc["ucrp", "final_equity"]
    tilted = evaluate_policy(uniform_scores, {**CONFIG, "table_path": table,
                                              "fixed_weights": {"cash": 0.5, "A7": 0.3, "A0": 0.2}})
    row = tilted.table.loc["fixed_weights"]
    assert row["cash_weight"] == 0.5 and row["final_equity"] != report.table.loc["ucrp", "final_equity"]


@pytest.mark.parametrize("weights, message", [
    ({"cash": 0.5, "A1": 0.6}, "sum to 1.1"),
    ({"cash": float("nan"), "A1": 1.0}, "NaN"),
    ({"cash": 1.2, "A1": -0.2}, "negative weight -0.2 under long_only"),
    ({"cash": 0.5, "DOGE": 0.5}, "DOGE is not in the universe"),
])
def test_fixed_weights_that_cannot_be_held_are_refused_in_one_line(tmp_path: Path, weights, message) -> None:
    from envs.errors import InputError

    with pytest.raises(InputError) as caught:
        PortfolioEnv({**CONFIG, "table_path": closes_table(tmp_path), "fixed_weights": weights})
    assert "environment.env_config.fixed_weights" in str(caught.value) and message in str(caught.value)
    assert "\n" not in str(caught.value)
