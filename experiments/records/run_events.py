"""What a run reports while it goes, as data: the events every room can send up to whoever asked.

The API prints nothing (docs/api.md); what `experiments.run` shows comes from events like these, which the command
turns into lines and tables (experiments/api/console_view.py). They live here, below `sweep/` and `results/`, so the
Tune callback that follows the trials (experiments/sweep/progress.py) can send them too; the run's own events (its
plan, a group's verdict, a fault) are in experiments/api/events.py, with the union of all of them.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# The columns of a trial's row, in the sweep's table and in a side-by-side parent's (read from a status file).
TRIAL_COLUMNS = ("trial", "status", "params", "iter", "episode return", "eval return", "env steps", "steps/s")


@dataclass(frozen=True)
class Line:
    """One line of text. `markup`: the text is rich markup ([yellow]...[/yellow], as registration writes its
    refusals); `highlight`: a terminal colours its numbers and paths. `plain` is the text without markup."""

    text: str
    markup: bool = False
    highlight: bool = False

    @property
    def plain(self) -> str:
        if not self.markup:
            return self.text
        from rich.text import Text

        return Text.from_markup(self.text).plain


@dataclass(frozen=True)
class Status:
    """A long step begins (`text`) or ends (None): a terminal shows a spinner meanwhile."""

    text: str | None


@dataclass(frozen=True)
class Phase:
    """The run entered a phase (starting, training, scoring, done), with what it knows by then (MLflow ids, the
    evaluation files, timings): what a side-by-side parent reads from its child's status file."""

    name: str
    fields: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TrialUpdate:
    """A trial started, reported a result, finished, is restored after a lost worker or failed for good (`kind`),
    `seconds` into the sweep; `rows` is every trial's row so far (TRIAL_COLUMNS: the last known value of each)."""

    kind: str  # started | result | finished | restoring | error
    trial: str
    rows: Mapping[str, Mapping[str, str]]
    seconds: float


@dataclass(frozen=True)
class TrialsEnded:
    """The sweep ended: every trial's last row."""

    rows: Mapping[str, Mapping[str, str]]
