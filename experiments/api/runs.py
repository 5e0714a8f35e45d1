"""`plan` and `run`: one experiment file (or a listing of several) from checks to a `RunResult`, in this process.

Both take the file, its --set overrides and a `RunOptions`, and print nothing: what they have to say goes to
`on_event` as typed events (experiments/api/events.py), and `experiments.run` is a thin shell that parses its flags
into those and shows the events (experiments/api/console_view.py). A listing (a file with `experiments:`) runs side by
side, each experiment in its own process (experiments/api/side_by_side.py), and its result carries the exit code only.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from envs import work_counts
from envs.errors import InputError
from experiments.api.events import Planned, RunEvent
from experiments.api.options import RunOptions, RunRequest
from experiments.api.preflight import preflight
from experiments.api.result import Plan, RunResult
from experiments.config.files import Override, parse_overrides
from experiments.config.listing import is_listing
from experiments.plan import numerics
from experiments.plan.cluster import leftover_address_file, resolve_ray_target
from experiments.plan.run_clock import RunClock
from experiments.records.exits import ExitCode
from experiments.records.run_events import OnEvent, ignore

DEFAULT_OPTIONS = RunOptions()


def plan(conf: str | Path, overrides: Sequence[str | Override] = (), options: RunOptions = DEFAULT_OPTIONS, *,
         on_event: OnEvent[RunEvent] | None = None, fetch: bool = False) -> Plan:
    """Every check that needs no Ray, and the plan; `fetch` makes missing data local (a run does), else it is
    reported. An InputError names the file or key and the fix."""
    conf = Path(conf)
    if is_listing(conf):
        raise InputError(f"{conf}: lists experiments; plan each listed file, or run the listing with "
                         "python -m experiments.run")
    ray_target = resolve_ray_target(options.address, os.environ, leftover_address_file())
    checked = preflight(conf, parse_overrides(overrides), options, on_event, fetch=fetch)
    lines = [*checked.lines, numerics.describe(), f"storage: {checked.storage.uri} ({checked.storage.source})"]
    return Plan(checked, ray_target, lines)


def dry_run(conf: str | Path, overrides: Sequence[str | Override] = (), options: RunOptions = DEFAULT_OPTIONS, *,
            on_event: OnEvent[RunEvent] | None = None) -> ExitCode:
    """What `experiments.run --dry-run` does, without Ray: a listing's experiments checked with their shares of the
    machine and placed; else the experiment's plan, handed to `on_event` with its resolved file (`Planned`)."""
    on_event = on_event or ignore
    conf = Path(conf)
    if is_listing(conf):
        from experiments.api.side_by_side import run_listing

        return run_listing(RunRequest(conf, parse_overrides(overrides), options, RunClock()), on_event, dry_run=True)
    on_event(Planned(plan(conf, overrides, options, on_event=on_event), resolved=True))
    return ExitCode.OK


def run(conf: str | Path, overrides: Sequence[str | Override] = (), options: RunOptions = DEFAULT_OPTIONS, *,
        on_event: OnEvent[RunEvent] | None = None, clock: RunClock | None = None) -> RunResult:
    """Check, sweep with Tune, track in MLflow, score out of sample, judge and register: the main job. Returns the
    verdict, trials, models, MLflow ids, timings and exit code; bad input raises InputError before anything is
    written. Progress (the plan, each trial, each verdict) goes to `on_event`; without it, nothing is printed."""
    on_event = on_event or ignore
    clock = clock or RunClock()
    start = work_counts.snapshot()
    conf = Path(conf)
    if options.cross_cpu and not numerics.is_pinned():
        raise InputError("cross_cpu: the kernels are pinned before numpy, torch or MKL load: run python -m "
                         "experiments.run ... --cross-cpu, or set RLPLATFORM_CROSS_CPU=1 before starting Python")
    parsed = parse_overrides(overrides)
    request = RunRequest(conf, parsed, options, clock)
    if is_listing(conf):
        from experiments.api.side_by_side import run_listing

        code = run_listing(request, on_event)
        return RunResult(conf.stem, ExitCode(code), timings=clock.timings(), work=work_counts.since(start))
    found = plan(conf, parsed, options, on_event=on_event, fetch=True)
    on_event(Planned(found))
    clock.lap("plan")
    from experiments.api.pipeline import run_experiment

    result = run_experiment(found.checked, found.ray_target, request, on_event)
    result.timings, result.work = clock.timings(), work_counts.since(start)
    clock.stop()
    return result
