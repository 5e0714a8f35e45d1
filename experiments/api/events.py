"""What `api.plan` and `api.run` report while they work: typed events handed to the caller's `on_event`.

The API returns data and prints nothing. A caller that wants to follow a run passes `on_event`, a function of one
`RunEvent`; `experiments.run` passes `events_to_console(console)` (experiments/api/console_view.py), which draws
today's lines and live tables from them. Without it, a notebook's `api.run` is silent and reads the `RunResult`.

The callback is a parameter of `plan` and `run`, not a field of `RunOptions`: the options are data that travel to a
side-by-side child as JSON (experiments/api/child.py), and a function does not.

The events that rooms below `api/` send (a line, a spinner's text, a phase, a trial's row) are in
experiments/records/run_events.py, with `OnEvent`, `ignore` and the helpers' `say` and `show_status`; the run's own
are here.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from experiments.records.run_events import Line, Phase, Status, TrialsEnded, TrialUpdate

if TYPE_CHECKING:  # what the events carry; a dry run imports none of the judging modules
    import pandas as pd

    from experiments.api.result import Plan
    from experiments.results.scoring import GroupOutcome, Judgement


@dataclass(frozen=True)
class Planned:
    """The run's plan, checked, before anything trains; `resolved`: what `--dry-run` shows, with the Ray cluster and the
    resolved experiment file."""

    plan: Plan
    resolved: bool = False


@dataclass(frozen=True)
class Fault:
    """The run ended on a fault outside it (docs/faults.md): the line, the log file with the whole error chain, and
    the command that resumes the sweep (None when there is no sweep to resume)."""

    line: str
    log: Path | None = None
    resume: str | None = None


@dataclass(frozen=True)
class Partial:
    """What is missing from the plan before any group is judged: failed trials, groups with no scored trial."""

    lines: tuple[str, ...]


@dataclass(frozen=True)
class GroupJudged:
    """A group's outcome (its verdict or out-of-sample report, its ensemble); `single`: the run's only group."""

    group: str
    outcome: GroupOutcome
    single: bool


@dataclass(frozen=True)
class GroupsJudged:
    """Every group judged: with several verdicts, the command shows one table of them."""

    judgement: Judgement
    group_by: str


@dataclass(frozen=True)
class Table:
    """A table of text cells (a listing's placement, how each of its experiments ended)."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    right: tuple[str, ...] = ()  # the columns aligned right


@dataclass(frozen=True)
class Frame:
    """A data frame of results (a side-by-side experiment's out-of-sample evaluation), rows named in `first_column`."""

    frame: pd.DataFrame
    title: str
    first_column: str


@dataclass(frozen=True)
class ChildProgress:
    """One experiment of a side-by-side run, as its status file says: its phase and its trials' rows."""

    name: str
    phase: str
    rows: tuple[Any, ...]  # dicts of TRIAL_COLUMNS


@dataclass(frozen=True)
class ListingProgress:
    """The side-by-side run's experiments when they start (`stage` start), at each poll and when all ended,
    `seconds` after they started."""

    stage: str  # start | poll | end
    children: tuple[ChildProgress, ...]
    seconds: float


RunEvent = (Line | Status | Phase | TrialUpdate | TrialsEnded | Planned | Fault | Partial | GroupJudged | GroupsJudged
            | Table | Frame | ListingProgress)
