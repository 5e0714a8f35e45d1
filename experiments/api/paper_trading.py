"""`api.paper(model_uri, bars, PaperOptions())`: paper-trade a registered model bar by bar, as its backtest trades.

What the family's market does (envs.abilities.PaperTrades: read the bars files, book, replay, its metrics) is the
family's; this module is the platform's part: the model (in process, or served at `serve_url`), the MLflow session
and its resume, the poll for new bars, and the drift alarm (experiments/api/paper_drift.py). At each decision bar
the policy is asked for a target, filled at the next bar's open. Every bar's values are logged to an MLflow run
(experiment `<model name>-paper`) with the bar's time (epoch seconds) as the step, and the account's whole state goes
into the same write as a tag, so after a crash or Ctrl-C the next start resumes from the last logged state and
replays the bars after it: no fill twice, none missed. The session prints nothing: what it has to say (the start,
each fetch, the drift band and its alarms) goes to `on_event`.
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any, Literal

from envs.errors import InputError
from experiments.records.run_events import OnEvent, ignore

STATE_TAG, KEY_TAG, DRIFT_TAG = "paper.state", "paper.key", "drift"


@dataclass(frozen=True)
class PaperOptions:
    start: str | None = None         # the first bar to trade (default: the first bar after the model's data ended)
    follow: bool = False             # keep polling the bars (or `exchange`) for new ones; ends only when stopped
    exchange: str | None = None      # with `follow`: fetch new bars from this ccxt exchange into the bars files
    serve_url: str | None = None     # ask a served model (api.serve) instead of loading it here
    poll_seconds: float = 30.0       # the wait between polls that found no new bar
    drift_bars: int = 720            # the drift alarm's rolling window (bars)
    tracking_uri: str | None = None  # default MLFLOW_TRACKING_URI, else ./mlruns


@dataclass(frozen=True)
class PaperEvent:
    """What a session says as it runs, in the words the command prints. `fetch_failed`'s text is the one-line
    error (the command says it on stderr); the session goes on and tries again at the next poll."""

    kind: Literal["fetched", "fetch_failed", "waiting", "drift_off", "started", "drift_alarm"]
    text: str


@dataclass(frozen=True)
class PaperResult:
    """A session that ended (without `follow`, after the last bar of the files)."""

    name: str                   # the registered model
    version: str
    run_id: str                 # the MLflow run of this model on these bars (the same one when resumed)
    bars: str                   # the market's label: its bars files
    resumed_after: str | None   # the last bar of the state it resumed from (None: a new session)
    summary: str                # the book in one line: equity, fills, drawdown, last bar
    book: Any                   # the family's paper book after the last bar (`to_state()` is what was logged)


def paper(model_uri: str, bars: list[str], options: PaperOptions = PaperOptions(),
          on_event: OnEvent[PaperEvent] | None = None) -> PaperResult:
    """Paper-trade `model_uri` on `bars` (the family's bars files) until the last bar, or with `follow` until
    interrupted. Bad input (a model that reads no bars, files that do not fit it) is an InputError before any run
    opens."""
    return PaperSession(model_uri, [str(path) for path in bars], options, on_event or ignore).run()


class PaperSession:
    """One model on one set of bars files: the family's market, the model's answers, the MLflow run."""

    def __init__(self, model_uri: str, bars: list[str], options: PaperOptions,
                 on_event: OnEvent[PaperEvent]) -> None:
        import mlflow

        import envs
        from envs.abilities import PaperTrades, UpdatesData, able
        from experiments.api.paper_askers import http_asker, local_asker
        from experiments.results.promotion import resolve_version
        from experiments.tracking.runs import make_client
        from experiments.tracking.store import default_tracking_uri

        self.model_uri, self.bars, self.options, self.say = model_uri, bars, options, on_event
        tracking_uri = options.tracking_uri or default_tracking_uri()
        self.client = make_client(tracking_uri)
        mlflow.set_tracking_uri(tracking_uri)
        self.version = resolve_version(self.client, model_uri)
        model = mlflow.pyfunc.load_model(f"models:/{self.version.name}/{self.version.version}")
        self.reader = model.unwrap_python_model().inputs
        family = envs.family(self.version.tags.get("env", ""))
        if self.reader is None or self.reader.refusal or not isinstance(family, PaperTrades):
            why = (self.reader.refusal if self.reader and self.reader.refusal else
                   f"{family.env_id or 'its env'} has no paper trading (envs.abilities.PaperTrades: "
                   f"{', '.join(able(PaperTrades, envs.FAMILIES))})")
            raise InputError(f"{model_uri}: {why}: paper trading replays a model that reads bars; "
                             "serve it (python -m experiments.serve) and post its inputs instead")
        if options.exchange and not isinstance(family, UpdatesData):
            raise InputError(f"--exchange {options.exchange}: {family.env_id} keeps no data files to fetch into "
                             f"(envs.abilities.UpdatesData: {', '.join(able(UpdatesData, envs.FAMILIES))})")
        self.family = family
        self.market = family.paper_market().open(self.reader, bars, options.follow)
        self.replayed = local_asker(model, model_uri, self.market.label)  # the drift band's backtest: in process
        self.ask = http_asker(options.serve_url, model_uri) if options.serve_url else self.replayed

    def run(self) -> PaperResult:
        from experiments.api.paper_drift import drift_band
        from experiments.tracking.datasets import log_data_parts

        data = self._read()
        run_id, state = self._open_run()
        log_data_parts(self.client, run_id, [self.market.data_part(data)])
        book = self.market.book_from_state(state) if state else self.market.new_book()
        band = drift_band(self.market, data, self.version.tags, self.reader.bars_needed, self.options.drift_bars,
                          self.replayed)
        if isinstance(band, str):
            self.say(PaperEvent("drift_off", band))
            band = None
        resumed_after = book.last_bar if state else None
        self.say(PaperEvent("started", f"paper trading {self.version.name} version {self.version.version} on "
                                       f"{self.market.label}: MLflow run {run_id}"
                                       f"{'' if resumed_after is None else ', resumed after ' + resumed_after}"))
        try:
            while True:
                stepped = self._trade(data, book, run_id, band)
                if not self.options.follow:
                    break
                if not stepped:
                    time.sleep(self.options.poll_seconds)
                data = self._read()
        except KeyboardInterrupt:
            self.client.set_terminated(run_id, status="KILLED")  # resumed, it is RUNNING again
            raise
        except Exception:
            self.client.set_terminated(run_id, status="FAILED")  # not left RUNNING; the next start resumes its state
            raise
        self.client.set_terminated(run_id)
        return PaperResult(self.version.name, str(self.version.version), run_id, self.market.label, resumed_after,
                           self.market.summary(book), book)

    def _read(self) -> Any:
        if self.options.exchange:  # appended to the bars as `experiments.data update --fetch` does; a failure waits
            from experiments.api.data import PlatformFiles

            for path in self.bars:
                try:
                    request = self.family.update_request([path], feed=self.options.exchange)
                    for line in self.family.run_data(request, PlatformFiles()):
                        self.say(PaperEvent("fetched", line))
                except InputError as error:
                    self.say(PaperEvent("fetch_failed", str(error)))
                    self.say(PaperEvent("waiting", f"no new bars for {path} from {self.options.exchange} this time; "
                                                   f"trying again in {self.options.poll_seconds:g} s"))
        return self.market.read()

    def _open_run(self) -> tuple[str, dict[str, Any] | None]:
        """The run of this model on these bars (resumed with its last state), or a new one."""
        name = f"{self.version.name}-paper"
        experiment = self.client.get_experiment_by_name(name)
        experiment_id = experiment.experiment_id if experiment else self.client.create_experiment(name)
        key = hashlib.sha256(f"{self.version.name}/{self.version.version}|{self.market.key}|"
                             f"{self.options.start}".encode()).hexdigest()[:16]
        found = self.client.search_runs([experiment_id], f"tags.`{KEY_TAG}` = '{key}'", max_results=1)
        if found:
            self.client.update_run(found[0].info.run_id, status="RUNNING")
            state = found[0].data.tags.get(STATE_TAG)
            return found[0].info.run_id, json.loads(state) if state else None
        run = self.client.create_run(experiment_id, run_name=f"paper {self.version.name} v{self.version.version}",
                                     tags={KEY_TAG: key, "model": self.model_uri,
                                           "model_version": self.version.version,
                                           "bars": self.market.label[:5000], "role": "paper"})
        return run.info.run_id, None

    def _first_row(self, index: Any) -> int:
        import pandas as pd

        if self.options.start:
            row = int(index.searchsorted(pd.Timestamp(self.options.start, tz="UTC")))
        else:  # the first bar after the model's data ended
            row = int(index.searchsorted(pd.Timestamp(self.version.tags["data_end"]), side="right"))
        return max(row, self.reader.bars_needed - 1)

    def _trade(self, data: Any, book: Any, run_id: str, band: Any) -> bool:
        """Step every bar after the book's last one; log them in batches with the state. True if any was new."""
        import numpy as np
        import pandas as pd
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
                    self.say(PaperEvent("drift_alarm", f"drift alarm at {stamp}: {drift} (band: the model's backtest)"))
                    pending_tags.append(RunTag(DRIFT_TAG, f"{stamp}: {drift}"))
            last.update(equity=outcome.equity, traded=traded_now)
            pending.extend(Metric(k, v, at, step) for k, v in values.items() if np.isfinite(v))
            if len(pending) >= 900 or self.options.follow:
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
