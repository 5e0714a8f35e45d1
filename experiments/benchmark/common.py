"""What every sub-benchmark shares: budgets, the machine description, figures, JSON and tables."""
from __future__ import annotations

import importlib
import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

from experiments.plan.provenance import cpu_model, git_commit

REPO = Path(__file__).resolve().parents[2]
# A run writes here (untracked, like every run's output under ./runs), so measuring never dirties a checkout; the
# tracked figures in benchmarks/results change only with --output benchmarks/results.
RESULTS_DIR = Path("runs") / "benchmarks"

# name -> "module:function"; imported lazily so `--help` and the `env` benchmark never import Ray.
# `reference` first: an `all` run records the machine's speed of the day before anything else.
BENCHMARKS: dict[str, str] = {
    "reference": "experiments.benchmark.reference_bench:run",
    "env": "experiments.benchmark.env_bench:run",
    "train": "experiments.benchmark.train_bench:run",
    "solve": "experiments.benchmark.solve_bench:run",
    "tracking": "experiments.benchmark.tracking_bench:run",
    "cli": "experiments.benchmark.cli_bench:run",
    "testgen": "experiments.benchmark.testgen_bench:run",
    "features": "experiments.benchmark.features_bench:run",
    "operations": "experiments.benchmark.operations_bench:run",
    "testprio": "experiments.benchmark.testprio_bench:run",
    "system": "experiments.benchmark.system_bench:run",
    "portfolio_env": "experiments.benchmark.portfolio_env_bench:run",
    "paper_poll": "experiments.benchmark.paper_poll_bench:run",
    "jobs": "experiments.benchmark.jobs_bench:run",
    "learner": "experiments.benchmark.learner_bench:run",
}
BENCH_EXTRA = 'pip install -e ".[bench]"   (stable-baselines3, gym-anytrading, finrl)'
VERSIONED = ("numpy", "torch", "gymnasium", "ray", "mlflow", "stable-baselines3", "gym-anytrading", "pandas", "ta-lib",
             "finrl")


class PeerMissing(RuntimeError):
    """The peer package of a sub-benchmark is not installed."""


def require(module: str, package: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise PeerMissing(f"{package} is not installed: {BENCH_EXTRA}") from None


@dataclass
class Budget:
    """How much work a sub-benchmark does. `steps=None` takes the sub-benchmark's default."""

    steps: int | None = None
    quick: bool = False
    seed: int = 0
    time_limit_s: float | None = None  # per side (platform, peer), for open-ended runs like `solve`
    seeds: int | None = None  # seeds per side for `solve` (default 3, quick 1)
    variants: bool = True  # also measure the variant rows (uniform replay, stock RLlib DQN) where they exist

    def pick(self, full: int, quick: int) -> int:
        if self.steps is not None:
            return self.steps
        return quick if self.quick else full


@dataclass
class Figure:
    """One measured quantity for the platform and its peer; ratio = platform / peer."""

    what: str
    unit: str
    platform: float | None
    peer: float | None = None
    higher_is_better: bool = True
    target: str | None = None  # e.g. ">= 3.0x peer" or "<= 50 ms"
    met: bool | None = None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.platform is None or self.peer in (None, 0):
            return None
        return self.platform / self.peer

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio}


@dataclass
class Report:
    name: str
    description: str
    platform_label: str
    peer_label: str
    figures: list[Figure] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)


def _memory_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {"python": platform.python_version()}
    for package in VERSIONED:
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = None
    return found


def machine() -> dict[str, Any]:
    return {
        "os": f"{platform.system()} {platform.release()}",
        "cpu": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gb": _memory_gb(),
        "gpu": "none" if not _has_cuda() else "cuda",
    }


def _has_cuda() -> bool:
    if "torch" not in sys.modules:  # do not import torch just to describe the machine
        return Path("/proc/driver/nvidia").exists()
    return bool(sys.modules["torch"].cuda.is_available())


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def run_benchmark(name: str, budget: Budget, argv: list[str]) -> dict[str, Any]:
    """Run one sub-benchmark and return its JSON document (not yet written)."""
    module_name, function = BENCHMARKS[name].split(":")
    runner: Callable[[Budget], Report] = getattr(importlib.import_module(module_name), function)
    load_before = load_average()
    started = time.time()
    report = runner(budget)
    return {
        "benchmark": name,
        "description": report.description,
        "command": "python -m experiments.benchmark " + " ".join(argv),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "wall_time_s": round(time.time() - started, 1),
        "git_commit": git_commit(),
        "machine": {**machine(), "load_average_1_5_15_before": load_before,
                    "load_average_1_5_15_after": load_average()},
        "versions": versions(),
        "budget": asdict(budget),
        "platform": report.platform_label,
        "peer": report.peer_label,
        "figures": [f.as_dict() for f in report.figures],
        "details": report.details,
    }


def write_result(document: dict[str, Any], results_dir: Path) -> Path:
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / f"{document['benchmark']}.json"
    path.write_text(json.dumps(document, indent=2, default=_jsonable) + "\n")
    return path


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def format_number(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def format_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def timed(function: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = function()
    return time.perf_counter() - start, out
