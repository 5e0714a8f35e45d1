"""Out-of-sample scoring of a greedy allocation policy against the portfolio baselines.

The agent walks the held-out part inside `PortfolioEnv`, so it is scored by the code that rewarded it; its target
weights at each decision are then replayed with every baseline's through one ledger (`replay_weights`), which marks
equity at every close: same fills, same exact costs, the same ruin rule (a ruined book is liquidated and holds 1e-4
of cash: its curve is flat from there, and the report says where). The best single asset in hindsight is shown in
the table, marked, and never becomes a verdict line (its column is not in the report's returns).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from envs.portfolio.baselines import BASELINES, FIXED, HINDSIGHT, BaselineView, fixed_weights
from envs.portfolio.book import PortfolioBook, replay_weights
from envs.portfolio.env import PortfolioEnv
from envs.report import EvaluationReport, Policy
from envs.trading.backtest import performance


def agent_targets(policy: Policy, env: PortfolioEnv) -> np.ndarray:
    """Walk the env's part with the greedy policy: the target weights decided at each decision row, NaN between."""
    obs, info = env.reset(seed=0)
    lo, hi = env.market.bounds[env.cfg.split]
    targets = np.full((hi - lo, env.n_assets + 1), np.nan)
    ended = False
    while not ended:
        row = info["row"]
        scores = np.asarray(policy(obs[None]), dtype=np.float64)[0]
        obs, _, terminated, truncated, info = env.step(scores)
        targets[row - lo] = info["weights"]
        ended = terminated or truncated
    return targets


def baseline_view(env: PortfolioEnv) -> BaselineView:
    market = env.market
    return BaselineView(closes=market.universe.closes, tradable=market.tradable, listed=market.universe.listed,
                        timestamps=market.timestamps, train=market.fold.train,
                        decision_interval=env.cfg.decision_interval)


def ruin_note(name: str, equity: np.ndarray, book: PortfolioBook, index: pd.DatetimeIndex) -> list[str]:
    """One line for a strategy whose book was ruined: the bar, which is where its curve turns flat at the floor."""
    if not book.ruined:
        return []
    bar = int(np.flatnonzero(equity != equity[-1])[-1]) + 1
    return [f"{name}'s book was ruined at {index[bar]}: what selling everything would have left after its cost "
            f"reached 0, so it was liquidated there and held {equity[-1]:g} of cash from then on (docs/portfolio.md, "
            "\"Ruin\")"]


def strategy_row(equity: np.ndarray, targets: np.ndarray, book: PortfolioBook,
                 periods_per_year: float) -> dict[str, float]:
    """A strategy's row, in the trading family's columns where they mean the same: trades (rebalances that traded),
    fees_paid (the rebalance costs), turnover (traded notional in starting equities), exposure (the mean weight
    asked outside cash) and the mean cash weight asked."""
    decided = targets[~np.isnan(targets[:, 0])]
    cash = float(decided[:, 0].mean()) if len(decided) else 1.0
    return {**performance(equity, periods_per_year), "trades": float(book.rebalances),
            "fees_paid": float(book.costs_paid), "turnover": float(book.traded_notional), "exposure": 1.0 - cash,
            "cash_weight": cash, "final_equity": float(equity[-1])}


def hindsight_row(env: PortfolioEnv, lo: int, hi: int, ppy: float) -> tuple[str, dict[str, float]]:
    """The single asset that did best over the part, bought at its first fill and held (costs paid). Among assets
    listed over the whole part, that is the largest close at the end over the open of the first fill (the purchase
    costs every one the same factor), so only the chosen one is replayed: at 500 assets, replaying each is slow."""
    universe = env.market.universe
    candidates = np.flatnonzero(env.market.tradable[lo] & universe.listed[hi - 1])
    if not len(candidates):
        return "", {}
    growth = universe.closes[hi - 1, candidates] / universe.opens[lo + 1, candidates]
    best = int(candidates[int(np.argmax(growth))])
    targets = np.full((hi - lo, env.n_assets + 1), np.nan)
    targets[0] = np.eye(env.n_assets + 1)[best + 1]
    equity, book = replay_weights(targets, lo, universe.opens, universe.closes, universe.last_rows, env.cfg.cost_rate)
    return universe.symbols[best], strategy_row(equity, targets, book, ppy)


def evaluate_policy(policy: Policy, env_config: dict[str, Any]) -> EvaluationReport:
    """Score `policy` on the test part of env_config's fold next to the baselines."""
    env = PortfolioEnv({**env_config, "episode_length": None, "split": "test"})
    market, universe = env.market, env.market.universe
    lo, hi = market.bounds["test"]
    ppy = market.bars_per_year
    view = baseline_view(env)
    strategies = {"agent": agent_targets(policy, env),
                  **{baseline.name: baseline.decide(view, lo, hi) for baseline in BASELINES}}
    if env.fixed_weights is not None:
        strategies[FIXED] = fixed_weights(view, lo, hi, env.fixed_weights)
    index = pd.DatetimeIndex(market.timestamps[lo:hi], name="timestamp")
    table, curves, ruins = {}, {}, []
    for name, targets in strategies.items():
        equity, book = replay_weights(targets, lo, universe.opens, universe.closes, universe.last_rows,
                                      env.cfg.cost_rate)
        table[name] = strategy_row(equity, targets, book, ppy)
        curves[name] = equity
        ruins += ruin_note(name, equity, book, index)
    symbol, best = hindsight_row(env, lo, hi, ppy)
    frame = pd.DataFrame.from_dict({**table, HINDSIGHT: best}, orient="index")
    agent = table["agent"]
    metrics = {f"eval/{key}": value for key, value in agent.items()}
    metrics["eval/excess_return_vs_ucrp"] = agent["total_return"] - table["ucrp"]["total_return"]
    equity_curves = pd.DataFrame(curves, index=index)
    stamps = market.timestamps
    synthetic = universe.source.startswith("SYNTHETIC")
    protocol = env.cfg.split_protocol()
    fold = f", fold {market.fold.index} of 0..{protocol.num_folds - 1}" if protocol.num_folds > 1 else ""
    label = (f"{universe.n_assets}-asset universe "
             f"({', '.join(universe.symbols[:5])}{', ...' if universe.n_assets > 5 else ''})")
    return EvaluationReport(
        title=(f"{'SYNTHETIC ' if synthetic else ''}{label} {universe.timeframe} test period {index[0]:%Y-%m-%d} .. "
               f"{index[-1]:%Y-%m-%d}{fold} ({hi - lo} bars, decisions every {env.cfg.decision_interval}, fee "
               f"{env.cfg.fee_bps:g} bps, slippage {env.cfg.slippage_bps:g} bps, {ppy:.1f} bars a year)"),
        notes=[f"{HINDSIGHT} is {symbol} held from the first fill: chosen in hindsight, never a verdict line",
               *([f"{universe.source}: generated, not real prices; the dates are fictional"] if synthetic else []),
               *ruins],
        table=frame, agent_metrics=metrics, series=equity_curves, series_label="equity (start = 1.0)",
        returns=np.log(equity_curves).diff().iloc[1:], periods_per_year=ppy,
        data_digest=universe.window_digest(market.test_windows),
        windows=tuple((f"{stamps[start]}", f"{stamps[stop - 1]}") for start, stop in market.test_windows),
        data_label=f"{'SYNTHETIC ' if synthetic else ''}{label} {universe.timeframe}")
