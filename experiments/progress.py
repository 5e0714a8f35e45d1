"""A live terminal table of the sweep: one row per trial, refreshed on every result."""
from __future__ import annotations

from typing import Any

from ray.tune import Callback
from rich.console import Console
from rich.live import Live
from rich.table import Table

COLUMNS = ("trial", "status", "params", "iter", "episode return", "eval return", "env steps", "steps/s")


class LiveTrialTable(Callback):
    def __init__(self, console: Console, search_keys: dict[str, str]) -> None:
        self.console = console
        self.search_keys = search_keys  # flattened Tune config key -> YAML dotted key
        self.rows: dict[str, dict[str, str]] = {}
        self.live = self._new_live()

    def _new_live(self) -> Live:
        return Live(self._render(), console=self.console, refresh_per_second=2, transient=False)

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles callbacks into its experiment state; the live display holds locks."""
        return {k: v for k, v in self.__dict__.items() if k not in ("console", "live")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.console = Console()
        self.live = self._new_live()

    def _params(self, trial: Any) -> str:
        values = trial.evaluated_params or {}
        return " ".join(f"{self.search_keys.get(k, k).split('.')[-1]}={_fmt(v)}" for k, v in values.items())

    def _render(self) -> Table:
        table = Table(title="Ray Tune sweep", expand=False)
        for column in COLUMNS:
            table.add_column(column, justify="left" if column in ("trial", "status", "params") else "right")
        for row in self.rows.values():
            table.add_row(*(row.get(c, "") for c in COLUMNS))
        return table

    def _update(self, trial: Any, **values: str) -> None:
        row = self.rows.setdefault(trial.trial_id, {"trial": str(trial), "params": self._params(trial)})
        row.update(values)
        self.live.update(self._render())

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        if not self.live.is_started:
            self.live.start()
        self._update(trial, status="RUNNING")

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        runners = result.get("env_runners", {})
        evaluation = result.get("evaluation", {}).get("env_runners", {})
        steps = runners.get("num_env_steps_sampled_lifetime", 0)
        elapsed = result.get("time_total_s") or 0
        self._update(trial, iter=str(result.get("training_iteration", "")),
                     **{"episode return": _fmt(runners.get("episode_return_mean")),
                        "eval return": _fmt(evaluation.get("episode_return_mean")),
                        "env steps": f"{int(steps):,}",
                        "steps/s": f"{steps / elapsed:,.0f}" if elapsed else ""})

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._update(trial, status="TERMINATED")

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._update(trial, status="ERROR")

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        self.stop()

    def stop(self) -> None:
        if self.live.is_started:
            self.live.stop()


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
