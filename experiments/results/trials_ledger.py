"""The trials ledger: every configuration ever scored on a dataset's test windows, so a verdict deflates for them all.

A user who tries thirty hypotheses on the same test windows and keeps the best is fooled by exactly the luck
the deflated Sharpe ratio exists to catch, unless the verdict knows about the other twenty-nine. So every
run that scores out of sample records an *attempt* here: its configurations and their out-of-sample return
series, whatever the run was (a smoke test, a rerun, another feature set). The verdict of the next run on
the same data and windows reads them all back (`experiments.results.verdict.PriorTrials`).

- **Key**: a digest of the content judged and every test window of its protocol (envs.report.EvaluationReport's
  `data_digest` and `windows`): for bars, their values over the test windows, so the same bars saved again, or with
  bars outside the windows added or dropped, are the same ledger. Another exchange's file, or other folds, is another
  ledger; another feature set, algorithm or experiment name on the same bars and windows is the same ledger.
- **Carried over**: ledgers were keyed on the data file's bytes before (`file_digest`). A ledger recorded under
  that key on the same windows is found and its attempts are counted with the new key's (read where they are; new
  attempts are recorded under the new key, which names the old one in its tag `ledger.<key>.carried_from`, so they
  stay counted after the file is saved again).
- **Where**: in the MLflow tracking store the run uses, so a team server shares one ledger: the MLflow
  experiment `trials-ledger` (no runs): per key, experiment tags (`ledger.<key>.attempts`, `.configurations`,
  `.data`, `.windows`, `.fresh`, `.carried_from`) that the UI shows, and one artifact per attempt
  (`<key>/<stamp>.parquet`: the trial columns, with who, when, which run, which configurations and whether it was a
  smoke test).
- **A fresh ledger** needs `--fresh-ledger REASON`. It is recorded as an attempt like any other, with the
  reason; later verdicts count from it, and the attempts before it stay in the store.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository
from mlflow.tracking import MlflowClient

from experiments.results.verdict import PriorTrials, configuration_series

LEDGER_EXPERIMENT = "trials-ledger"
_META = "trials_ledger"  # the parquet attrs key of an attempt's metadata
ENSEMBLE_MARK = ":ensemble"  # after a run's id: the attempt of that run's ensemble (ensemble_attempt_id)
NOTE = ("The trials ledger: every configuration scored on a dataset's test windows, one artifact per attempt and "
        "per-dataset tags ledger.<key>.*; no runs. Verdicts on the same data and windows are deflated by all of "
        "them (docs/verdicts.md, 'The trials ledger').")


@dataclass(frozen=True)
class LedgerKey:
    """Which data and which test windows a ledger is about."""

    data_digest: str
    windows: tuple[tuple[str, str], ...]
    label: str = ""  # e.g. "BTC-USD 1h", for people
    file_digest: str = ""  # the whole file's bytes' digest, which keyed this ledger before: finds its attempts

    @property
    def id(self) -> str:
        return _key_id(self.data_digest, self.windows)

    @property
    def byte_keyed_id(self) -> str:
        """The id these data and windows had when ledgers were keyed on the file's bytes ("" without a file digest)."""
        return _key_id(self.file_digest, self.windows) if self.file_digest else ""

    def describe(self) -> str:
        first, last = self.windows[0][0][:10], self.windows[-1][1][:10]
        return f"{self.label} data {self.data_digest[:12]}, {len(self.windows)} test window(s) {first}..{last}"


def _key_id(data_digest: str, windows: tuple[tuple[str, str], ...]) -> str:
    text = json.dumps({"data": data_digest, "windows": [list(w) for w in windows]})
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def ensemble_attempt_id(run_id: str, group: str | None = None) -> str:
    """The run id a run's ensemble records its own attempt under (experiments/results/ensemble_logging.py): the run's
    own, marked, so the run's verdict never counts its own ensemble, even when it is scored again after --resume."""
    return f"{run_id}{ENSEMBLE_MARK}{'' if group is None else '/' + group}"


def _of_run(attempt_run_id: str, run_id: str) -> bool:
    """Whether an attempt is `run_id`'s own: its verdict's, or its ensembles'."""
    return attempt_run_id == run_id or attempt_run_id.startswith(f"{run_id}{ENSEMBLE_MARK}")


