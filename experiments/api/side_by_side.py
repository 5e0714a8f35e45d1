"""Several experiments trained side by side in one Ray cluster, from one command and one listing file.

`python -m experiments.run conf/agents.yaml` reads the listing (experiments/config/listing.py), gives each listed
experiment its share of the machine (experiments/plan/placement.py) and checks every one of them exactly as a
single run's `--dry-run` does, so a mistake in any file stops the run before anything trains. Then it starts
one Ray cluster (one dashboard) and runs each experiment in its own process (experiments/api/child.py), which runs
`api.run` with the typed options it is handed on stdin (this cluster's address, its share of the hardware):

* each keeps its own hyperparameters, stop rules, MLflow parent run, evaluation and registered model;
* its MLflow runs carry the tag `run_group=<listing>-<time>`, the same for all of them;
* one process per experiment isolates failures: an experiment that crashes or is killed (out of memory) is
  reported, its MLflow runs are closed as FAILED, the others go on, and the exit code says the run was
  partial (3);
* the children write their progress to status files (experiments/sweep/run_status.py), and this process reports
  every experiment's trials from them (`ListingProgress` events: `experiments.run` draws one table); each child's
  full output is in `<output>/<listing>/<time>/<name>.log`.

Like `api.run`, it prints nothing: its plan, progress and report are events for `on_event`.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from rich.markup import escape

from envs.errors import InputError
from experiments.api.child_process import start
from experiments.api.events import ChildProgress, Frame, ListingProgress, RunEvent, Table
from experiments.api.options import RunOptions, RunRequest
from experiments.api.preflight import Checked, load, preflight
from experiments.config.listing import Listing, read_listing
from experiments.hardware import HardwarePreset, select_preset
from experiments.hardware.plan import duration
from experiments.plan.cluster import leftover_address_file, resolve_ray_target
from experiments.plan.placement import Share, share_machine
from experiments.records.exits import ExitCode
from experiments.records.run_events import Line, OnEvent, ignore, say
from experiments.shell import python_command
from experiments.sweep.run_status import read_status

POLL_S = 1.0


@dataclass
class Child:
    """One listed experiment: its checks, its share of the machine and, once started, its process."""

    path: Path  # the experiment file
    checked: Checked
    share: Share
    overrides: list[str]
    log: Path | None = None
    status_path: Path | None = None
    process: subprocess.Popen | None = None
    status: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.checked.exp.name

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def phase(self) -> str:
        code = self.returncode
        if code is None:
            return self.status.get("phase", "starting")
        if code == 0:
            return "done"
        return f"failed (exit {code})" if code > 0 else f"killed (signal {-code})"

    def progress(self) -> ChildProgress:
        return ChildProgress(self.name, self.phase(), tuple(self.status.get("rows") or ()))


def refuse_single_run_flags(request: RunRequest) -> None:
    """Flags that belong to one experiment, not to a listing."""
    conf, options = request.conf, request.options
    if request.overrides:
        raise InputError(f"{conf}: --set applies to one experiment: give each listed experiment its own "
                         "with `- {file: NAME.yaml, set: [KEY=VALUE]}` in the listing")
    if options.fresh_ledger is not None:
        raise InputError(f"{conf}: --fresh-ledger starts one data set's trials ledger afresh: run python -m "
                         "experiments.run <its file> --fresh-ledger REASON")
    if options.resume:
        raise InputError(f"{conf}: --resume continues one experiment: run python -m experiments.run "
                         "<its file> --resume (same --output)")
    if options.status_file or options.run_group:
        raise InputError(f"{conf}: a listing cannot be started by another listing's run: list it in the "
                         "outer listing instead")


def concurrency_override(conf: Path, overrides: list[str], smoke_test: bool, share: Share) -> list[str]:
    """A --set that holds the experiment to its share's trials at once (GPU fractions), unless it asks for fewer."""
    if share.max_trials is None:
        return []
    own = load(conf, overrides, smoke_test).tune.max_concurrent_trials
    return [] if own is not None and own <= share.max_trials else [f"tune.max_concurrent_trials={share.max_trials}"]


