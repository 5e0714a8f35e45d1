"""Out-of-sample backtest of a greedy policy against buy-and-hold, flat and an SMA crossover.

The agent walks the held-out split inside `SpotTradingEnv`, so it is scored by exactly
the code that rewarded it in training; its policy gives discrete actions (an index of the
env's position set) or continuous ones (a target exposure, `envs.trading.positions`). The baselines are target-position
series decided from closes up to bar t and filled by the same ledger at bar t+1's open with the same costs.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pandas as pd

from envs.baselines import Baseline, baseline_table
from envs.report import EvaluationReport, Policy
from envs.trading.env import SpotTradingEnv
from envs.trading.ledger import Ledger, simulate_positions
from envs.trading.positions import policy_action

SMA_FAST, SMA_SLOW = 24, 96


def performance(equity: np.ndarray, periods_per_year: float) -> dict[str, float]:
    """Return, annualized Sharpe/Sortino (of per-bar log returns, zero risk-free rate) and drawdown."""
    log_returns = np.diff(np.log(equity))
    mean = log_returns.mean() if len(log_returns) else 0.0
    std = log_returns.std(ddof=1) if len(log_returns) > 1 else 0.0
    downside = np.sqrt(np.mean(np.minimum(log_returns, 0.0) ** 2)) if len(log_returns) else 0.0
    scale = np.sqrt(periods_per_year)
    return {
        "total_return": float(equity[-1] / equity[0] - 1.0),
        "sharpe": float(mean / std * scale) if std > 0 else 0.0,
        "sortino": float(mean / downside * scale) if downside > 0 else 0.0,
        "max_drawdown": float(np.max(1.0 - equity / np.maximum.accumulate(equity))),
    }


def sma_crossover_targets(closes: np.ndarray) -> np.ndarray:
    """Long while SMA(24) of closes is above SMA(96), else flat; causal (closes up to t)."""
    series = pd.Series(closes)
    fast = series.rolling(SMA_FAST, min_periods=1).mean()
    slow = series.rolling(SMA_SLOW, min_periods=1).mean()
    return (fast > slow).to_numpy(dtype=np.float64)


# The family's baselines (envs.baselines' contract): closes, first row, end row -> the target position in force after
# each close of rows lo..hi-1, decided from closes up to that row (the SMAs see the bars before `lo` too: history,
# not test data). The same ledger fills them at the next open with the same costs as the agent.
TargetRule = Callable[[np.ndarray, int, int], np.ndarray]
BASELINES: tuple[Baseline[TargetRule], ...] = baseline_table(
    Baseline("buy_and_hold", lambda closes, lo, hi: np.ones(hi - lo), "the market itself: the one to beat"),
    Baseline("flat", lambda closes, lo, hi: np.zeros(hi - lo), "no position: an agent that never trades ties it"),
    Baseline(f"sma_{SMA_FAST}_{SMA_SLOW}", lambda closes, lo, hi: sma_crossover_targets(closes[:hi])[lo:hi],
             "the simple trend rule practitioners start from"),
)


def baseline_targets(closes: np.ndarray, lo: int, hi: int) -> dict[str, np.ndarray]:
    """Every baseline's target positions on rows lo..hi-1, by name, in report order."""
    return {baseline.name: baseline.decide(closes, lo, hi) for baseline in BASELINES}


def strategy_row(equity: np.ndarray, targets: np.ndarray, ledger: Ledger, periods_per_year: float) -> dict[str, float]:
    """A strategy's row of a report's table: performance, trades, fees, turnover, exposure held and asked."""
    return {**performance(equity, periods_per_year), "trades": float(ledger.trades),
            "fees_paid": float(ledger.fees_paid),
            # Traded notional in units of the starting equity; the mean absolute exposure held at each close after
            # the first (drift and min_trade included), and the mean target asked for those bars.
            "turnover": float(ledger.traded_notional), "exposure": ledger.exposure_held / max(len(equity) - 1, 1),
            "target_exposure": float(np.mean(np.abs(targets[:-1]))),
            "final_equity": float(equity[-1])}