def _in_time_order(by_ledger: dict[str, list[Attempt]]) -> list[Attempt]:
    """The attempts of several ledgers as one history, oldest first (an attempt's name starts with its time)."""
    return sorted((a for attempts in by_ledger.values() for a in attempts), key=lambda a: a.name)


@dataclass
class Attempt:
    """One run's configurations scored on the ledger's windows."""

    experiment: str
    run_id: str
    user: str
    git_commit: str
    smoke_test: bool
    configurations: list[str]
    returns: pd.DataFrame             # per-period out-of-sample returns, one column per configuration x seed
    fresh_reason: str = ""            # set when this attempt starts a fresh ledger
    stamp: str = field(default_factory=lambda: time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))

    def meta(self) -> dict[str, object]:
        return {"experiment": self.experiment, "run_id": self.run_id, "user": self.user, "git_commit": self.git_commit,
                "smoke_test": self.smoke_test, "configurations": self.configurations,
                "fresh_reason": self.fresh_reason, "stamp": self.stamp}

    @property
    def name(self) -> str:
        """Unique and in time order: the file name of its artifact and the prefix of its columns. An ensemble's attempt
        (ensemble_attempt_id) shares its run's first 8 characters and is often recorded in the same second, so its
        name adds a digest of its whole id: the two must not overwrite one artifact."""
        if ENSEMBLE_MARK not in self.run_id:
            return f"{self.stamp}-{self.run_id[:8]}"
        return f"{self.stamp}-{self.run_id[:8]}-{hashlib.sha1(self.run_id.encode()).hexdigest()[:8]}"


@contextmanager
def _no_progress_bars() -> Iterator[None]:
    """MLflow draws a progress bar per downloaded artifact; a ledger read downloads one per attempt."""
    previous = os.environ.get("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR")
    os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR")
        else:
            os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = previous


