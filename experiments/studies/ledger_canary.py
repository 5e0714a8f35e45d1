"""The trials ledger's canary: noise hypotheses on a random walk, judged one by one and through the ledger.

A hypothesis here is what one sweep would hand the verdict: two configurations x two seeds x four folds of
out-of-sample returns, simulated as persistent random long/flat positions on a seeded random walk, with fees
(nothing can be predicted, so any "supported" verdict is luck), judged against the baselines of the trading family's
table (`envs.EnvFamily.baseline_table`) run on the same walk. `python -m experiments.studies.ledger_canary --users 60`
gives the rates over many simulated users who each try thirty hypotheses: how often at least one is supported
when each is judged alone, and when each is deflated by all tried before it (`tests/unit/test_trials_ledger_canary.py`
runs one user through a real MLflow ledger in CI).
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import pandas as pd

import envs
from envs.report import EvaluationReport
from experiments.results.verdict import (
    PriorTrials,
    ScoredTrial,
    Verdict,
    build_verdict,
    configuration_series,
    per_period_sharpe,
)
from experiments.shell import exit_code

FOLDS, BARS, HOURS_PER_YEAR = 4, 1500, 8760
FEE = 0.0012  # 10 bps fee + 2 bps slippage per change of position
HYPOTHESES, CONFIGURATIONS, SEEDS = 30, 2, 2
# The env family whose baselines judge the hypotheses: its table's strategies decide target positions from closes
# (closes, first row, end row -> positions), which a random walk of closes feeds.
ENV_ID = "trading/Spot-v0"


def random_walk_market(seed: int, env_id: str = ENV_ID) -> tuple[pd.DatetimeIndex, np.ndarray, dict[str, np.ndarray]]:
    """Hourly log returns of a driftless random walk, and the returns of each baseline of `env_id`'s family on it, in
    its table's order. The walk is a stretch of a longer market, so a baseline holds its first position from before
    the first bar (buy-and-hold is the market itself) and pays the fee on each later change."""
    rng = np.random.default_rng(seed)
    log_returns = rng.normal(0.0, 0.01, FOLDS * BARS)
    closes = 100.0 * np.exp(np.cumsum(log_returns))
    baselines = {}
    for baseline in envs.family(env_id).baseline_table():
        positions = np.asarray(baseline.decide(closes, 0, len(closes)), dtype=np.float64)
        baselines[baseline.name] = position_returns(positions, log_returns, start=positions[0])
    index = pd.date_range("2030-01-01", periods=FOLDS * BARS, freq="h", tz="UTC")
    return index, log_returns, baselines


def position_returns(positions: np.ndarray, log_returns: np.ndarray, start: float = 0.0) -> np.ndarray:
    """Decided at bar t-1, held through bar t (through the first bar: `start`, flat for an agent); a change of
    position pays the fee."""
    held = np.r_[start, positions[:-1]]
    return held * log_returns - FEE * np.abs(np.diff(np.r_[start, held]))


def _report(frame: pd.DataFrame) -> EvaluationReport:
    table = pd.DataFrame({name: {"total_return": float(np.expm1(frame[name].sum())),
                                 "sharpe": per_period_sharpe(frame[name].to_numpy()) * np.sqrt(HOURS_PER_YEAR),
                                 "trades": float(np.count_nonzero(frame[name].to_numpy() < -FEE / 2))}
                          for name in frame}).T
    return EvaluationReport("canary", table, {}, np.exp(frame.cumsum()), "equity", returns=frame,
                            periods_per_year=HOURS_PER_YEAR, data_digest="random-walk", data_label="RANDOM WALK")


def hypothesis(number: int, market: tuple) -> list[ScoredTrial]:
    """Two configurations x two seeds x four folds of persistent random positions (a switch every 48 bars on
    average), each with a random validation score: noise, whatever the hypothesis is called."""
    index, log_returns, baselines = market
    rng = np.random.default_rng(1000 + number)
    trials = []
    for configuration in range(CONFIGURATIONS):
        for seed in range(SEEDS):
            positions = np.cumsum(rng.random(len(log_returns)) < 1 / 48) % 2.0
            agent = position_returns(positions, log_returns)
            for fold in range(FOLDS):
                rows = slice(fold * BARS, (fold + 1) * BARS)
                frame = pd.DataFrame({"agent": agent[rows], **{k: v[rows] for k, v in baselines.items()}},
                                     index=index[rows])
                trials.append(ScoredTrial(fold, seed, f"hypothesis {number} config {configuration}",
                                          float(rng.normal()), _report(frame)))
    return trials


def supported(verdict: Verdict) -> list[str]:
    return [edge.baseline for edge in verdict.edges if edge.supported]


def one_user(market_seed: int, first_hypothesis: int = 0) -> tuple[list[list[str]], list[list[str]]]:
    """What thirty hypotheses get judged alone, and judged through an (in-memory) ledger in the order tried."""
    market = random_walk_market(market_seed)
    alone, through, columns, configurations = [], [], [], 0
    for number in range(first_hypothesis, first_hypothesis + HYPOTHESES):
        trials = hypothesis(number, market)
        alone.append(supported(build_verdict(trials, "max", HOURS_PER_YEAR)))
        prior = None
        if columns:
            earlier = pd.concat(columns, axis=1)
            prior = PriorTrials(earlier, configuration_series(earlier), configurations, len(columns))
        verdict = build_verdict(trials, "max", HOURS_PER_YEAR, prior=prior)
        through.append(supported(verdict))
        columns.append(verdict.returns.add_prefix(f"attempt {len(columns)}: "))
        configurations += CONFIGURATIONS
    return alone, through


def main(argv: list[str] | None = None) -> int:
    return exit_code(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.studies.ledger_canary", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=60, help="simulated users, 30 hypotheses each (default 60)")
    args = parser.parse_args(argv)
    started = time.time()
    results = [one_user(100 + user, 1000 * user) for user in range(args.users)]
    alone = [any(a) for a, _ in results]
    through = [any(t) for _, t in results]
    per_alone = np.mean([bool(x) for a, _ in results for x in a])
    per_through = np.mean([bool(x) for _, t in results for x in t])
    print(f"{args.users} simulated users x {HYPOTHESES} noise hypotheses ({time.time() - started:.0f} s):")
    print(f"  at least one supported verdict: judged alone {np.mean(alone):.1%}, "
          f"through the ledger {np.mean(through):.1%}")
    print(f"  supported per hypothesis: judged alone {per_alone:.2%}, through the ledger {per_through:.2%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
