"""`cli`: wall time of `python -m experiments.run conf/dqn_btc.yaml --dry-run` (no peer; target <= 3 s, empty cache).

A fresh interpreter per run (what a user waits for), best and median of the repetitions. Each repetition gets a
fresh storage root (`--storage`, a new temporary folder), so its first dry run finds no feature cache, as a new
checkout or a new bucket does; the same command again in that root is the second row, with the cache warm; the
third is a file the dry run refuses (one line, exit 2), answered before RLlib loads. The note gives each row's CPU
time (user + system of the process) too: on a shared machine it moves less than wall time.
"""
from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import tempfile
import time

from experiments.benchmark.common import REPO, Budget, Figure, Report

TARGET_S = 3.0
COMMAND = [sys.executable, "-m", "experiments.run", "conf/dqn_btc.yaml", "--dry-run"]
REFUSED = ["--set", "tune.metric=training_iteraton"]  # a misspelt result key: refused with one line, exit 2


def timed(command: list[str], expected: int = 0) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one run of `command`; another exit code than `expected` raises with
    its stderr's end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != expected:
        raise RuntimeError(f"dry run exited {proc.returncode}, not {expected}: {proc.stderr.strip()[-500:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run(budget: Budget) -> Report:
    repeats = 1 if budget.quick else 3
    cold: list[tuple[float, float]] = []
    warm: list[tuple[float, float]] = []
    refused: list[tuple[float, float]] = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="cli-bench-") as storage:
            command = [*COMMAND, "--storage", storage]
            cold.append(timed(command))
            warm.append(timed(command))
            refused.append(timed([*command, *REFUSED], expected=2))

    def figure(what: str, samples: list[tuple[float, float]], target: bool) -> Figure:
        walls, cpus = [wall for wall, _ in samples], [cpu for _, cpu in samples]
        best = min(walls)
        return Figure(what, "s", best, None, higher_is_better=False,
                      target=f"<= {TARGET_S:.0f} s" if target else None, met=best <= TARGET_S if target else None,
                      note=f"median {statistics.median(walls):.2f} s of {repeats}; CPU {min(cpus):.2f} s best, "
                           f"{statistics.median(cpus):.2f} s median")

    figures = [figure("experiments.run conf/dqn_btc.yaml --dry-run, empty feature cache (fresh storage root)", cold,
                      True),
               figure("same, again in that storage root (feature cache warm)", warm, False),
               figure(f"same, a refused file ({' '.join(REFUSED)})", refused, False)]
    details = {"cold_samples_s": [wall for wall, _ in cold], "cold_cpu_s": [cpu for _, cpu in cold],
               "warm_samples_s": [wall for wall, _ in warm], "warm_cpu_s": [cpu for _, cpu in warm],
               "refused_samples_s": [wall for wall, _ in refused], "refused_cpu_s": [cpu for _, cpu in refused],
               "command": " ".join([*COMMAND[1:], "--storage", "<fresh folder>"])}
    return Report("cli", __doc__.splitlines()[0], "experiments.run --dry-run", "(none)", figures, details)
