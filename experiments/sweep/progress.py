"""The sweep's progress in the terminal: a live table on a TTY, plain lines when output is piped.

Piped (CI, `| tee`, nohup), a live display would only appear at the end, after minutes of silence: there
each trial gets a line when it starts and ends, and one with its latest numbers at most every
`PIPED_INTERVAL_S` seconds while it trains; the table is printed once at the end.
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from ray.tune import Callback
from rich.console import Console
from rich.live import Live
from rich.table import Table

from algos.system_metrics import NOTE_KEY as SYSTEM_NOTE_KEY
from experiments.shell import terminal_console
from experiments.sweep.run_status import StatusFile

COLUMNS = ("trial", "status", "params", "iter", "episode return", "eval return", "env steps", "steps/s")
PIPED_INTERVAL_S = 30.0


class TrialProgress(Callback):
    def __init__(self, console: Console, search_keys: dict[str, str], live: bool | None = None,
                 status: StatusFile | None = None) -> None:
        self.console = console
        self.status = status or StatusFile(None)  # a parent run's table reads the rows there
        self.search_keys = search_keys  # flattened Tune config key -> YAML dotted key
        self.is_live = console.is_terminal if live is None else live
        self.rows: dict[str, dict[str, str]] = {}
        self.last_line: dict[str, float] = {}  # trial id -> when its last plain line was printed
        self.system_note_said = False  # what a trial's system metrics lack (no GPU metrics) is printed once
        self.started = time.monotonic()
        self.live = self._new_live()

    def _new_live(self) -> Live | None:
        if not self.is_live:
            return None
        return Live(self._render(), console=self.console, refresh_per_second=2, transient=False)

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles callbacks into its experiment state; the live display holds locks."""
        return {k: v for k, v in self.__dict__.items() if k not in ("console", "live")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.console = terminal_console()
        self.live = self._new_live()

    def _params(self, trial: Any) -> str:
        values = trial.evaluated_params or {}
        return " ".join(f"{self.search_keys.get(k, k).split('.')[-1]}={_fmt(v)}" for k, v in values.items())

    def _render(self) -> Table:
        table = Table(title="Ray Tune sweep", expand=False)
        for column in COLUMNS:
            table.add_column(column, justify="left" if column in ("trial", "status", "params") else "right",
                             no_wrap=column == "trial")
        for row in self.rows.values():
            table.add_row(*(row.get(c, "") for c in COLUMNS))
        return table

    def _update(self, trial: Any, **values: str) -> dict[str, str]:
        # The trial id (e.g. e5a84_00001) tells rows apart; Tune's full name is cut on a 120-column terminal.
        row = self.rows.setdefault(trial.trial_id, {"trial": trial.trial_id, "params": self._params(trial)})
        row.update({key: value for key, value in values.items() if value != ""})  # keep the last known value
        self.status.rows(self.rows, force="status" in values)
        if self.live is not None:
            self.live.update(self._render())
        return row

    def _line(self, row: dict[str, str], event: str) -> None:
        """One plain progress line (piped output only)."""
        if self.live is not None:
            return
        minutes, seconds = divmod(int(time.monotonic() - self.started), 60)
        numbers = ", ".join(f"{column} {row[column]}" for column in COLUMNS[3:] if row.get(column))
        self.console.print(f"[{minutes:02d}:{seconds:02d}] trial {row['trial']} ({row['params']}) {event}"
                           + (f": {numbers}" if numbers else ""), markup=False, highlight=False)
        self.last_line[row["trial"]] = time.monotonic()

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        if self.live is not None and not self.live.is_started:
            self.live.start()
        self._line(self._update(trial, status="RUNNING"), "started")

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        runners = result.get("env_runners", {})
        evaluation = result.get("evaluation", {}).get("env_runners", {})
        steps = runners.get("num_env_steps_sampled_lifetime", 0)
        elapsed = result.get("time_total_s") or 0
        # An iteration in which no episode ended reports no (or a nan) return: the row keeps the last one.
        row = self._update(trial, iter=str(result.get("training_iteration", "")),
                           **{"episode return": _fmt(runners.get("episode_return_mean")),
                              "eval return": _fmt(evaluation.get("episode_return_mean")),
                              "env steps": f"{int(steps):,}",
                              "steps/s": f"{steps / elapsed:,.0f}" if elapsed else ""})
        if time.monotonic() - self.last_line.get(trial.trial_id, -math.inf) >= PIPED_INTERVAL_S:
            self._line(row, "training")
        if result.get(SYSTEM_NOTE_KEY) and not self.system_note_said:  # the same on every trial of a machine: once
            self.system_note_said = True
            self.console.print(f"system metrics: {result[SYSTEM_NOTE_KEY]}", markup=False, highlight=False)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._line(self._update(trial, status="TERMINATED"), "finished")

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        """A lost worker, in one line (Tune's traceback goes to its log file): which checkpoint it resumes from."""
        self._update(trial, status="RESTORING")
        latest = trial.run_metadata.checkpoint_manager.latest_checkpoint_result
        start = (f"from {latest.checkpoint.path.rstrip('/').rsplit('/', 1)[-1]} (iteration "
                 f"{latest.metrics.get('training_iteration', '?')})" if latest
                 else "from the start (no checkpoint yet)")
        retries = "unlimited" if trial.max_failures < 0 else str(trial.max_failures)
        self.console.print(f"trial {trial.trial_id} failed ({error_line(trial)}): restored {start}, retry "
                           f"{trial.num_failures} of {retries}", markup=False, highlight=False)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._update(trial, status="ERROR")
        self.console.print(f"trial {trial.trial_id} failed ({error_line(trial)}) after {trial.num_failures} "
                           "attempt(s): left out of the scores; its traceback is in the run's tune.log",
                           markup=False, highlight=False)

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        if self.live is None:
            self.console.print(self._render())  # piped: the table once, at the end
        self.stop()

    def stop(self) -> None:
        if self.live is not None and self.live.is_started:
            self.live.stop()


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
