"""A forward test: policies that read bars, replayed over bars none of them trained or was selected on, next to the
baselines, with the backtest's ledger and costs.

Each policy is replayed as paper trading replays it (`envs.trading.paper.replay`: decisions from the last bars
its reader needs, filled at the next open, a model's `min_hold` applied by the paper book), so the forward numbers
are what paper trading would have shown; the baselines are the backtest's (`envs.trading.backtest.baseline_targets`)
on the same rows.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from envs.retrain_data import ForwardReport
from envs.trading.backtest import baseline_targets, strategy_row
from envs.trading.bar_reader import BarReader
from envs.trading.ledger import simulate_positions
from envs.trading.paper import Decide, new_book, replay


def forward_test(policies: dict[str, tuple[BarReader, Decide]], bars: pd.DataFrame, rows: range) -> ForwardReport:
    """Replay every policy and score the baselines on `rows` of `bars`; the baselines trade at the costs of the
    first policy's env."""
    first = next(iter(policies.values()))[0]
    ppy = first.periods_per_year(bars)  # as its backtest annualized
    curves, table = {}, {}
    for name, (reader, decide) in policies.items():
        book, held = new_book(reader), []
        equity = replay(book, bars, rows, reader.bars_needed, decide,
                        lambda _stamp, _outcome, held=held, book=book: held.append(book.pending))
        curves[name], table[name] = equity, strategy_row(equity, np.asarray(held), book.ledger, ppy)
    lo, hi = rows.start, rows.stop
    opens, closes = bars["open"].to_numpy()[lo:hi], bars["close"].to_numpy()[lo:hi]
    for name, targets in baseline_targets(bars["close"].to_numpy(), lo, hi).items():
        equity, ledger = simulate_positions(targets, opens, closes, first.fee_bps / 1e4, first.slippage_bps / 1e4,
                                            first.maintenance_margin)
        curves[name], table[name] = equity, strategy_row(equity, targets, ledger, ppy)
    equity_frame = pd.DataFrame(curves, index=bars.index[lo:hi])
    return ForwardReport(pd.DataFrame.from_dict(table, orient="index"), np.log(equity_frame).diff().iloc[1:], ppy,
                         bars.index[lo])
