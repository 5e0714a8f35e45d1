"""`testgen`: executions/s of the generation agent's environment vs Atheris, per program under test.

Both sides execute the same program on inputs mutated from the same seeds, and both measure each
execution's arc coverage with the same tracer (`envs.agents.testgen.coverage_tracer.ArcTracer`, coverage.py's
C tracer), so the ratio is the cost of the platform's fuzzing loop (operators, corpus, observation) against
libFuzzer's C++ loop with Atheris' bytecode instrumentation: platform = `TestGeneration-v0` stepped with
uniformly random actions for `steps` executions; peer = Atheris with `-runs` = the same executions (its own
rate, taken inside its child process after start-up). A third row per program, the program alone under the
tracer (no fuzzer at all), is the ceiling both are held to.
"""
from __future__ import annotations

import time

import numpy as np

from experiments.benchmark.common import Budget, Figure, Report

PROGRAMS = ("html.parser", "urllib.parse", "email", "tomllib", "http.cookies", "markdown-it")
QUICK_PROGRAMS = ("tomllib",)


def env_executions_per_second(name: str, steps: int, seed: int) -> float:
    """Executions/s of the environment with random actions (the random baseline's loop)."""
    from envs.agents.testgen.env import TestGenerationEnv

    env = TestGenerationEnv({"budget": steps, "test_programs": [name], "train_programs": [_other(name)],
                             "validation_programs": [_other(name, 1)], "split": "test"})
    env.reset(seed=seed, options={"program": name})
    actions = np.random.default_rng(seed).integers(0, env.action_space.n, size=steps)
    started = time.perf_counter()
    for action in actions:
        env.step(int(action))
    return steps / (time.perf_counter() - started)


def traced_program_per_second(name: str, seed: int, repeats: int = 300) -> float:
    """The program alone under the tracer, on its seeds and seeded mutants: no fuzzer's overhead at all."""
    from envs.agents.testgen.harness import harness

    target = harness(name)
    inputs = [target.program.seeds[i % len(target.program.seeds)] for i in range(repeats)]
    rng = np.random.default_rng(seed)
    inputs = [bytes(data[: max(1, int(rng.integers(1, len(data) + 1)))]) for data in inputs]
    started = time.perf_counter()
    for data in inputs:
        target.execute(data)
    return repeats / (time.perf_counter() - started)


def _other(name: str, offset: int = 0) -> str:
    """A program other than `name` (the env's config wants disjoint train/validation/test lists)."""
    return [p for p in PROGRAMS if p != name][offset]


def run(budget: Budget) -> Report:
    from envs.agents.testgen.atheris_peer import NOT_INSTALLED, atheris_installed, run_atheris

    steps = budget.pick(full=2000, quick=200)
    programs = QUICK_PROGRAMS if budget.quick else PROGRAMS
    figures, details = [], {"executions": steps, "programs": list(programs)}
    for name in programs:
        ours = env_executions_per_second(name, steps, budget.seed)
        peer = run_atheris(name, steps, budget.seed, 512).execs_per_s if atheris_installed() else None
        figures.append(Figure(f"{name}: TestGeneration-v0 (random actions) vs Atheris", "executions/s", ours, peer,
                              note="" if peer is not None else NOT_INSTALLED))
        figures.append(Figure(f"{name}: the program alone under the tracer (ceiling) vs Atheris", "executions/s",
                              traced_program_per_second(name, budget.seed), peer))
    return Report("testgen", __doc__.splitlines()[0], "agents/TestGeneration-v0", "Atheris 3.0.0 (libFuzzer)",
                  figures, details)