def check_all(listing: Listing, preset: HardwarePreset, reason: str, request: RunRequest, dry_run: bool,
              on_event: OnEvent[RunEvent]) -> list[Child]:
    """Every listed experiment checked with its share of `preset`'s machine; names must differ (they name the
    storage folders and MLflow experiments)."""
    shares = share_machine(preset, len(listing.entries))
    options = request.options
    children, seen = [], {}
    for index, (entry, share) in enumerate(zip(listing.entries, shares, strict=True)):
        overrides = [*entry.overrides, *concurrency_override(entry.path, list(entry.overrides), options.smoke_test,
                                                             share)]
        checked = preflight(entry.path, overrides, options, on_event, fetch=not dry_run,
                            preset=(share.preset, f"{reason}: agent {index + 1} of {len(shares)} on {preset.name}"))
        if checked.exp.name in seen:
            raise InputError(f"{request.conf}: {entry.path.name} and {seen[checked.exp.name]} both run experiment "
                             f"'{checked.exp.name}': list it once, or rename one with set: [name=OTHER]")
        seen[checked.exp.name] = entry.path.name
        children.append(Child(entry.path, checked, share, overrides))
    return children


def placement(listing: Listing, children: list[Child], preset_name: str, price: float | None) -> list[Table | Line]:
    """Who gets which part of the machine, and the time/cost estimate of the whole run (they run at once)."""
    rows = tuple((child.name, f"{child.checked.exp.algorithm} on {child.checked.exp.environment.env}",
                  str(child.checked.exp.num_trials()), child.share.describe(),
                  str(child.checked.plan.max_concurrent_trials), child.checked.estimate.short()) for child in children)
    table = Table(f"{listing.name}: {len(children)} experiments side by side on {preset_name}",
                  ("experiment", "algorithm on env", "trials", "share of the machine", "at once", "estimate"), rows,
                  right=("trials", "at once", "estimate"))
    hours = max(child.checked.estimate.hours for child in children)
    cost = f", ${hours * price:,.2f}" if price is not None else ", cost unknown (no price in the preset)"
    return [table, Line(f"estimate: {duration(hours * 3600)} for the longest experiment (they run at the same "
                        f"time){cost}")]


def run_listing(request: RunRequest, on_event: OnEvent[RunEvent] | None = None, dry_run: bool = False) -> ExitCode:
    """Check every listed experiment, then (unless `dry_run`) train them side by side; returns the exit code."""
    on_event = on_event or ignore
    refuse_single_run_flags(request)
    options = request.options
    listing = read_listing(request.conf)
    ray_target = resolve_ray_target(options.address, os.environ, leftover_address_file())
    preset, reason = select_preset(options.hardware, os.environ, listing.hardware)
    children = check_all(listing, preset, reason, request, dry_run, on_event)
    for event in placement(listing, children, preset.name, preset.price_per_hour_usd):
        on_event(event)
    if dry_run:
        for child in children:
            on_event(Line(f"[bold]{escape(child.name)}[/bold] ({child.checked.exp.num_trials()} trial(s))",
                          markup=True, highlight=True))
            for line in child.checked.lines:
                on_event(Line(f"  {line}"))
        on_event(Line(f"ray: {ray_target.note or 'a local Ray'}"))
        return ExitCode.OK
    return train_side_by_side(listing, children, ray_target, options, on_event)


def train_side_by_side(listing: Listing, children: list[Child], ray_target: Any, options: RunOptions,
                       on_event: OnEvent[RunEvent]) -> ExitCode:
    import ray

    from experiments.plan.local_ray import start_ray
    from experiments.tracking.runs import make_client, open_experiment

    stamp = time.strftime("%Y%m%d-%H%M%S")
    group, folder = f"{listing.name}-{stamp}", options.output / listing.name / stamp
    (folder / "hardware").mkdir(parents=True, exist_ok=True)
    for child in children:  # one process creates the MLflow stores and experiments, so no child races another
        uri = child.checked.exp.tracking_uri()
        open_experiment(make_client(uri), child.checked.exp.tracking.experiment_name or child.name, uri)
    started = start_ray(ray_target, options.local_ray(), say(on_event, highlight=False))
    address = ray.get_runtime_context().gcs_address if started else ray_target.address
    interrupted = False
    try:
        for child in children:
            start_child(child, folder, address, group, options)
        on_event(Line(f"{len(children)} experiments started; their runs carry the MLflow tag run_group={group}; "
                      f"logs in {folder}"))
        interrupted = watch(children, on_event)
    finally:
        for child in children:
            if child.process is not None and child.process.poll() is None:
                child.process.wait()
        if started:
            ray.shutdown()
    for child in children:
        child.status = read_status(child.status_path)
        close_runs_of_dead_child(child)
    report(children, on_event)
    return exit_code(children, interrupted)


