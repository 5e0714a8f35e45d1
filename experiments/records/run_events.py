"""What a run reports while it goes, as data: the events every room can send up to whoever asked.

The API prints nothing (docs/api.md); what `experiments.run` shows comes from events like these, which the command
turns into lines and tables (experiments/api/console_view.py). They live here, below `sweep/` and `results/`, so the
Tune callback that follows the trials (experiments/sweep/progress.py) can send them too; the run's own events (its
plan, a group's verdict, a fault) are in experiments/api/events.py, with the union of all of them.

`OnEvent` and `ignore` are the one listener type and the one "nobody listens" for every room that reports events
(a run's, a paper session's, a benchmark's), so each says `OnEvent[ItsEvent]` and none defines its own. Helpers that
report in lines of text (starting Ray, registration, fetching data) take a `log` function, `say(on_event)`; scoring's
long steps take a `status` function, `show_status(on_event)`: what they report becomes `Line` and `Status` events.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

# The columns of a trial's row, in the sweep's table and in a side-by-side parent's (read from a status file).
TRIAL_COLUMNS = ("trial", "status", "params", "iter", "episode return", "eval return", "env steps", "steps/s")

Event = TypeVar("Event")
OnEvent = Callable[[Event], None]  # a caller's listener: a function of one event; bare, of any event


def ignore(event: object) -> None:
    """The listener of a caller that passed none: the events go nowhere."""


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


def say(on_event: OnEvent[Line], highlight: bool = True) -> Callable[[str], None]:
    """A `log` function for helpers that report in lines of text, rich markup as `console.print` takes it;
    `highlight`: a terminal colours the lines' numbers, paths and URLs, as `console.print` does by default."""
    return lambda text: on_event(Line(text, markup=True, highlight=highlight))


def show_status(on_event: OnEvent[Status]) -> Callable[[str | None], None]:
    """A `status` function for helpers with long steps: the step's text when it begins (a terminal shows a spinner),
    None when it ends."""
    return lambda text: on_event(Status(text))
