"""`python -m experiments.paper "models:/NAME@champion" --bars PATH... [--follow] [--serve-url URL]`: paper trading.

Steps the model through bars as they arrive, with the backtest's book, fees and slippage (the family's paper market,
envs.abilities.PaperTrades): at each decision bar the policy is asked (in process, or the served model at
--serve-url) for a target, filled at the next bar's open. A universe model takes one bars file per asset or one wide
table, and is asked for target weights; what follows is said of one market. Bars come from PATH (a bars parquet or
CSV, polled for appended bars with --follow, e.g. as `python -m experiments.data update` appends them) or, with
--exchange, from an exchange through ccxt when there is a network. Every bar's equity, position, drawdown and fills
are logged to an MLflow run (experiment `<model name>-paper`) with the bar's time (epoch seconds) as the step, and the
account's whole state goes into the same write as a tag, so after a crash or Ctrl-C the next start resumes from the
last logged state and replays the bars after it: no fill twice, none missed.

Drift: the band is the model's own backtest, replayed on its test window (`test_start`..`test_end` on the version):
the 5th..95th percentiles of its rolling `--drift-bars` Sharpe and turnover. When paper trading's rolling Sharpe or
turnover leaves that band, an alarm is printed and logged (metric drift_alarm, tag drift).

A thin shell over `experiments.api.paper` (experiments/api/paper_trading.py): it prints what the session says.
"""
from __future__ import annotations

import argparse
import os
import sys

from experiments import api
from experiments.api.paper_trading import PaperEvent, PaperOptions
from experiments.shell import exit_code, runnable


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m experiments.paper", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help='a registered model, e.g. "models:/dqn_btc@champion"')
    parser.add_argument("--bars", required=True, nargs="+",
                        help="bars parquet (the one `experiments.data update` appends to) or CSV export (read "
                             "through the importer's checks; with --follow only its appended rows); for a universe "
                             "model, one bars file per asset (any order) or one wide table of ASSET:close columns")
    parser.add_argument("--start", help="first bar to trade (default: the first bar after the model's data ended)")
    parser.add_argument("--follow", action="store_true", help="keep polling --bars (or --exchange) for new bars")
    parser.add_argument("--exchange", help="with --follow: fetch new bars from this ccxt exchange into --bars")
    parser.add_argument("--serve-url", help="ask a served model (mlflow models serve) instead of loading it here")
    parser.add_argument("--poll-seconds", type=float, default=PaperOptions.poll_seconds)
    parser.add_argument("--drift-bars", type=int, default=PaperOptions.drift_bars,
                        help="rolling window of the drift alarm (bars)")
    parser.add_argument("--tracking-uri", help="default MLFLOW_TRACKING_URI, else ./mlruns")
    return parser.parse_args(argv)


def options_from(args: argparse.Namespace) -> PaperOptions:
    return PaperOptions(start=args.start, follow=args.follow, exchange=args.exchange, serve_url=args.serve_url,
                        poll_seconds=args.poll_seconds, drift_bars=args.drift_bars, tracking_uri=args.tracking_uri)


def say(event: PaperEvent) -> None:
    """A session's event as its line: a failed fetch on stderr (the session tries again), the rest on stdout."""
    if event.kind == "fetch_failed":
        print(f"error: {runnable(event.text)}", file=sys.stderr, flush=True)
    else:
        print(event.text, flush=True)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    args = parse_args(argv)

    def paper() -> int:
        print(api.paper(args.model, args.bars, options_from(args), say).summary, flush=True)
        return 0

    return exit_code(paper, "interrupted: the last logged state is where the next start resumes")


if __name__ == "__main__":
    sys.exit(main())