class TrialsLedger:
    """The ledgers of one MLflow tracking store."""

    def __init__(self, client: MlflowClient, tracking_uri: str) -> None:
        self.client = client
        self.tracking_uri = tracking_uri
        self._experiment_id: str | None = None
        self._read: dict[str, Attempt] = {}  # artifact path -> attempt: an attempt's file never changes

    def _experiment(self) -> str:
        if self._experiment_id is None:
            existing = self.client.get_experiment_by_name(LEDGER_EXPERIMENT)
            if existing is not None:
                self._experiment_id = existing.experiment_id
            else:
                location = None
                if self.tracking_uri.startswith("sqlite:///"):  # next to the store, like the runs' artifacts
                    location = (Path(self.tracking_uri.removeprefix("sqlite:///")).parent / "artifacts" /
                                LEDGER_EXPERIMENT).as_uri()
                try:
                    self._experiment_id = self.client.create_experiment(
                        LEDGER_EXPERIMENT, artifact_location=location, tags={"mlflow.note.content": NOTE})
                except MlflowException:  # another run created it a moment ago
                    self._experiment_id = self.client.get_experiment_by_name(LEDGER_EXPERIMENT).experiment_id
        return self._experiment_id

    def _repository(self):
        location = self.client.get_experiment(self._experiment()).artifact_location
        return get_artifact_repository(location, tracking_uri=self.tracking_uri)

    def _recorded(self, key_id: str) -> list[Attempt]:
        """The attempts stored under one ledger id, oldest first."""
        repository = self._repository()
        names = sorted(f.path for f in repository.list_artifacts(key_id) if f.path.endswith(".parquet"))
        with tempfile.TemporaryDirectory() as folder, _no_progress_bars():
            for name in names:
                if name not in self._read:
                    frame = pd.read_parquet(repository.download_artifacts(name, folder))
                    meta = dict(frame.attrs.get(_META, {}))
                    frame.attrs = {}
                    self._read[name] = Attempt(returns=frame, **meta)
        return [self._read[name] for name in names]

    def _carried_from(self, key: LedgerKey) -> list[str]:
        """The byte-keyed ledgers whose attempts count on `key`: those it already carries over (its tag), and the one
        its own file's bytes name when that holds attempts."""
        tags = self.client.get_experiment(self._experiment()).tags
        carried = [i for i in tags.get(f"ledger.{key.id}.carried_from", "").split(",") if i]
        former = key.byte_keyed_id
        if former and former != key.id and former not in carried and self._recorded(former):
            carried.append(former)
        return carried

    def _by_ledger(self, key: LedgerKey) -> dict[str, list[Attempt]]:
        """Ledger id -> its attempts that count on `key`: the byte-keyed ones carried over, then the key's own."""
        return {key_id: self._recorded(key_id) for key_id in [*self._carried_from(key), key.id]}

    def attempts(self, key: LedgerKey) -> list[Attempt]:
        """Every attempt that counts on `key`, oldest first (fresh starts and those carried over included)."""
        return _in_time_order(self._by_ledger(key))

    def prior(self, key: LedgerKey, run_id: str = "") -> PriorTrials:
        """What the next verdict on `key` must count: the attempts since the last fresh start (a resumed run's own
        earlier record, `run_id`'s, aside), those of byte-keyed ledgers carried over included and said."""
        by_ledger = self._by_ledger(key)
        attempts = _in_time_order(by_ledger)
        fresh = [i for i, a in enumerate(attempts) if a.fresh_reason]
        counted = [a for a in (attempts[fresh[-1]:] if fresh else attempts) if not _of_run(a.run_id, run_id)]
        notes = []
        if fresh:
            start = attempts[fresh[-1]]
            notes.append(f"fresh ledger since {start.stamp} by {start.user} ({start.fresh_reason}); "
                         f"{fresh[-1]} earlier attempt(s) set aside")
        counted_names = {a.name for a in counted}
        for key_id, found in by_ledger.items():
            carried = sum(a.name in counted_names for a in found) if key_id != key.id else 0
            if carried:
                notes.append(f"{carried} attempt(s) carried over from the byte-keyed ledger {key_id}")
        note = "; ".join(notes)
        if not counted:
            return PriorTrials(note=note)
        columns = [a.returns.add_prefix(f"{a.name}: ") for a in counted]
        trial_returns = pd.concat(columns, axis=1)
        return PriorTrials(trial_returns=trial_returns, configuration_returns=configuration_series(trial_returns),
                           configurations=sum(len(a.configurations) for a in counted), attempts=len(counted),
                           note=note)

    def record(self, key: LedgerKey, attempt: Attempt) -> None:
        """Add `attempt` to the ledger of `key` (one artifact written whole) and refresh the key's tags; a run
        recorded already (scored again after --resume) is not recorded twice."""
        if any(a.run_id == attempt.run_id for a in self.attempts(key)):
            return
        repository = self._repository()
        frame = attempt.returns.copy()
        frame.attrs = {_META: attempt.meta()}
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / f"{attempt.name}.parquet"
            frame.to_parquet(path)
            repository.log_artifact(str(path), key.id)
        carried = self._carried_from(key)
        attempts = self.attempts(key)
        experiment = self._experiment()
        tags = {"attempts": str(len(attempts)),
                "configurations": str(sum(len(a.configurations) for a in attempts)),
                "data": key.describe(), "windows": json.dumps([list(w) for w in key.windows])}
        if carried:
            tags["carried_from"] = ",".join(carried)
        if attempt.fresh_reason:
            tags["fresh"] = f"{attempt.stamp} by {attempt.user}: {attempt.fresh_reason}"
        for name, value in tags.items():
            self.client.set_experiment_tag(experiment, f"ledger.{key.id}.{name}", value[:5000])


@dataclass(frozen=True)
class LedgerRun:
    """What a run records in the ledger besides its verdict: who and what it is, and a fresh start's reason."""

    ledger: TrialsLedger
    experiment: str
    run_id: str
    user: str
    git_commit: str
    smoke_test: bool
    fresh_reason: str = ""

    def prior(self, key: LedgerKey) -> PriorTrials:
        if self.fresh_reason:
            earlier = len([a for a in self.ledger.attempts(key) if a.run_id != self.run_id])
            return PriorTrials(note=f"fresh ledger ({self.fresh_reason}); {earlier} earlier attempt(s) set aside")
        return self.ledger.prior(key, self.run_id)

    def record(self, key: LedgerKey, configurations: list[str], returns: pd.DataFrame) -> None:
        self.ledger.record(key, Attempt(self.experiment, self.run_id, self.user, self.git_commit, self.smoke_test,
                                        configurations, returns, self.fresh_reason))