def start_child(child: Child, folder: Path, address: str, group: str, options: RunOptions) -> None:
    """The child's own process, running `api.run` on this cluster with its share of the machine: its file,
    overrides and typed options go to experiments/api/child.py on stdin, not as a command line."""
    share_file = folder / "hardware" / f"{child.name}.yaml"
    share_file.write_text(yaml.safe_dump(child.share.preset.model_dump(mode="json"), sort_keys=False))
    child.log, child.status_path = folder / f"{child.name}.log", folder / f"{child.name}.status.json"
    child_options = RunOptions(smoke_test=options.smoke_test, hardware=str(share_file), address=address,
                               storage=options.storage, output=options.output, run_group=group,
                               status_file=child.status_path)
    with child.log.open("w") as log:
        child.process = start(child.path, child.overrides, child_options, log)


def watch(children: list[Child], on_event: OnEvent[RunEvent]) -> bool:
    """Report every experiment's trials until all have ended; True when the user interrupted. Ctrl-C in the
    terminal reaches the children too (they stop their sweeps and save them); this process then waits for them."""
    started, interrupted = time.monotonic(), False

    def progress(stage: str) -> ListingProgress:
        return ListingProgress(stage, tuple(child.progress() for child in children), time.monotonic() - started)

    on_event(progress("start"))
    while any(child.returncode is None for child in children):
        try:
            time.sleep(POLL_S)
        except KeyboardInterrupt:
            interrupted = True
            for child in children:  # a Ctrl-C sent to this process alone (kill -INT) reaches them too
                if child.returncode is None:
                    child.process.send_signal(signal.SIGINT)
        for child in children:
            child.status = read_status(child.status_path) or child.status
        on_event(progress("poll"))
    on_event(progress("end"))
    return interrupted


def close_runs_of_dead_child(child: Child) -> None:
    """A child killed before it could close its MLflow runs leaves them RUNNING: mark them FAILED."""
    from experiments.tracking.runs import close_open_children, make_client

    run_id = child.status.get("parent_run_id")
    if child.returncode in (0, None) or not run_id:
        return
    client = make_client(child.status["tracking_uri"])
    if client.get_run(run_id).info.status == "RUNNING":
        close_open_children(client, child.status["experiment_id"], run_id, "FAILED")
        client.set_terminated(run_id, status="FAILED")


def report(children: list[Child], on_event: OnEvent[RunEvent]) -> None:
    """How each experiment ended, its MLflow run and log, then each one's out-of-sample evaluation."""
    on_event(Table("how each experiment ended", ("experiment", "ended", "MLflow run", "log"),
                   tuple((child.name, child.phase(), child.status.get("parent_run_id", "-"), str(child.log))
                         for child in children)))
    for child in children:
        for path in child.status.get("evaluations", []):
            on_event(Frame(pd.read_csv(path, index_col=0), f"{child.name}: {Path(path).parent.name} (out of sample)",
                           "strategy"))
        for path in child.status.get("verdicts", []):
            on_event(Line(f"{child.name}: " + Path(path).read_text().strip().replace("\n", "\n  ")))
        if child.returncode not in (0, None):
            on_event(Line(f"{child.name} failed; its output: {child.log} (rerun it alone: {python_command()} -m "
                          f"experiments.run {child.path})"))
    for line in ui_commands(children):
        on_event(Line(line))


def ui_commands(children: list[Child]) -> list[str]:
    """The MLflow UI command for the runs, per tracking store (each experiment's page), as a single run ends."""
    from experiments.tracking.runs import ui_lines

    stores: dict[str, list[tuple[str, str]]] = {}
    for child in children:
        status = child.status
        if status.get("parent_run_id") and status.get("experiment_id") and status.get("tracking_uri"):
            stores.setdefault(status["tracking_uri"], []).append(
                (f"{child.name}: MLflow run {status['parent_run_id']}", status["experiment_id"]))
    return [line for uri, runs in stores.items() for line in ui_lines(uri, runs)]


def exit_code(children: list[Child], interrupted: bool) -> ExitCode:
    """0 all finished, 3 partial, 1 none finished, 130 interrupted."""
    if interrupted:
        return ExitCode.INTERRUPTED
    finished = sum(child.returncode == 0 for child in children)
    return ExitCode.OK if finished == len(children) else ExitCode.PARTIAL if finished else ExitCode.FAILED
