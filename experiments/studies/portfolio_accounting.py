"""The accounting check: the portfolio book replays universal-portfolios' weights on NYSE(O) and must reach its wealth.

NYSE(O) (the library's `nyse_o`: 5,651 days x 36 stocks, no dates) gets consecutive weekdays from 1962-07-03. The data
are close-only, so a fill at the next bar's open is a fill at the decision bar's close (opens[t] = closes[t-1]).
UCRP rebalances to 1/N at every close, UBAH buys 1/N once and holds, OLMAR and PAMR replay the library's own weights.
With no costs the book must reach the library's final wealth; with costs the book pays the exact self-financing cost
(envs/portfolio/book.py) and the library its first-order model, so the table shows that gap.
`python -m experiments.studies.portfolio_accounting` prints the table in docs/portfolio.md ("The accounting check");
tests/unit/test_portfolio_accounting.py runs the first 1,000 days in CI.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd

from envs.portfolio.book import remainder_factor, replay_weights
from envs.portfolio.olps import bundled_prices, olps_run
from experiments.shell import exit_code

CALENDAR_START = "1962-07-03"
COST_RATE = 0.001  # 10 bps, the library's `result.fee`
STRATEGIES = {"ucrp": "ucrp", "ubah": "bah", "olmar": "olmar", "pamr": "pamr"}  # the book's name: the library's


def nyse_o(rows: int | None = None) -> pd.DataFrame:
    """The first `rows` days of NYSE(O) (all 5,651 when None) on a weekday calendar from 1962-07-03."""
    prices = bundled_prices("nyse_o").iloc[:rows]
    return prices.set_index(pd.bdate_range(CALENDAR_START, periods=len(prices), name="date"))


def book_targets(strategy: str, library_weights: np.ndarray) -> np.ndarray:
    """The book's targets (T, N+1, cash first; NaN holds) for the library's weights (T, N): the library holds row t
    over the relative p_t / p_{t-1}, the book holds its target at close t over the next one, so target t is row t+1.
    UBAH buys 1/N at the first close and then holds (NaN rows)."""
    periods, assets = library_weights.shape
    targets = np.full((periods, assets + 1), np.nan)
    if strategy == "ubah":
        targets[0] = np.r_[0.0, np.full(assets, 1.0 / assets)]
    else:
        targets[:-1] = np.column_stack([np.zeros(periods - 1), library_weights[1:]])
    return targets


def book_wealth(targets: np.ndarray, closes: np.ndarray, cost_rate: float) -> float:
    """The book's final wealth, divided by what its first purchase (from all cash) cost: the library's first
    purchase is free, so the two start from the same invested wealth. Every later rebalance scales with the wealth,
    so dividing out the first cost is exact."""
    periods, assets = closes.shape
    opens = np.vstack([closes[:1], closes[:-1]])  # close-only: the next bar opens at this bar's close
    equity, _ = replay_weights(targets, 0, opens, closes, np.full(assets, periods), cost_rate)
    first = remainder_factor(np.r_[1.0, np.zeros(assets)], targets[0], cost_rate) if cost_rate > 0.0 else 1.0
    return float(equity[-1]) / first


def accounting_table(closes: pd.DataFrame, cost_rate: float = COST_RATE) -> pd.DataFrame:
    """Per strategy, the library's and the book's final wealth with no costs and at `cost_rate`, and the relative
    gaps (book / library - 1)."""
    rows = {}
    for strategy, algorithm in STRATEGIES.items():
        run = olps_run(algorithm, closes, (0.0, cost_rate))
        targets = book_targets(strategy, run.weights)
        free, costly = (book_wealth(targets, closes.to_numpy(), rate) for rate in (0.0, cost_rate))
        rows[strategy] = {"library": run.wealths[0], "book": free, "gap": free / run.wealths[0] - 1.0,
                          "library_fee": run.wealths[1], "book_fee": costly, "gap_fee": costly / run.wealths[1] - 1.0}
    return pd.DataFrame(rows).T


def main(argv: list[str] | None = None) -> int:
    return exit_code(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.studies.portfolio_accounting", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=None, help="the first ROWS days (default: all 5,651)")
    args = parser.parse_args(argv)
    closes = nyse_o(args.rows)
    table = accounting_table(closes)
    print(f"NYSE(O), {len(closes)} days x {closes.shape[1]} stocks; fee {COST_RATE:g} (the book: exact "
          "self-financing cost, its first purchase divided out; the library: first order)")
    print("| strategy | library, no fee | book, no fee | gap | library, fee | book, fee | gap |")
    print("|---|---|---|---|---|---|---|")
    for strategy, row in table.iterrows():
        print(f"| {strategy} | {row['library']:.12g} | {row['book']:.12g} | {row['gap']:.2e} | "
              f"{row['library_fee']:.12g} | {row['book_fee']:.12g} | {row['gap_fee']:.3e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
