"""Score a trained execution agent on a CI history it never trained on: zero-shot, and online as CI runs.

A CI team that adopts a model has no months of its own history to train it on. This scores what it would get:
every cycle of the history (either format), in time order, is ranked

* zero-shot by the trained policy, unchanged;
* by each online learner the caller passes (e.g. the same policy updated after every cycle's verdicts, a cold
  start, periodic retraining: algos.families.testprio_online); a learner ranks a cycle, then learns its verdicts, so the
  order of a cycle never reads its own outcomes;
* by the learned baseline (gradient-boosted trees with a ranking objective, fitted on the histories the agent
  trained on: the same data, the same zero-shot position) and the family's baselines (recent_failures, random,
  optimal).

Headline columns use the paper's protocol (cycles with >= 6 tests, envs.agents.testprio.evaluate.PAPER_MIN_TESTS):
APFDc first (cost-cognizant APFD, over the cycles with failures), then the time to the first failure, APFD, and NRPA
(secondary). Guard: a strategy whose failing-cycle APFDc is below the heuristic's is flagged. For learners,
`ahead_from` is the cycle (1-based, in time order) after which the learner's running mean APFDc over the failing
cycles so far stays strictly above the heuristic's to the end (a history without failures: NRPA, at or above;
"never" if it ends behind).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol

import numpy as np
import pandas as pd

from envs.agents.testprio.config import parse_config
from envs.agents.testprio.cycle_reader import CycleReader
from envs.agents.testprio.dataset import PreparedData, prepare
from envs.agents.testprio.evaluate import (
    HEURISTIC,
    LEARNED_BASELINE,
    PAPER_MIN_TESTS,
    agent_order,
    baseline_orders,
    below_heuristic,
    cycle_scores,
    learned_order,
    summarize,
)
from envs.agents.testprio.learning_to_rank import LearningToRank
from envs.agents.testprio.ranking import tiebreak_order
from envs.errors import InputError
from envs.report import Policy


class Learner(Protocol):
    """A policy that learns as CI runs: rank a cycle (`__call__` on observations), then `update` on its verdicts."""

    def __call__(self, observations: np.ndarray) -> np.ndarray: ...

    def update(self, features: np.ndarray, verdicts: np.ndarray, durations: np.ndarray,
               rng: np.random.Generator) -> None: ...


@dataclass(frozen=True)
class TransferReport:
    """Per strategy: the summary table; per cycle and strategy: the scores; what the numbers mean."""

    table: pd.DataFrame
    per_cycle: pd.DataFrame
    notes: list[str]


def score_registered(policy: Policy, reader: CycleReader | None, data_path: str,
                     learners: Mapping[str, Callable[[], Learner]]) -> TransferReport:
    """`score_history` for a registered model: its reader says how it featurized its training data and where that
    data was (envs.EnvFamily.transfer). Online learners need a comparator (pairwise); a pointwise model is scored
    zero-shot only."""
    if reader is None or reader.refusal:
        why = reader.refusal if reader else "it was registered without a cycle reader"
        raise InputError(f"this model cannot score another history: {why}")
    report = score_history(policy, reader.env_config(data_path), learners if reader.mode == "pairwise" else {},
                           reader.training_config())
    seen = any(Path(path).resolve() == Path(data_path).resolve() for path in reader.training_data)
    if seen:
        report.notes.insert(0, f"NOT zero-shot: {data_path} is one of the histories this model trained on (its "
                               f"first {reader.train_fraction - reader.validation_fraction:.0%} of cycles)")
    if learners and reader.mode != "pairwise":
        report.notes.append("no online rows: online learning updates a comparator (a pairwise model)")
    return report


def score_history(policy: Policy, env_config: Mapping[str, Any], learners: Mapping[str, Callable[[], Learner]],
                  training_config: Mapping[str, Any] | None = None, agent: str = "agent (zero-shot)",
                  ) -> TransferReport:
    """Rank every cycle of `env_config`'s history (data_path) in time order with the policy, the learners and the
    baselines. `training_config`: the env_config of the agent's training data, on whose training cycles the
    learned baseline is fitted (None: no learned baseline)."""
    config = parse_config(env_config)
    data = prepare(config)
    ranker = _learned_baseline(training_config)
    live = {name: make() for name, make in learners.items()}
    rng = np.random.default_rng(config.seed)
    history = data.history
    rows, seconds = [], []
    for position, cycle in enumerate(np.flatnonzero(history.cycle_sizes >= 2)):
        span = history.rows(cycle)
        features = data.features.matrix[span]
        tiebreak = tiebreak_order(span.stop - span.start, rng)
        started = time.perf_counter()
        orders = {agent: agent_order(policy, config, data, span, tiebreak)}
        seconds.append(time.perf_counter() - started)
        orders.update({name: agent_order(learner, config, data, span, tiebreak) for name, learner in live.items()})
        if ranker is not None:
            orders[LEARNED_BASELINE] = learned_order(ranker, config, data, span, tiebreak)
        orders.update(baseline_orders(data, span, rng))
        rows += cycle_scores(orders, data, span, config.time_budget, position=position + 1,
                             cycle=history.cycle_ids[cycle])
        for learner in live.values():  # after every strategy ranked the cycle: its verdicts are now known
            learner.update(features, history.verdicts[span], history.durations[span], rng)
    per_cycle = pd.DataFrame(rows)
    table = summary(per_cycle, list(live))
    notes = [
        f"{history.source}: {per_cycle['position'].max()} cycles with two or more tests, in time order; headline "
        f"columns (paper_*) over the {int(table['paper_cycles'].iloc[0])} with >= {PAPER_MIN_TESTS} tests.",
        "apfdc (cost-cognizant APFD, the headline), ttff (time to the first failure, share of the cycle's duration) "
        "and apfd: means over cycles with failures only; nrpa: over all; below_heuristic: the strategy's "
        "failing-cycle APFDc is below recent_failures' (the guard).",
        f"agent ranking time per cycle: median {1000 * float(np.median(seconds)):.2f} ms, max "
        f"{1000 * float(np.max(seconds)):.2f} ms ({config.mode}).",
    ]
    if ranker is None:
        notes.append("no learning_to_rank row: the model's training histories are not on this machine")
    return TransferReport(table=table, per_cycle=per_cycle, notes=notes)


def summary(per_cycle: pd.DataFrame, learners: list[str]) -> pd.DataFrame:
    """Per strategy: the paper's protocol (>= 6 tests) first, ours (>= 2) after, the guard flag, and for learners
    the cycle from which they stay ahead of the heuristic (`ahead_from`)."""
    strategies = list(per_cycle["strategy"].unique())
    ours = summarize(per_cycle, strategies)
    paper = summarize(per_cycle[per_cycle["tests"] >= PAPER_MIN_TESTS], strategies)
    table = pd.DataFrame({**{f"paper_{name}": paper[name] for name in ("apfdc", "ttff", "apfd", "nrpa")},
                          "paper_cycles_with_failures": paper["cycles_with_failures"], "paper_cycles": paper["cycles"],
                          "apfdc": ours["apfdc"], "apfd": ours["apfd"], "nrpa": ours["nrpa"], "cycles": ours["cycles"]})
    table["below_heuristic"] = below_heuristic(table)
    table["ahead_from"] = [ahead_from(per_cycle, name) if name in learners else "" for name in table.index]
    return table


def ahead_from(per_cycle: pd.DataFrame, strategy: str) -> str:
    """The first cycle (1-based position) from which `strategy`'s running mean APFDc over the failing cycles so far
    stays strictly above the heuristic's to the end (a history with no failing cycle: NRPA, at or above); "never"
    if it ends behind."""
    failing = per_cycle["apfdc"].notna().any()
    wide = per_cycle.pivot(index="position", columns="strategy", values="apfdc" if failing else "nrpa")
    mine, theirs = wide[strategy].expanding().mean(), wide[HEURISTIC].expanding().mean()
    ahead = (mine > theirs + 1e-12 if failing else mine >= theirs - 1e-12).to_numpy()
    if not ahead[-1]:
        return "never"
    behind = np.flatnonzero(~ahead)
    return str(int(wide.index[behind[-1] + 1]) if behind.size else int(wide.index[0]))


def _learned_baseline(training_config: Mapping[str, Any] | None) -> LearningToRank | None:
    """Gradient-boosted trees fitted on the agent's training cycles, or None when that data is not here."""
    if training_config is None:
        return None
    config = parse_config(training_config)
    data: PreparedData = prepare(config)
    return LearningToRank.fit(data.features.matrix, data.history, data.train_cycles, seed=config.seed)
