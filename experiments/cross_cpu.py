"""`python -m experiments.cross_cpu [--cross-cpu]`: this machine's numeric fingerprint, to compare across machines.

Two machines whose lines match compute a run's numbers the same way (experiments.plan.numerics says what
`--cross-cpu` pins and why).
"""
from __future__ import annotations

import sys

from experiments.plan.numerics import fingerprint, requested, restart_pinned
from experiments.shell import exit_code


def main(argv: list[str] | None = None) -> int:
    return exit_code(lambda: _fingerprint(sys.argv[1:] if argv is None else argv))


def _fingerprint(argv: list[str]) -> int:
    if requested("--cross-cpu" in argv):  # pinned before numpy picks its kernels: the process starts again
        restart_pinned("experiments.cross_cpu", argv)
    from experiments.plan.provenance import machine_line

    print(" ".join(f"{key}={value}" for key, value in fingerprint().items()), machine_line(), sep="\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
