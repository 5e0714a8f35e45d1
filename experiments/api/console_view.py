"""How a terminal shows a run: the command's side of experiments/api/events.py.

`experiments.run` (and `experiments.retrain`, a side-by-side child, a study) hands `events_to_console(console)` to
`api.plan` and `api.run` as their `on_event`; the API calls it with each event and this draws what the command has
always printed: the plan, the sweep's trials, each group's verdict, the faults, a listing's tables.

Trials are shown live on a terminal. Piped (CI, `| tee`, nohup), a live display would only appear at the end, after
minutes of silence: there each trial gets a line when it starts and ends, and one with its latest numbers at most
every `PIPED_INTERVAL_S` seconds while it trains, and the table is printed once at the end. A side-by-side run's
table of experiments follows the same rule.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import yaml
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.status import Status as Spinner
from rich.table import Table as RichTable

from experiments.api.events import (
    ChildProgress,
    Fault,
    Frame,
    GroupJudged,
    GroupsJudged,
    ListingProgress,
    Partial,
    Planned,
    RunEvent,
    Table,
)
from experiments.api.result import Plan
from experiments.records.run_events import TRIAL_COLUMNS, Line, Phase, Status, TrialsEnded, TrialUpdate

PIPED_INTERVAL_S = 30.0


def events_to_console(console: Console) -> ConsoleView:
    """The `on_event` that prints a run on `console` as `experiments.run` does."""
    return ConsoleView(console)


class ConsoleView:
    """Draws each event on the console; `close` stops a live display or spinner left running by an interrupted run."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.trials = TrialTable(console)
        self.listing = ListingTable(console)
        self.spinner: Spinner | None = None
        self.handlers: dict[type, Callable[[Any], None]] = {
            Line: lambda e: console.print(e.text, markup=e.markup, highlight=e.highlight),
            Status: self._status, Phase: lambda e: None, TrialUpdate: self.trials.update,
            TrialsEnded: self.trials.end, Planned: lambda e: print_plan(console, e.plan, e.resolved),
            Fault: lambda e: print_fault(console, e), Partial: self._partial, GroupJudged: self._group,
            GroupsJudged: self._groups, Table: lambda e: console.print(rich_table(e)), Frame: self._frame,
            ListingProgress: self.listing.update,
        }

    def __call__(self, event: RunEvent) -> None:
        self.handlers[type(event)](event)

    def close(self) -> None:
        self._status(Status(None))
        self.trials.stop()
        self.listing.stop()

    def _status(self, event: Status) -> None:
        if self.spinner is not None:
            self.spinner.stop()
            self.spinner = None
        if event.text is not None:
            self.spinner = self.console.status(event.text)
            self.spinner.start()

    def _partial(self, event: Partial) -> None:
        from experiments.results.printing import print_partial

        print_partial(self.console, list(event.lines))

    def _group(self, event: GroupJudged) -> None:
        from experiments.results.printing import print_group

        print_group(self.console, event.group, event.outcome, event.single)

    def _groups(self, event: GroupsJudged) -> None:
        from experiments.results.printing import print_group_table

        print_group_table(self.console, event.judgement, event.group_by)

    def _frame(self, event: Frame) -> None:
        from experiments.results.printing import print_frame

        print_frame(self.console, event.frame, event.title, first_column=event.first_column)


def print_plan(console: Console, found: Plan, resolved: bool) -> None:
    """The plan as `--dry-run` prints it (`resolved`: with the Ray target and the resolved experiment file)."""
    exp = found.checked.exp
    console.print(f"[bold]{escape(exp.name)}[/bold]: {escape(exp.algorithm)} on {escape(exp.environment.env)} "
                  f"({exp.num_trials()} trial(s))")
    for line in found.lines:
        console.print(line, markup=False, highlight=False)
    if resolved:
        console.print(f"ray: {found.ray_target.note or 'a local Ray'}", markup=False, highlight=False)
        console.print("resolved experiment:")
        console.print(yaml.safe_dump(found.experiment, sort_keys=False), markup=False)


def print_fault(console: Console, fault: Fault) -> None:
    console.print(f"error: {fault.line}", markup=False, highlight=False)
    if fault.log is not None:
        console.print(f"  the whole error: {fault.log}", markup=False, highlight=False)
    if fault.resume is not None:
        console.print(f"  then continue the sweep with {fault.resume}", markup=False, highlight=False)


def rich_table(event: Table) -> RichTable:
    table = RichTable(title=escape(event.title))
    for column in event.columns:
        table.add_column(column, justify="right" if column in event.right else "left")
    for row in event.rows:
        table.add_row(*(escape(cell) for cell in row))
    return table


