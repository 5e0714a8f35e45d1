"""`api.machine_fingerprint()`: digests of numbers this machine computes the way a run does (experiments.plan.numerics
says which), and the verdict's line on which machine its numbers are from. Two machines whose digests match compute a
run's numbers the same way."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MachineFingerprint:
    digests: dict[str, str]  # numpy's kernels, the probing families' features, a trained network: 16 hex digits each
    machine: str             # the verdict's last line: this CPU, and whether another gets the same numbers

    def line(self) -> str:
        """The digests as one line to compare across machines."""
        return " ".join(f"{key}={value}" for key, value in self.digests.items())


def machine_fingerprint() -> MachineFingerprint:
    """This process's fingerprint: with the kernels pinned (`--cross-cpu`) when it was started pinned."""
    from experiments.plan.numerics import fingerprint
    from experiments.plan.provenance import machine_line

    return MachineFingerprint(fingerprint(), machine_line())
