"""CLI: `python -m experiments.benchmark [reference|env|train|solve|tracking|cli|all ...] [--steps N] [--quick]`.

A thin shell over `run_benchmarks` (experiments/benchmark/runner.py; the benchmarks call the API, so they are not in
it): it prints each sub-benchmark's table as it ends."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from rich.console import Console

import experiments.benchmark as package
from experiments.benchmark.runner import BenchmarkEvent, BenchmarkOptions, Measured, run_benchmarks
from experiments.shell import exit_code


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m experiments.benchmark", description=package.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", default=["all"], metavar="NAME",
                        help=f"sub-benchmarks to run: {', '.join(package.BENCHMARKS)} or all (default: all)")
    parser.add_argument("--steps", type=int, default=None,
                        help="step budget per side (env steps; results for `tracking`); default per benchmark")
    parser.add_argument("--quick", action="store_true",
                        help="tiny budgets (seconds): checks that every benchmark runs, measures nothing useful")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per side for solve (default 3, --quick 1)")
    parser.add_argument("--time-limit", type=float, default=None, dest="time_limit_s",
                        help="seconds per run for open-ended runs (solve); default 120, quick 60")
    parser.add_argument("--output", type=Path, default=None,
                        help="folder for <name>.json (default runs/benchmarks, untracked; the figures the docs "
                             "cite are in benchmarks/results: pass --output benchmarks/results to replace them)")
    parser.add_argument("--no-variants", dest="variants", action="store_false",
                        help="skip the variant rows of train and solve (uniform replay, stock RLlib DQN)")
    parser.add_argument("--json", action="store_true", help="print the full JSON document after each table")
    args = parser.parse_args(argv)
    names = list(package.BENCHMARKS) if "all" in args.names else args.names
    unknown = [n for n in names if n not in package.BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}: choose from {', '.join(package.BENCHMARKS)}, all")
    if args.steps is not None and args.steps < 1:
        parser.error("--steps must be >= 1")
    args.names = names
    return args


def print_table(console: Console, measured: Measured) -> None:
    from rich.table import Table

    document = measured.document
    table = Table(title=f"{document['benchmark']}: {document['platform']} vs {document['peer']}",
                  title_justify="left")
    for column, justify in (("what", "left"), ("unit", "left"), ("platform", "right"), ("peer", "right"),
                            ("ratio", "right"), ("target", "left"), ("met", "left")):
        table.add_column(column, justify=justify)
    for *cells, met in measured.rows():
        table.add_row(*cells, {True: "[green]yes[/green]", False: "[red]no[/red]", None: ""}[met])
    console.print(table)
    m = document["machine"]
    console.print(f"[dim]{m['cpu']}, {m['usable_cpus']} usable CPUs, load {m['load_average_1_5_15_before']} -> "
                  f"{m['load_average_1_5_15_after']}, {document['wall_time_s']} s; "
                  f"versions {json.dumps({k: v for k, v in document['versions'].items() if v})}[/dim]")
    for f in document["figures"]:
        if f["note"]:
            console.print(f"[dim]- {f['what']}: {f['note']}[/dim]")


def show(console: Console, event: BenchmarkEvent, full_json: bool) -> None:
    """A sub-benchmark starting (a rule), skipped (why), or measured (its table, summary, JSON, file)."""
    if event.kind == "started":
        console.rule(f"benchmark: {event.name}")
    elif event.kind == "skipped":
        console.print(f"[yellow]skipped {event.name}: {event.why}[/yellow]")
    elif event.measured is not None:
        print_table(console, event.measured)
        if event.measured.document["details"].get("summary"):
            console.print(event.measured.document["details"]["summary"], soft_wrap=True)
        if full_json:
            print(json.dumps(event.measured.document, indent=2, default=str))
        console.print(f"wrote {event.measured.path}")


def main(argv: list[str] | None = None) -> int:
    return exit_code(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    raw_argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(raw_argv)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    console = Console(width=None if sys.stdout.isatty() else 120)
    options = BenchmarkOptions(names=tuple(args.names), steps=args.steps, quick=args.quick, seed=args.seed,
                               seeds=args.seeds, time_limit_s=args.time_limit_s, variants=args.variants,
                               output=args.output, argv=tuple(raw_argv))
    report = run_benchmarks(options, lambda event: show(console, event, args.json))
    if report.skipped:
        console.print(f"[yellow]skipped (peer not installed): {', '.join(report.skipped)}[/yellow]")
    return int(report.exit_code)


if __name__ == "__main__":
    sys.exit(main())
