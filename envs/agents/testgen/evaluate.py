"""Score a trained scheduler on held-out programs next to random, greedy and Atheris.

`evaluate_policy` fuzzes every test program (`env_config.test_programs`, never trained on;
`env_config.split` is ignored here) `eval_seeds` times with each strategy for `eval_budget` executions
after the seeds. The agent (its greedy action per observation), `random` and `greedy`
(`envs.agents.testgen.baselines`) run through the same environment with the same env seeds (the same
starting input, operators and corpus rules), so they differ only in their choices; Atheris runs on the
same seeds, dictionary and input cap in a child process (`envs.agents.testgen.atheris_peer`), measured by
the same tracer. Per strategy the table reports:

* arcs: final arc coverage, mean over programs x seeds; arcs_std: its standard deviation over seeds
  (per program, then averaged over programs);
* gained: arcs beyond the seeds' own coverage (the quantity the episode return is proportional to);
* lines: distinct lines reached, mean;
* crashes: distinct findings over all runs (deduplicated by program, exception type and site);
* execs_per_s: executions per second, mean (the environment's rate includes the scheduler's choice);
* agent_minus, agent_minus_se, agent_ahead: the agent's final arcs minus this strategy's on the same program
  and seed (paired: the same starting corpus), its mean and standard error, and on how many (program,
  seed) pairs the agent covered more.

`series` is the mean coverage after each execution (index 0: after the seeds). The agent's headline
numbers are `eval/arcs` and `eval/arcs_vs_<baseline>` = the agent's mean final arcs minus the baseline's.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pandas as pd

from envs.agents.testgen import atheris_peer
from envs.agents.testgen.baselines import BASELINES, Strategy
from envs.agents.testgen.config import TestGenerationConfig, parse_config
from envs.agents.testgen.env import TestGenerationEnv
from envs.agents.testgen.findings import Finding
from envs.report import EvaluationReport, Policy

INPUT_REPR_CHARS = 80


@dataclass(frozen=True)
class Run:
    """One strategy's run on one program: coverage after the seeds (index 0) and after each execution."""

    strategy: str
    program: str
    seed: int
    curve: np.ndarray
    lines: int
    findings: list[Finding]
    execs_per_s: float


class PolicyStrategy:
    """The trained agent: its greedy action for each observation (a batch of one)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def act(self, observation: np.ndarray) -> int:
        return int(np.asarray(self.policy(observation[None, :])).reshape(-1)[0])

    def observe(self, action: int, new_arcs: int) -> None:
        """The agent's policy is fixed while it is scored."""


def run_strategy(env: TestGenerationEnv, strategy: Strategy, name: str, seed: int, label: str) -> Run:
    """One episode of `env` on program `name` with `strategy` choosing every action."""
    observation, info = env.reset(seed=seed, options={"program": name})
    curve = [info["coverage"]]
    started = time.perf_counter()
    truncated = terminated = False
    while not (terminated or truncated):
        action = strategy.act(observation)
        observation, _, terminated, truncated, info = env.step(action)
        strategy.observe(action, info["new_arcs"])
        curve.extend(info["coverage_curve"])
    elapsed = time.perf_counter() - started
    return Run(label, name, seed, np.asarray(curve), env.coverage.lines(), list(env.findings.unique.values()),
               env.executions / elapsed)


def run_all(policy: Policy, config: TestGenerationConfig) -> tuple[list[Run], list[str]]:
    """Every strategy on every test program and eval seed; notes on what could not run."""
    env = _scoring_env(config)
    with_atheris = atheris_peer.atheris_installed()
    agent = [run_strategy(env, PolicyStrategy(policy), name, seed, "agent") for name, seed in _cases(config)]
    notes = [] if with_atheris else [atheris_peer.NOT_INSTALLED]
    return [*agent, *_baseline_runs(config.model_dump_json(), with_atheris)], notes


@functools.cache
def _baseline_runs(config_json: str, with_atheris: bool) -> tuple[Run, ...]:
    """random, greedy and Atheris on every test program and eval seed. They do not depend on the policy, so a
    process runs them once per configuration: a sweep scores every trial's checkpoint with the same
    env_config, and without this each trial would pay for the baselines again (Atheris alone is about
    1.5 s per seed)."""
    config = TestGenerationConfig.model_validate_json(config_json)
    env = _scoring_env(config)
    runs: list[Run] = []
    for name, seed in _cases(config):
        runs += [run_strategy(env, baseline.decide(env.action_space.n, seed), name, seed, baseline.name)
                 for baseline in BASELINES]
        if with_atheris:
            peer = atheris_peer.run_atheris(name, config.eval_budget, seed, config.max_input_bytes)
            runs.append(Run("atheris", name, seed, peer.curve, peer.lines, peer.findings, peer.execs_per_s))
    return tuple(runs)


def _scoring_env(config: TestGenerationConfig) -> TestGenerationEnv:
    return TestGenerationEnv({**config.model_dump(), "split": "test", "budget": config.eval_budget})