def clock(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"[{minutes:02d}:{rest:02d}]"


def trial_table(rows: Iterable[Mapping[str, str]]) -> RichTable:
    table = RichTable(title="Ray Tune sweep", expand=False)
    for column in TRIAL_COLUMNS:
        table.add_column(column, justify="left" if column in ("trial", "status", "params") else "right",
                         no_wrap=column == "trial")
    for row in rows:
        table.add_row(*(row.get(c, "") for c in TRIAL_COLUMNS))
    return table


class TrialTable:
    """The sweep's trials: live on a terminal, else lines (see the module docstring)."""

    def __init__(self, console: Console, live: bool | None = None) -> None:
        self.console = console
        self.is_live = console.is_terminal if live is None else live
        self.live: Live | None = None
        self.last_line: dict[str, float] = {}  # trial id -> when (seconds into the sweep) its last line was printed

    def update(self, event: TrialUpdate) -> None:
        if self.is_live:
            if self.live is None:
                self.live = Live(trial_table(event.rows.values()), console=self.console, refresh_per_second=2,
                                 transient=False)
                self.live.start()
            self.live.update(trial_table(event.rows.values()))
            return
        what = {"started": "started", "finished": "finished", "result": "training"}.get(event.kind)
        due = event.seconds - self.last_line.get(event.trial, -math.inf) >= PIPED_INTERVAL_S
        if what is not None and (event.kind != "result" or due):
            row = event.rows[event.trial]
            numbers = ", ".join(f"{column} {row[column]}" for column in TRIAL_COLUMNS[3:] if row.get(column))
            self.console.print(f"{clock(event.seconds)} trial {row['trial']} ({row['params']}) {what}"
                               + (f": {numbers}" if numbers else ""), markup=False, highlight=False)
            self.last_line[event.trial] = event.seconds

    def end(self, event: TrialsEnded) -> None:
        if not self.is_live:
            self.console.print(trial_table(event.rows.values()))  # piped: the table once, at the end
        self.stop()
        self.last_line = {}

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


def listing_table(children: Iterable[ChildProgress]) -> RichTable:
    table = RichTable(title="experiments side by side", expand=False)
    for column in ("experiment", "phase", *TRIAL_COLUMNS):
        table.add_column(column, justify="left" if column in ("experiment", "phase", "trial", "status", "params")
                         else "right", no_wrap=column in ("experiment", "trial"))
    for child in children:
        for index, row in enumerate(child.rows or ({},)):
            head = (escape(child.name), escape(child.phase)) if index == 0 else ("", "")
            table.add_row(*head, *(escape(row.get(column, "")) for column in TRIAL_COLUMNS))
    return table


class ListingTable:
    """A side-by-side run's experiments: one live table on a terminal; piped, a line when an experiment's phase or a
    trial's status changes, each experiment's latest numbers at most every PIPED_INTERVAL_S, the table at the end."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live: Live | None = None
        self.seen: dict[tuple[str, str], str] = {}
        self.last_numbers = -math.inf

    def update(self, event: ListingProgress) -> None:
        if event.stage == "start" and self.console.is_terminal:
            self.live = Live(listing_table(event.children), console=self.console, refresh_per_second=2)
            self.live.start()
        elif event.stage == "poll" and self.live is not None:
            self.live.update(listing_table(event.children))
        elif event.stage == "poll":
            self._say_changes(event)
        elif event.stage == "end":
            if self.live is None:
                self.console.print(listing_table(event.children))
            self.stop()

    def _say_changes(self, event: ListingProgress) -> None:
        periodic = event.seconds - self.last_numbers >= PIPED_INTERVAL_S
        for child in event.children:
            if self.seen.get((child.name, "")) != child.phase:
                self.seen[(child.name, "")] = child.phase
                self._say(event.seconds, f"{child.name}: {child.phase}")
            for row in child.rows:
                key = (child.name, row.get("trial", ""))
                if self.seen.get(key) != row.get("status"):
                    self.seen[key] = row.get("status", "")
                    params = f" ({row['params']})" if row.get("params") else ""
                    self._say(event.seconds, f"{child.name}: trial {key[1]}{params} {row.get('status', '').lower()}")
                elif periodic and row.get("status") == "RUNNING":
                    numbers = ", ".join(f"{c} {row[c]}" for c in TRIAL_COLUMNS[3:] if row.get(c))
                    self._say(event.seconds, f"{child.name}: trial {key[1]} training: {numbers}")
        if periodic:
            self.last_numbers = event.seconds

    def _say(self, seconds: float, text: str) -> None:
        self.console.print(f"{clock(seconds)} {text}", markup=False, highlight=False)

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
