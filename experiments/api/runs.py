"""`plan` and `run`: one experiment file (or a listing of several) from checks to a `RunResult`, in this process.

Both take the file, its --set overrides and a `RunOptions`; `experiments.run` is a thin shell that parses its flags
into those and prints. A listing (a file with `experiments:`) runs side by side, each experiment in its own process
(experiments/api/side_by_side.py), and its result carries the exit code only.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from rich.console import Console
from rich.markup import escape

from envs import work_counts
from envs.errors import InputError
from experiments.api.options import RunOptions, RunRequest
from experiments.api.preflight import Checked, preflight
from experiments.api.result import RunResult
from experiments.config.files import Override, parse_overrides
from experiments.config.listing import is_listing
from experiments.plan import numerics
from experiments.plan.cluster import RayTarget, leftover_address_file, resolve_ray_target
from experiments.plan.run_clock import RunClock
from experiments.records.exits import ExitCode
from experiments.shell import terminal_console

DEFAULT_OPTIONS = RunOptions()


@dataclass
class Plan:
    """What `--dry-run` prints: the checked experiment (its resolved file, hardware plan, search space and RLlib
    param space) and the Ray cluster it would run on."""

    checked: Checked
    ray_target: RayTarget
    lines: list[str]

    @property
    def experiment(self) -> dict:
        """The resolved experiment file, as it will run."""
        return self.checked.exp.model_dump(mode="json")


def plan(conf: str | Path, overrides: Sequence[str | Override] = (), options: RunOptions = DEFAULT_OPTIONS,
         console: Console | None = None, fetch: bool = False) -> Plan:
    """Every check that needs no Ray, and the plan; `fetch` makes missing data local (a run does), else it is
    reported. An InputError names the file or key and the fix."""
    console = console or terminal_console()
    conf = Path(conf)
    if is_listing(conf):
        raise InputError(f"{conf}: lists experiments; plan each listed file, or run the listing with "
                         "python -m experiments.run")
    ray_target = resolve_ray_target(options.address, os.environ, leftover_address_file())
    checked = preflight(conf, parse_overrides(overrides), options.smoke_test, options.storage, options.output,
                        fetch=fetch, console=console, hardware=options.hardware)
    lines = [*checked.lines, numerics.describe(), f"storage: {checked.storage.uri} ({checked.storage.source})"]
    return Plan(checked, ray_target, lines)


def print_plan(console: Console, found: Plan, resolved: bool) -> None:
    exp = found.checked.exp
    console.print(f"[bold]{escape(exp.name)}[/bold]: {escape(exp.algorithm)} on {escape(exp.environment.env)} "
                  f"({exp.num_trials()} trial(s))")
    for line in found.lines:
        console.print(line, markup=False, highlight=False)
    if resolved:
        console.print(f"ray: {found.ray_target.note or 'a local Ray'}", markup=False, highlight=False)
        console.print("resolved experiment:")
        console.print(yaml.safe_dump(found.experiment, sort_keys=False), markup=False)


def run(conf: str | Path, overrides: Sequence[str | Override] = (), options: RunOptions = DEFAULT_OPTIONS,
        console: Console | None = None, clock: RunClock | None = None) -> RunResult:
    """Check, sweep with Tune, track in MLflow, score out of sample, judge and register: the main job. Returns the
    verdict, trials, models, MLflow ids, timings and exit code; bad input raises InputError before anything is
    written."""
    console = console or terminal_console()
    clock = clock or RunClock()
    start = work_counts.snapshot()
    conf = Path(conf)
    if options.cross_cpu and not numerics.is_pinned():
        raise InputError("cross_cpu: the kernels are pinned before numpy, torch or MKL load: run python -m "
                         "experiments.run ... --cross-cpu, or set RLPLATFORM_CROSS_CPU=1 before starting Python")
    if is_listing(conf):
        from experiments.api.side_by_side import run_listing

        parsed = parse_overrides(overrides)
        code = run_listing(RunRequest(conf, parsed, options, clock), console)
        return RunResult(conf.stem, ExitCode(code), timings=clock.timings(), work=work_counts.since(start))
    parsed = parse_overrides(overrides)
    found = plan(conf, parsed, options, console, fetch=True)
    print_plan(console, found, resolved=False)
    clock.lap("plan")
    from experiments.api.pipeline import run_experiment

    result = run_experiment(found.checked, found.ray_target, RunRequest(conf, parsed, options, clock), console)
    result.timings, result.work = clock.timings(), work_counts.since(start)
    clock.stop()
    return result
