"""`python -m experiments.paper "models:/NAME@champion" --bars PATH... [--follow] [--serve-url URL]`: paper trading.

Steps the model through bars as they arrive, with the backtest's ledger, fees and slippage
(`envs.trading.paper`): at each decision bar the policy is asked (in process, or the served model at --serve-url)
for a target, filled at the next bar's open. A universe model (trading/Portfolio-v0) takes one bars file per asset
or one wide table, and is asked for target weights (envs.portfolio.paper); what follows is said of one market. Bars
come from PATH (a bars parquet or CSV, polled for appended bars
with --follow, e.g. as `python -m experiments.data update` appends them) or, with --exchange, from an exchange
through ccxt when there is a network. Every bar's equity, position, drawdown and fills are logged to an MLflow run
(experiment `<model name>-paper`) with the bar's time (epoch seconds) as the step, and the account's whole state
goes into the same write as a tag, so after a crash or Ctrl-C the next start resumes from the last logged state and
replays the bars after it: no fill twice, none missed.

Drift: the band is the model's own backtest, replayed on its test window (`test_start`..`test_end` on the version):
the 5th..95th percentiles of its rolling `--drift-bars` Sharpe and turnover. When paper trading's rolling Sharpe or
turnover leaves that band, an alarm is printed and logged (metric drift_alarm, tag drift).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from envs.errors import InputError
from experiments.serve import invocation_body
from experiments.shell import exit_code, runnable
from experiments.tracking.store import default_tracking_uri

STATE_TAG, KEY_TAG, DRIFT_TAG = "paper.state", "paper.key", "drift"


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
    parser.add_argument("--poll-seconds", type=float, default=30.0)
    parser.add_argument("--drift-bars", type=int, default=720, help="rolling window of the drift alarm (bars)")
    parser.add_argument("--tracking-uri", help="default MLFLOW_TRACKING_URI, else ./mlruns")
    return parser.parse_args(argv)


@dataclass
class DriftBand:
    """The 5th..95th percentiles of the backtest's rolling (annualized) Sharpe and turnover over `bars` bars."""

    bars: int
    periods_per_year: float
    sharpe: tuple[float, float]
    turnover: tuple[float, float]
    seen: deque = field(default_factory=deque)  # (log return, traded notional) of the last `bars` paper bars
    drifting: bool = False  # the alarm is raised when the rolling values leave the band, not at every bar outside

    def check(self, log_return: float, traded: float) -> tuple[float, float, str, bool]:
        """The rolling Sharpe and turnover after this bar (as `rolling_stats` computes them for the band), why they
        are outside the band ("" inside), and whether they just left it."""
        self.seen.append((log_return, traded))
        if len(self.seen) > self.bars:
            self.seen.popleft()
        if len(self.seen) < self.bars:
            return float("nan"), float("nan"), "", False
        window = np.asarray(self.seen)
        std = float(window[:, 0].std())
        sharpe = float(window[:, 0].mean()) / std * np.sqrt(self.periods_per_year) if std > 0 else 0.0
        turnover = float(window[:, 1].sum())
        out = [f"{what} {value:.2f} outside {low:.2f}..{high:.2f}" for what, value, (low, high) in
               (("Sharpe", sharpe, self.sharpe), ("turnover", turnover, self.turnover)) if not low <= value <= high]
        entered, self.drifting = bool(out) and not self.drifting, bool(out)
        return sharpe, turnover, "; ".join(out), entered


def rolling_stats(rows: np.ndarray, window: int, periods_per_year: float) -> tuple[np.ndarray, np.ndarray]:
    """Per `window` bars: the annualized Sharpe of the log returns and the traded notional (in starting equities)."""
    frame = pd.DataFrame(rows, columns=["r", "traded"])
    rolling = frame["r"].rolling(window)
    std = rolling.std(ddof=0).replace(0.0, np.nan)
    sharpe = (rolling.mean() / std).fillna(0.0) * np.sqrt(periods_per_year)
    return sharpe.to_numpy()[window - 1:], frame["traded"].rolling(window).sum().to_numpy()[window - 1:]


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    args = parse_args(argv)
    return exit_code(lambda: PaperTrader(args).run(),
                     "interrupted: the last logged state is where the next start resumes")


