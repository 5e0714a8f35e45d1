"""`cli`: wall time of `python -m experiments.run conf/dqn_btc.yaml --dry-run` (no peer; target <= 3 s).

A fresh interpreter per repetition (what a user waits for), best and median of the repetitions.
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import time

from experiments.benchmark.common import REPO, Budget, Figure, Report

TARGET_S = 3.0
COMMAND = [sys.executable, "-m", "experiments.run", "conf/dqn_btc.yaml", "--dry-run"]


def run(budget: Budget) -> Report:
    repeats = 1 if budget.quick else 3
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        proc = subprocess.run(COMMAND, cwd=REPO, capture_output=True, text=True, timeout=120)
        samples.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise RuntimeError(f"dry run failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    best = min(samples)
    figure = Figure("experiments.run conf/dqn_btc.yaml --dry-run", "s", best, None, higher_is_better=False,
                    target=f"<= {TARGET_S:.0f} s", met=best <= TARGET_S,
                    note=f"median {statistics.median(samples):.2f} s of {repeats}")
    return Report("cli", __doc__.splitlines()[0], "experiments.run --dry-run", "(none)", [figure],
                  {"samples_s": samples, "command": " ".join(COMMAND[1:])})
