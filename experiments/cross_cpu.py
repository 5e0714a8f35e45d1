"""`python -m experiments.cross_cpu [--cross-cpu]`: this machine's numeric fingerprint, to compare across machines.

Two machines whose lines match compute a run's numbers the same way (experiments.plan.numerics says what
`--cross-cpu` pins and why). A thin shell over `experiments.api.machine_fingerprint`: it pins its own process's
kernels first when asked (the process starts again), then prints.
"""
from __future__ import annotations

import sys

from experiments import api
from experiments.plan.numerics import requested, restart_pinned
from experiments.shell import exit_code


def main(argv: list[str] | None = None) -> int:
    return exit_code(lambda: _fingerprint(sys.argv[1:] if argv is None else argv))


def _fingerprint(argv: list[str]) -> int:
    if requested("--cross-cpu" in argv):  # pinned before numpy picks its kernels: the process starts again
        restart_pinned("experiments.cross_cpu", argv)
    fingerprint = api.machine_fingerprint()
    print(fingerprint.line(), fingerprint.machine, sep="\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