class PaperTrader:
    """One paper-trading session of one model on one bars source (see the module docstring). What is specific to
    the model's family (its bars, book and replay) comes from its `envs.EnvFamily.paper_trading` entry."""

    def __init__(self, args: argparse.Namespace) -> None:
        import mlflow

        import envs
        from experiments.results.promotion import resolve_version
        from experiments.tracking.runs import make_client

        self.args = args
        self.tracking_uri = args.tracking_uri or default_tracking_uri()
        self.client = make_client(self.tracking_uri)
        mlflow.set_tracking_uri(self.tracking_uri)
        self.version = resolve_version(self.client, args.model)
        self.model = mlflow.pyfunc.load_model(f"models:/{self.version.name}/{self.version.version}")
        self.reader = self.model.unwrap_python_model().inputs
        family = envs.family(self.version.tags.get("env", ""))
        if self.reader is None or self.reader.refusal or not family.paper_trading:
            why = (self.reader.refusal if self.reader and self.reader.refusal else
                   f"{family.env_id or 'its env'} has no paper trading (envs.EnvFamily.paper_trading)")
            raise InputError(f"{args.model}: {why}: paper trading replays a model that reads bars; "
                             "serve it (python -m experiments.serve) and post its inputs instead")
        self.ask = self._http_asker(args.serve_url) if args.serve_url else self._local_asker()
        self.market = family.paper_market().open(self.reader, [str(b) for b in args.bars], args.follow)

    def _local_asker(self) -> Callable[[pd.DataFrame], pd.DataFrame]:
        from mlflow.exceptions import MlflowException

        def ask(request: pd.DataFrame) -> pd.DataFrame:
            try:
                return self.model.predict(request)
            except MlflowException as error:  # the model's one line on what does not fit it
                raise InputError(f"{self.args.model} on {self.market.label}: {error.message}") from None
        return ask

    def _http_asker(self, url: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
        import requests

        endpoint = url.rstrip("/") + ("" if url.rstrip("/").endswith("/invocations") else "/invocations")

        def ask(request: pd.DataFrame) -> pd.DataFrame:
            try:
                response = requests.post(endpoint, json=invocation_body(request), timeout=30)
            except requests.RequestException as error:
                raise InputError(f"--serve-url {url}: no answer ({type(error).__name__}): "
                                 "start the model's server with "
                                 f"python -m experiments.serve {self.args.model}, or leave --serve-url out") from None
            if response.status_code != 200:
                raise InputError(f"{endpoint}: {response.status_code}: "
                                 f"{response.json().get('message', response.text).splitlines()[-1]}")
            return pd.DataFrame(response.json()["predictions"])
        return ask

    def run(self) -> int:
        from experiments.tracking.datasets import log_data_parts

        data = self._read()
        run_id, state = self._session()
        log_data_parts(self.client, run_id, [self.market.data_part(data)])
        book = self.market.book_from_state(state) if state else self.market.new_book()
        band = self._band(data)
        print(f"paper trading {self.version.name} version {self.version.version} on {self.market.label}: MLflow run "
              f"{run_id}{', resumed after ' + book.last_bar if state else ''}", flush=True)
        try:
            while True:
                stepped = self._trade(data, book, run_id, band)
                if not self.args.follow:
                    break
                if not stepped:
                    time.sleep(self.args.poll_seconds)
                data = self._read()
        except KeyboardInterrupt:
            self.client.set_terminated(run_id, status="KILLED")  # resumed, it is RUNNING again
            raise
        except Exception:
            self.client.set_terminated(run_id, status="FAILED")  # not left RUNNING; --resume continues from its state
            raise
        self.client.set_terminated(run_id)
        print(self.market.summary(book), flush=True)
        return 0

    def _read(self) -> Any:
        if self.args.exchange:  # appended to --bars as `experiments.data update --fetch` does; a failure waits a poll
            from experiments.storage.dataset_update import BarsSource, update_dataset

            for bars in self.args.bars:
                try:
                    for line in update_dataset(BarsSource(fetch=self.args.exchange), str(bars)):
                        print(line, flush=True)
                except InputError as error:
                    print(f"error: {runnable(str(error))}", file=sys.stderr, flush=True)
                    print(f"no new bars for {bars} from {self.args.exchange} this time; trying again in "
                          f"{self.args.poll_seconds:g} s", flush=True)
        return self.market.read()

    def _session(self) -> tuple[str, dict[str, Any] | None]:
        """The run of this model on these bars (resumed with its last state), or a new one."""
        name = f"{self.version.name}-paper"
        experiment = self.client.get_experiment_by_name(name)
        experiment_id = experiment.experiment_id if experiment else self.client.create_experiment(name)
        key = hashlib.sha256(f"{self.version.name}/{self.version.version}|{self.market.key}|"
                             f"{self.args.start}".encode()).hexdigest()[:16]
        found = self.client.search_runs([experiment_id], f"tags.`{KEY_TAG}` = '{key}'", max_results=1)
        if found:
            self.client.update_run(found[0].info.run_id, status="RUNNING")
            state = found[0].data.tags.get(STATE_TAG)
            return found[0].info.run_id, json.loads(state) if state else None
        run = self.client.create_run(experiment_id, run_name=f"paper {self.version.name} v{self.version.version}",
                                     tags={KEY_TAG: key, "model": self.args.model,
                                           "model_version": self.version.version,
                                           "bars": self.market.label[:5000], "role": "paper"})
        return run.info.run_id, None

    def _first_row(self, index: pd.DatetimeIndex) -> int:
        if self.args.start:
            row = int(index.searchsorted(pd.Timestamp(self.args.start, tz="UTC")))
        else:  # the first bar after the model's data ended
            row = int(index.searchsorted(pd.Timestamp(self.version.tags["data_end"]), side="right"))
        return max(row, self.reader.bars_needed - 1)

    def _band(self, data: Any) -> DriftBand | None:
        index = self.market.index(data)
        lo, hi = (int(index.searchsorted(pd.Timestamp(self.version.tags.get(k, "NaT")))) for k in
                  ("test_start", "test_end"))
        if (not self.version.tags.get("test_start") or hi - lo < 2 * self.args.drift_bars
                or lo < self.reader.bars_needed):
            print(f"drift alarm off: {self.market.label} does not hold the model's test window "
                  f"({self.version.tags.get('test_start')} .. {self.version.tags.get('test_end')}) with "
                  f"{2 * self.args.drift_bars} bars or more", flush=True)
            return None
        book, traded = self.market.new_book(), []
        equity = self.market.replay(book, data, range(lo, hi + 1), self._local_asker(),
                                    lambda _s, _o: traded.append(self.market.traded(book)))
        rows = np.column_stack([np.r_[0.0, np.diff(np.log(equity))], np.r_[0.0, np.diff(traded)]])
        per_year = self.market.periods_per_year(data)  # as the backtest annualized
        sharpe, turnover = rolling_stats(rows, self.args.drift_bars, per_year)
        return DriftBand(self.args.drift_bars, per_year, tuple(np.percentile(sharpe, [5, 95])),
                         tuple(np.percentile(turnover, [5, 95])))

    def _trade(self, data: Any, book: Any, run_id: str, band: DriftBand | None) -> bool:
        """Step every bar after the book's last one; log them in batches with the state. True if any was new."""
        from mlflow.entities import Metric, RunTag

        index = self.market.index(data)
        first = (int(index.searchsorted(pd.Timestamp(book.last_bar), side="right")) if book.last_bar
                 else self._first_row(index))
        if first >= len(index):
            return False
        pending: list[Metric] = []
        pending_tags: list[RunTag] = []
        last = {"equity": book.equity, "traded": self.market.traded(book)}

        def on_bar(stamp: pd.Timestamp, outcome: Any) -> None:
            step, at = int(stamp.timestamp()), int(stamp.timestamp() * 1000)
            values = self.market.bar_values(book, outcome)
            traded_now = self.market.traded(book)
            if band is not None:
                sharpe, turnover, drift, entered = band.check(float(np.log(outcome.equity / last["equity"])),
                                                              traded_now - last["traded"])
                values.update({"rolling_sharpe": sharpe, "rolling_turnover": turnover,
                               "drift_alarm": float(bool(drift))})
                if entered:
                    print(f"drift alarm at {stamp}: {drift} (band: the model's backtest)", flush=True)
                    pending_tags.append(RunTag(DRIFT_TAG, f"{stamp}: {drift}"))
            last.update(equity=outcome.equity, traded=traded_now)
            pending.extend(Metric(k, v, at, step) for k, v in values.items() if np.isfinite(v))
            if len(pending) >= 900 or self.args.follow:
                flush()

        def flush() -> None:
            # One write: the bars' metrics and the state after the last of them (a crash resumes from here)
            tags = [*pending_tags, RunTag(STATE_TAG, json.dumps(book.to_state()))]
            self.client.log_batch(run_id, metrics=pending, tags=tags)
            pending.clear()
            pending_tags.clear()

        self.market.replay(book, data, range(first, len(index)), self.ask, on_bar)
        flush()
        return True


if __name__ == "__main__":
    sys.exit(main())
