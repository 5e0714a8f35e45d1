"""`run_benchmarks(BenchmarkOptions(names=("env",)))`: the platform's speed against a peer, measured in this process.

Each sub-benchmark (experiments/benchmark/, its package docstring lists them) runs the platform and its peer one after
the other on the same machine and load; its JSON document (figures, machine, versions, budget) is written to
`output/<name>.json` and returned. A sub-benchmark whose peer is not installed is skipped with the install command.
Nothing is printed: `on_event` hears each one start, end or be skipped, so a long `all` run can be followed.

This is the benchmark room's one entry, and `python -m experiments.benchmark` is a thin shell over it. It is not in
`experiments.api`: the benchmarks measure the API by calling it, so the API cannot run them (tests/unit/test_layout.py:
no two rooms import each other).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from envs.errors import InputError
from experiments.records.exits import ExitCode
from experiments.records.run_events import OnEvent, ignore


@dataclass(frozen=True)
class BenchmarkOptions:
    names: tuple[str, ...] = ()        # sub-benchmarks, in this order (experiments.benchmark.BENCHMARKS); () all
    steps: int | None = None           # step budget per side (env steps; results for `tracking`); None: its default
    quick: bool = False                # tiny budgets: checks that every benchmark runs, measures nothing useful
    seed: int = 0                      # first seed
    seeds: int | None = None           # seeds per side for `solve` (default 3, quick 1)
    time_limit_s: float | None = None  # seconds per run for open-ended runs (`solve`)
    variants: bool = True              # also the variant rows of `train` and `solve`
    output: Path | None = None         # folder for <name>.json (default runs/benchmarks, untracked)
    argv: tuple[str, ...] = ()         # the command line that asked for it, recorded in each document


@dataclass(frozen=True)
class Measured:
    """One sub-benchmark's JSON document, and where it was written."""

    name: str
    document: dict[str, Any]
    path: Path

    @property
    def failed(self) -> bool:
        """The benchmark ran but recorded an error (e.g. its two sides disagreed)."""
        return bool(self.document["details"].get("error"))

    def rows(self) -> list[tuple[str, str, str, str, str, str, bool | None]]:
        """Per figure: what, unit, platform, peer, ratio (numbers as the docs write them), target, whether met."""
        from experiments.benchmark.common import format_number, format_ratio

        return [(f["what"], f["unit"], format_number(f["platform"]), format_number(f["peer"]),
                 format_ratio(f["ratio"]), f["target"] or "", f["met"]) for f in self.document["figures"]]


@dataclass(frozen=True)
class BenchmarkEvent:
    kind: Literal["started", "skipped", "measured"]
    name: str
    why: str = ""                      # skipped: the missing peer and its install command
    measured: Measured | None = None   # measured: its document


@dataclass
class BenchmarkReport:
    measured: list[Measured] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # name -> why (its peer is not installed)

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.FAILED if any(one.failed for one in self.measured) else ExitCode.OK


def run_benchmarks(options: BenchmarkOptions = BenchmarkOptions(),
              on_event: OnEvent[BenchmarkEvent] | None = None) -> BenchmarkReport:
    """Run the sub-benchmarks of `options` one after the other, writing each one's JSON document."""
    from experiments.benchmark import common

    say = on_event or ignore
    budget = common.Budget(steps=options.steps, quick=options.quick, seed=options.seed,
                           time_limit_s=options.time_limit_s, variants=options.variants, seeds=options.seeds)
    names = options.names or tuple(common.BENCHMARKS)
    unknown = [name for name in names if name not in common.BENCHMARKS]
    if unknown:
        raise InputError(f"unknown benchmark(s) {', '.join(unknown)}: choose from {', '.join(common.BENCHMARKS)}")
    report = BenchmarkReport()
    for name in names:
        say(BenchmarkEvent("started", name))
        try:
            document = common.run_benchmark(name, budget, list(options.argv))
        except common.PeerMissing as missing:
            report.skipped[name] = str(missing)
            say(BenchmarkEvent("skipped", name, why=str(missing)))
            continue
        measured = Measured(name, document, common.write_result(document, options.output or common.RESULTS_DIR))
        report.measured.append(measured)
        say(BenchmarkEvent("measured", name, measured=measured))
    return report


__all__ = ["BenchmarkEvent", "BenchmarkOptions", "BenchmarkReport", "Measured", "run_benchmarks"]
