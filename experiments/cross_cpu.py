"""`python -m experiments.cross_cpu [--cross-cpu]`: this machine's numeric fingerprint, to compare across machines.

Two machines whose lines match compute a run's numbers the same way (experiments.plan.numerics says what
`--cross-cpu` pins and why).
"""
from __future__ import annotations

import sys

from experiments.plan.numerics import fingerprint, requested, restart_pinned

if __name__ == "__main__":
    if requested("--cross-cpu" in sys.argv[1:]):
        restart_pinned("experiments.cross_cpu", sys.argv[1:])
    from experiments.plan.provenance import machine_line

    print(" ".join(f"{key}={value}" for key, value in fingerprint().items()), machine_line(), sep="\n")
