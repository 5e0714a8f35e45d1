"""What produced a run's numbers: the code (commit, dirty or not) and the machine (CPU, kernels, numerics).

Tagged on every run and registered version and printed under every verdict, because the same command gives
other numbers on another CPU unless it ran with --cross-cpu (experiments/plan/numerics.py).
"""
from __future__ import annotations

import functools
import os
import platform
import subprocess
from pathlib import Path

from experiments.plan.numerics import is_pinned


@functools.cache
def git_commit() -> str:
    """The checkout's commit, asked of git once per process (the run tags it and every registered version),
    with `+dirty` when tracked files differ from it: then the commit alone does not say what ran."""
    where = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=where).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=5, cwd=where).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{sha}{'+dirty' if dirty else ''}" if sha else "unknown"


def cpu_model() -> str:
    """The CPU's marketing name (Linux), else what the platform module knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def machine_tags() -> dict[str, str]:
    """What produced a run's numbers, as MLflow tags: the README's tables name it, and comparing two runs'
    numbers is only fair when these match or numerics is cross_cpu on both."""
    import torch

    return {"machine/cpu": cpu_model(), "machine/torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "machine/cores": str(os.cpu_count()), "numerics": "cross_cpu" if is_pinned() else "native"}


def machine_line() -> str:
    """The verdict's last line: which machine its numbers are from, and whether another CPU gets the same."""
    tags = machine_tags()
    where = f"{tags['machine/cpu']} (torch {tags['machine/torch_cpu_capability']}, {tags['machine/cores']} cores)"
    if tags["numerics"] == "cross_cpu":
        return f"numbers from {where} with --cross-cpu: any x86-64 CPU gives the same, with the same packages"
    return (f"numbers from {where}: another CPU may give other numbers (a seed's worth, docs/verdicts.md); "
            "--cross-cpu gives the same on any x86-64 CPU")
