"""One program made ready to execute under measurement, the same way in the env and in the Atheris child.

Coverage must not depend on what ran earlier in the process, or the strategy scored first would get
arcs the later ones cannot: the first call of a parser imports modules lazily (email's feedparser),
fills module and instance caches once (urllib.parse's `_hextobyte` table on the first '%', markdown-it's
rule chains) and memoized functions skip their body once warm (urlsplit, tomllib's cached_tz). So a
harness warms the program up once per process, untraced, on its seeds and on WARMUP_MUTANTS seeded
mutants of them (that one-off work is never counted, by anyone), and `fresh()` empties the lru_caches
of the traced files before each run. One-off state that no warm-up input reaches can still leak from
one run to the next in a process; tests/unit/test_testgen_env.py checks that episodes measure the same
whatever ran before them.
"""
from __future__ import annotations

from functools import cache

import numpy as np

from envs.agents.testgen.coverage_tracer import ArcTracer, Execution
from envs.agents.testgen.mutators import OPERATORS, Mutator, harvest_dictionary
from envs.agents.testgen.programs import Program, program, source_files

WARMUP_MUTANTS = 2000
WARMUP_MAX_BYTES = 512


class Harness:
    """A program with its traced files, its tracer and its auto-dictionary, warmed up."""

    def __init__(self, target: Program) -> None:
        self.program = target
        self.files = frozenset(source_files(target.modules))
        self.dictionary = harvest_dictionary(self.files)
        for data in (*target.seeds, *warmup_mutants(target.seeds, self.dictionary)):
            try:
                target.run(data)
            except Exception:  # noqa: BLE001 - warming up only: every outcome is measured later, traced
                pass
        self.tracer = ArcTracer(self.files)

    def fresh(self) -> None:
        """Forget what earlier runs memoized in the traced files (call before each run)."""
        self.tracer.clear_caches()

    def execute(self, data: bytes) -> tuple[Execution, str]:
        """One traced execution and its outcome: "accepted", "rejected" (a documented error) or "crash"."""
        execution = self.tracer.run(self.program.run, data)
        if execution.error is None:
            return execution, "accepted"
        documented = isinstance(execution.error, self.program.documented_errors)
        return execution, "rejected" if documented else "crash"


@cache
def harness(name: str) -> Harness:
    """The harness of program `name`, built (and warmed up) once per process."""
    return Harness(program(name))


def warmup_mutants(seeds: tuple[bytes, ...], dictionary: tuple[bytes, ...]) -> list[bytes]:
    """WARMUP_MUTANTS inputs, each 1-4 random operators away from a seed (the same in every process)."""
    rng = np.random.default_rng(0)
    mutator = Mutator(dictionary, WARMUP_MAX_BYTES)
    mutants = []
    for _ in range(WARMUP_MUTANTS):
        data = seeds[int(rng.integers(len(seeds)))]
        for _ in range(int(rng.integers(1, 5))):
            other = seeds[int(rng.integers(len(seeds)))]
            data = mutator.mutate(int(rng.integers(len(OPERATORS))), data, other, rng)
        mutants.append(data)
    return mutants