def _cases(config: TestGenerationConfig) -> list[tuple[str, int]]:
    """(test program, seed) of every scored run."""
    return [(name, seed) for name in config.test_programs
            for seed in range(config.seed, config.seed + config.eval_seeds)]


def findings_frame(runs: list[Run]) -> pd.DataFrame:
    """One row per distinct finding of a strategy (program, exception, location): its first seed, message
    and input."""
    rows: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for run in runs:
        for finding in run.findings:
            key = (run.strategy, run.program, *finding.key)
            rows.setdefault(key, {"strategy": run.strategy, "program": run.program,
                                  "exception": finding.exception, "location": finding.location,
                                  "seed": run.seed, "message": finding.message, "input": finding.input})
    columns = ["strategy", "program", "exception", "location", "seed", "message", "input"]
    return pd.DataFrame(list(rows.values()), columns=columns)


def evaluate_policy(policy: Policy, env_config: Mapping[str, Any] | None) -> EvaluationReport:
    """Fuzz every held-out program with the agent and the baselines; report coverage and crashes."""
    config = parse_config(env_config)
    runs, notes = run_all(policy, config)
    findings = findings_frame(runs)
    strategies = [s for s in ("agent", *(b.name for b in BASELINES), "atheris")
                  if any(run.strategy == s for run in runs)]
    table = pd.DataFrame([_summary([run for run in runs if run.strategy == s], findings) for s in strategies],
                         index=pd.Index(strategies, name="strategy"))
    table = table.join(paired_with_agent(runs))
    series = pd.DataFrame({s: np.mean([run.curve for run in runs if run.strategy == s], axis=0)
                           for s in strategies})
    series.index.name = "executions"
    metrics = {"eval/arcs": float(table.loc["agent", "arcs"]),
               "eval/gained": float(table.loc["agent", "gained"])}
    metrics.update({f"eval/arcs_vs_{s}": float(table.loc["agent", "arcs"] - table.loc[s, "arcs"])
                    for s in strategies if s != "agent"})
    notes = [
        f"{config.eval_budget} executions after the seeds per run; {config.eval_seeds} seeds "
        f"({config.seed}..{config.seed + config.eval_seeds - 1}) per strategy on "
        f"{', '.join(config.test_programs)}; inputs capped at {config.max_input_bytes} bytes.",
        "Coverage is arcs (from_line, to_line) in the program's own source files, measured by one tracer for "
        "every strategy; Atheris also executes the empty input before its seeds.",
        *notes,
        *(f"{row.strategy} on {row.program}: {row.exception} at {row.location} ({row.message!r}), "
          f"input {_shorten(row.input)}" for row in findings.itertuples()),
    ]
    return EvaluationReport(
        title=f"Test generation on {', '.join(config.test_programs)}",
        table=table,
        agent_metrics=metrics,
        series=series,
        series_label="arcs covered vs executions",
        notes=notes,
    )


def paired_with_agent(runs: list[Run]) -> pd.DataFrame:
    """Per strategy, the agent's final arcs minus its own on the same (program, seed): the same seed gives
    every strategy the same starting input and corpus, so the paired difference resolves gaps smaller than
    the seed-to-seed spread. Columns: agent_minus (mean), agent_minus_se (its standard error; NaN for one
    pair), agent_ahead (pairs the agent covered more in); NaN in the agent's own row."""
    finals = {(run.strategy, run.program, run.seed): float(run.curve[-1]) for run in runs}
    rows = {}
    for strategy in dict.fromkeys(run.strategy for run in runs):
        if strategy == "agent":
            continue
        differences = np.array([finals[("agent", program, seed)] - final
                                for (name, program, seed), final in finals.items() if name == strategy])
        standard_error = differences.std(ddof=1) / np.sqrt(differences.size) if differences.size > 1 else np.nan
        rows[strategy] = {"agent_minus": differences.mean(), "agent_minus_se": standard_error,
                          "agent_ahead": int((differences > 0).sum())}
    return pd.DataFrame.from_dict(rows, orient="index", columns=["agent_minus", "agent_minus_se", "agent_ahead"])


def _summary(runs: list[Run], findings: pd.DataFrame) -> dict[str, float]:
    finals = pd.Series([float(run.curve[-1]) for run in runs], index=[run.program for run in runs])
    spread = finals.groupby(level=0).std(ddof=1).fillna(0.0)  # over seeds, per program (one seed: 0)
    return {
        "arcs": float(finals.mean()),
        "arcs_std": float(spread.mean()),
        "gained": float(np.mean([run.curve[-1] - run.curve[0] for run in runs])),
        "lines": float(np.mean([run.lines for run in runs])),
        "crashes": int((findings["strategy"] == runs[0].strategy).sum()),
        "execs_per_s": float(np.mean([run.execs_per_s for run in runs])),
    }


def _shorten(data: bytes) -> str:
    shown = repr(data)
    return shown if len(shown) <= INPUT_REPR_CHARS else f"{shown[:INPUT_REPR_CHARS]}... ({len(data)} bytes)"
