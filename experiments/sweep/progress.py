"""The sweep's progress as events: a Tune callback that keeps each trial's row and reports every change.

It prints nothing. Each change is a `TrialUpdate` (experiments/records/run_events.py) carrying every row, so the
caller draws what it likes: `experiments.run` a live table on a terminal and plain lines when piped
(experiments/api/console_view.py), a side-by-side child writes the rows to its status file.
"""
from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from ray.tune import Callback

from algos.rllib.system_metrics import NOTE_KEY as SYSTEM_NOTE_KEY
from experiments.records.run_events import Line, OnEvent, TrialsEnded, TrialUpdate, ignore

# Where a TrialProgress unpickled by `Tuner.restore` (a resumed sweep) reports: the callback was pickled into the
# sweep's tuner.pkl without its listener (a function of the first process), and gets this one back.
_RESTORED_LISTENER: ContextVar[OnEvent | None] = ContextVar("restored_listener", default=None)


@contextmanager
def restored_progress_reports_to(on_event: OnEvent) -> Iterator[None]:
    """A TrialProgress that `Tuner.restore` unpickles inside this block reports to `on_event`."""
    token = _RESTORED_LISTENER.set(on_event)
    try:
        yield
    finally:
        _RESTORED_LISTENER.reset(token)


class TrialProgress(Callback):
    def __init__(self, on_event: OnEvent, search_keys: dict[str, str]) -> None:
        self.on_event = on_event
        self.search_keys = search_keys  # flattened Tune config key -> YAML dotted key
        self.rows: dict[str, dict[str, str]] = {}
        self.system_note_said = False  # what a trial's system metrics lack (no GPU metrics) is said once
        self.started = time.monotonic()

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles callbacks into its experiment state; the listener is a function of this process."""
        return {k: v for k, v in self.__dict__.items() if k != "on_event"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        # restored outside `restored_progress_reports_to`: it reports to nobody
        self.on_event = _RESTORED_LISTENER.get() or ignore
        self.started = time.monotonic()

    def _params(self, trial: Any) -> str:
        values = trial.evaluated_params or {}
        return " ".join(f"{self.search_keys.get(k, k).split('.')[-1]}={_fmt(v)}" for k, v in values.items())

    def _update(self, kind: str, trial: Any, **values: str) -> None:
        # The trial id (e.g. e5a84_00001) tells rows apart; Tune's full name is cut on a 120-column terminal.
        row = self.rows.setdefault(trial.trial_id, {"trial": trial.trial_id, "params": self._params(trial)})
        row.update({key: value for key, value in values.items() if value != ""})  # keep the last known value
        rows = {trial_id: dict(values) for trial_id, values in self.rows.items()}
        self.on_event(TrialUpdate(kind, trial.trial_id, rows, time.monotonic() - self.started))

    def _say(self, text: str) -> None:
        self.on_event(Line(text))

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._update("started", trial, status="RUNNING")

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        runners = result.get("env_runners", {})
        evaluation = result.get("evaluation", {}).get("env_runners", {})
        steps = runners.get("num_env_steps_sampled_lifetime", 0)
        elapsed = result.get("time_total_s") or 0
        # An iteration in which no episode ended reports no (or a nan) return: the row keeps the last one.
        self._update("result", trial, iter=str(result.get("training_iteration", "")),
                     **{"episode return": _fmt(runners.get("episode_return_mean")),
                        "eval return": _fmt(evaluation.get("episode_return_mean")),
                        "env steps": f"{int(steps):,}",
                        "steps/s": f"{steps / elapsed:,.0f}" if elapsed else ""})
        if result.get(SYSTEM_NOTE_KEY) and not self.system_note_said:  # the same on every trial of a machine: once
            self.system_note_said = True
            self._say(f"system metrics: {result[SYSTEM_NOTE_KEY]}")

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._update("finished", trial, status="TERMINATED")

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        """A lost worker, in one line (Tune's traceback goes to its log file): which checkpoint it resumes from."""
        self._update("restoring", trial, status="RESTORING")
        latest = trial.run_metadata.checkpoint_manager.latest_checkpoint_result
        start = (f"from {latest.checkpoint.path.rstrip('/').rsplit('/', 1)[-1]} (iteration "
                 f"{latest.metrics.get('training_iteration', '?')})" if latest
                 else "from the start (no checkpoint yet)")
        retries = "unlimited" if trial.max_failures < 0 else str(trial.max_failures)
        self._say(f"trial {trial.trial_id} failed ({error_line(trial)}): restored {start}, retry "
                  f"{trial.num_failures} of {retries}")

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._update("error", trial, status="ERROR")
        self._say(f"trial {trial.trial_id} failed ({error_line(trial)}) after {trial.num_failures} attempt(s): left "
                  "out of the scores; its traceback is in the run's tune.log")

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        self.on_event(TrialsEnded({trial_id: dict(values) for trial_id, values in self.rows.items()}))


def error_line(trial: Any) -> str:
    """The last line of a trial's error (e.g. "ActorDiedError: ... The actor died unexpectedly"), shortened."""
    try:  # the driver's copy first: the storage's may not be synced yet
        text = Path(trial.error_file).read_text() if trial.error_file else ""
    except OSError:
        text = ""
    lines = [line.strip() for line in (text or str(trial.get_error() or "")).splitlines() if line.strip()]
    return lines[-1][:200] if lines else "its error could not be recorded"


def _fmt(value: Any) -> str:
    """A table cell: blank for a missing or nan number, 4 significant digits for floats."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