def agent_targets(policy: Policy, env: SpotTradingEnv) -> np.ndarray:
    """Walk the env's split with the greedy policy: the target position in force after each close of the
    split (decided at that close, or held since the last decision when decision_interval > 1); a continuous
    target is the clipped exposure asked for, which the replay leaves untraded within min_trade of the held one
    as the env does. With min_hold the target is the action the env applied (`info["applied_action"]`: the held
    one while it is younger than min_hold), so the replay trades what the env traded. A margin call ends the walk:
    the account is flat from there on."""
    obs, info = env.reset(seed=0)
    lo, hi = env.market.bounds[env.cfg.split]
    targets = np.zeros(hi - lo)
    row, ended = info["row"], False
    while not ended:
        action = policy_action(policy(obs[None, :]), env.continuous)
        obs, _, terminated, truncated, info = env.step(action)
        ended = terminated or truncated
        targets[row - lo:info["row"] - lo] = env.target_of(info.get("applied_action", action))
        row = info["row"]
    targets[row - lo:] = info["position"]
    return targets


def evaluate_policy(policy: Policy, env_config: dict[str, Any]) -> EvaluationReport:
    """Score `policy` on the split named in env_config (default: test) next to the baselines."""
    config = {**env_config, "episode_length": None, "split": "test"}
    env = SpotTradingEnv(config)
    market = env.market
    lo, hi = market.bounds[env.cfg.split]
    # Like the env walk: decisions at closes lo .. hi-2, fills at opens lo+1 .. hi-1.
    opens, closes = market.opens[lo:hi], market.closes[lo:hi]
    ppy = market.bars_per_year  # the data's calendar (24/7: 365 days of bars; weekdays: its bars a year)

    strategies = {"agent": agent_targets(policy, env), **baseline_targets(market.closes, lo, hi)}
    # One ledger for all: the agent's equity is replayed from its positions, which gives the same
    # numbers as the env walk (a test pins it) and an equity mark at every bar, also between decisions.
    # The env's min_trade leaves the baselines as they are: their changes are whole positions.
    table, curves = {}, {}
    for name, targets in strategies.items():
        equity, ledger = simulate_positions(targets, opens, closes, env.fee_rate, env.slippage_rate,
                                            env.cfg.maintenance_margin, env.cfg.min_trade)
        table[name] = strategy_row(equity, targets, ledger, ppy)
        curves[name] = equity
    frame = pd.DataFrame.from_dict(table, orient="index")
    index = pd.DatetimeIndex(market.timestamps[lo:hi], name="timestamp")
    start, end = index[0], index[-1]
    agent = table["agent"]
    metrics = {f"eval/{k}": v for k, v in agent.items()}
    metrics["eval/buy_and_hold_sharpe"] = table["buy_and_hold"]["sharpe"]
    metrics["eval/excess_return_vs_buy_and_hold"] = agent["total_return"] - table["buy_and_hold"]["total_return"]
    synthetic = market.synthetic
    protocol = env.cfg.split_protocol()
    fold = f", fold {market.fold.index} of 0..{protocol.num_folds - 1}" if protocol.num_folds > 1 else ""
    notes = ([f"SYNTHETIC market: {env.cfg.symbol} bars generated by the {env.cfg.synthetic_model} model "
              f"(seed {env.cfg.synthetic_seed}), not real prices; the dates are fictional"] if synthetic else [])
    equity_curves = pd.DataFrame(curves, index=index)
    stamps = market.timestamps
    windows = tuple((f"{stamps[start]}", f"{stamps[stop - 1]}") for start, stop in market.test_windows)
    return EvaluationReport(
        title=(f"{'SYNTHETIC ' if synthetic else ''}{market.symbol} {market.timeframe} {env.cfg.split} period "
               f"{start:%Y-%m-%d} .. {end:%Y-%m-%d}{fold} "
               f"({hi - lo} bars, fee {env.cfg.fee_bps:g} bps, slippage {env.cfg.slippage_bps:g} bps)"),
        notes=notes,
        table=frame,
        agent_metrics=metrics,
        series=equity_curves,
        series_label="equity (start = 1.0)",
        returns=np.log(equity_curves).diff().iloc[1:],
        periods_per_year=ppy,
        data_digest=market.data_digest,
        windows=windows,
        file_digest=market.file_digest,
        data_label=f"{'SYNTHETIC ' if synthetic else ''}{market.symbol} {market.timeframe}",
    )
