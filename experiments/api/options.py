"""How to run an experiment, as one typed object: what `experiments.run`'s flags say, built once by the command
layer (or by a notebook) and read by every step below it. No argparse namespace travels past the command."""
from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from envs.errors import InputError
from experiments.config.files import Override
from experiments.plan.local_ray import LOOPBACK, LocalRay
from experiments.plan.run_clock import RunClock
from experiments.shell import python_command


@dataclass(frozen=True)
class RunOptions:
    smoke_test: bool = False           # the same pipeline with 2 trials x 2 iterations
    resume: bool = False               # continue the last interrupted sweep of this experiment (same output)
    hardware: str | None = None        # preset name or YAML path; else GPU_PROFILE, the file, detection
    address: str | None = None         # a Ray cluster to join: HOST:PORT, ray://HOST:PORT, auto or local
    storage: str | None = None         # Tune results, checkpoints and the resume file: a folder or s3://...
    output: Path = Path("runs")        # evaluation files, and Tune results unless `storage` says otherwise
    fresh_ledger: str | None = None    # the reason a fresh trials ledger starts for this data and these windows
    cross_cpu: bool = False            # the same numbers on any x86-64 CPU (pinned kernels, one thread per op)
    dashboard: bool = True             # start the Ray dashboard
    dashboard_host: str = LOOPBACK     # its interface: this machine only unless asked otherwise
    dashboard_port: int | None = None  # default 8265, or the next free one
    ray_metrics: bool = False          # let a local Ray export its Prometheus metrics
    run_group: str | None = None       # tag the MLflow runs with run_group=NAME (set by a side-by-side run)
    status_file: Path | None = None    # keep phase, MLflow ids and trial rows here for a parent run

    def __post_init__(self) -> None:
        object.__setattr__(self, "output", Path(self.output))
        if self.status_file is not None:
            object.__setattr__(self, "status_file", Path(self.status_file))
        if self.fresh_ledger is not None and not self.fresh_ledger.strip():
            raise InputError("--fresh-ledger: give the reason it is recorded with, e.g. --fresh-ledger 'new data "
                             "vendor'")

    def but(self, **changes: Any) -> RunOptions:
        return replace(self, **changes)

    def local_ray(self) -> LocalRay:
        return LocalRay(self.dashboard, self.dashboard_host, self.dashboard_port, self.ray_metrics)

    def to_json(self) -> str:
        """What a side-by-side parent hands its child process (experiments/api/child.py)."""
        return json.dumps({key: (str(value) if isinstance(value, Path) else value)
                           for key, value in asdict(self).items()})

    @classmethod
    def from_json(cls, text: str) -> RunOptions:
        known = {field.name for field in fields(cls)}
        data = json.loads(text)
        unknown = sorted(set(data) - known)
        if unknown:
            raise InputError(f"run options: unknown {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        return cls(**data)


@dataclass
class RunRequest:
    """One run as the pipeline reads it: the file, its --set overrides (each parsed once), the options, and the
    clock started with the command."""

    conf: Path
    overrides: tuple[Override, ...]
    options: RunOptions
    clock: RunClock


def rerun_command(request: RunRequest, resume: bool) -> str:
    """The command a user types to resume this run's sweep (or start it over): the same file, settings, storage and
    cluster (--address; RAY_ADDRESS stays in the environment). Printed, never run."""
    options = request.options
    words = [python_command(), "-m", "experiments.run", str(request.conf)]
    words += ["--smoke-test"] if options.smoke_test else []
    for override in request.overrides:
        words += ["--set", override.text]
    for flag, value in (("--hardware", options.hardware), ("--storage", options.storage),
                        ("--address", options.address)):
        words += [flag, value] if value else []
    words += ["--output", str(options.output)] if options.output != Path("runs") else []
    return shlex.join(words + (["--resume"] if resume else []))
