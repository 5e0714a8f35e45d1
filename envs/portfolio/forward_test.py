"""A universe's forward test: registered portfolio models replayed over calendar rows none of them trained or was
selected on, next to the portfolio baselines, with the backtest's book and costs.

Each model is replayed as paper trading replays it (envs.portfolio.paper.UniversePaper: the universe in the model's
asset order, its last bars asked as one wide table with the weights held, the answer filled at the next open with
the backtest's `step_book`), so its forward numbers are what paper trading would have shown and, on the same rows,
its backtest's. The baselines are the backtest's (envs.portfolio.backtest): decided on the env the experiment's
env_config makes of the same files with the forward window as its test part (so a baseline fitted on the train part
is fitted on every row before the window), filled by `replay_weights` at the costs of the first model's env. The
files are read once, by that env: each model's paper book trades the universe it read (paper trading would build
the same one from the same files, envs.portfolio.universe_files), in the model's asset order.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from envs.portfolio.backtest import baseline_view, strategy_row
from envs.portfolio.baselines import BASELINES, FIXED, fixed_weights
from envs.portfolio.book import replay_weights
from envs.portfolio.env import PortfolioEnv
from envs.portfolio.paper import UniversePaper
from envs.portfolio.universe import Universe
from envs.retrain_data import ForwardReport


def forward_test(models: Mapping[str, Any], paths: list[str], env_config: dict[str, Any], rows: range
                 ) -> ForwardReport:
    """Replay every model (a pyfunc model: `predict`, `unwrap_python_model().inputs`) and score the baselines on
    `rows` of the calendar of the universe of `paths`."""
    first = next(iter(models.values())).unwrap_python_model().inputs
    env = PortfolioEnv({**env_config, "data_paths": paths, "protocol": {"type": "refit", "test_size": len(rows)},
                        "fold": 0, "split": "test", "episode_length": None, "fee_bps": first.fee_bps,
                        "slippage_bps": first.slippage_bps, "decision_interval": first.decision_interval})
    market, universe = env.market, env.market.universe
    lo, hi = market.bounds["test"]  # `rows`: the same files' calendar, the same last rows
    ppy = market.bars_per_year
    curves, table = {}, {}
    for name, model in models.items():
        curves[name], table[name] = replayed(model, paths, universe, rows, ppy)
    view = baseline_view(env)
    strategies = {baseline.name: baseline.decide(view, lo, hi) for baseline in BASELINES}
    if env.fixed_weights is not None:
        strategies[FIXED] = fixed_weights(view, lo, hi, env.fixed_weights)
    for name, targets in strategies.items():
        equity, book = replay_weights(targets, lo, universe.opens, universe.closes, universe.last_rows,
                                      env.cfg.cost_rate)
        curves[name], table[name] = equity, strategy_row(equity, targets, book, ppy)
    equity_frame = pd.DataFrame(curves, index=market.timestamps[lo:hi])
    return ForwardReport(pd.DataFrame.from_dict(table, orient="index"), np.log(equity_frame).diff().iloc[1:], ppy,
                         market.timestamps[lo])


def replayed(model: Any, paths: list[str], universe: Universe, rows: range, periods_per_year: float
             ) -> tuple[np.ndarray, dict]:
    """A model's equity at each row's close, paper-traded through its served code on `universe` (read from
    `paths`), and its table row."""
    paper = UniversePaper.open(model.unwrap_python_model().inputs, paths, follow=False)
    data = paper.on(universe)
    book = paper.new_book()
    width = len(paper.reader.symbols) + 1
    decided: list[np.ndarray] = []
    equity = paper.replay(book, data, rows, model.predict, lambda _stamp, _outcome: decided.append(
        np.full(width, np.nan) if book.pending is None else np.asarray(book.pending)))
    return equity, strategy_row(equity, np.stack(decided), book.book, periods_per_year)
