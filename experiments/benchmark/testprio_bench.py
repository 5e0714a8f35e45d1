"""`testprio`: training the cross-project execution agent, and ranking one CI cycle with it, vs learning-to-rank.

- training: `python -m experiments.run conf/dqn_testprio_cross.yaml` from the command line (--quick: its smoke
  budget) against fitting the learned baseline (LightGBM lambdarank) on the same training cycles;
- ranking: every cycle of a bundled history, one at a time, by the registered model's policy as it ranks (zero-shot:
  within the heuristic's tiers and its residual rounds when the conf sets them, else the pairwise round robin or
  merge sort of envs.agents.testprio.ranking) against the learned baseline's ordering;
- learning online: one update of the comparator after a cycle's verdicts (algos.families.testprio_online).
"""
from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from experiments.benchmark.common import REPO, Budget, Figure, Report

CONF = REPO / "conf/dqn_testprio_cross.yaml"
HELD_OUT = REPO / "data/testprio/iofrol.csv"  # the history with the largest cycles and the most failures


def _per_cycle_ms(rank, data) -> list[float]:
    """Milliseconds to rank each cycle with two or more tests: `rank(span, tiebreak)`."""
    samples = []
    rng = np.random.default_rng(0)
    for cycle in np.flatnonzero(data.history.cycle_sizes >= 2):
        span = data.history.rows(cycle)
        tiebreak = rng.permutation(span.stop - span.start)
        started = time.perf_counter()
        rank(span, tiebreak)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def run(budget: Budget) -> Report:
    import mlflow
    import ray

    from algos.families.testprio_online import OnlineComparator
    from envs.agents.testprio.config import parse_config
    from envs.agents.testprio.dataset import prepare
    from envs.agents.testprio.evaluate import agent_order
    from envs.agents.testprio.learning_to_rank import LearningToRank
    from experiments import api

    ray.shutdown()  # an earlier benchmark of `all` may have left its Ray up; the run starts its own
    with tempfile.TemporaryDirectory() as folder:
        uri = f"sqlite:///{Path(folder) / 'mlflow.db'}"
        started = time.perf_counter()
        result = api.run(CONF, [f"tracking.tracking_uri={uri}"],
                         api.RunOptions(smoke_test=budget.quick, dashboard=False, output=Path(folder) / "runs"))
        training = time.perf_counter() - started
        if not result.ok or result.model_uri() is None:
            raise RuntimeError(f"api.run failed (exit {result.exit_code:d}): {'; '.join(result.partial)}")
        mlflow.set_tracking_uri(uri)
        inner = mlflow.pyfunc.load_model(result.model_uri()).unwrap_python_model()
    reader, policy = inner.inputs, inner.policy
    pooled = prepare(parse_config(reader.training_config()))
    started = time.perf_counter()
    ranker = LearningToRank.fit(pooled.features.matrix, pooled.history, pooled.train_cycles)
    fit = time.perf_counter() - started
    config = parse_config(reader.env_config(str(HELD_OUT)))
    held_out = prepare(config)
    agent = _per_cycle_ms(lambda span, t: agent_order(policy, config, held_out, span, t), held_out)
    learned = _per_cycle_ms(lambda span, t: ranker.order(held_out.features.matrix[span], t), held_out)
    comparator = OnlineComparator.from_policy(policy)
    rng = np.random.default_rng(0)
    updates = []
    for cycle in np.flatnonzero(held_out.history.cycle_sizes >= 2)[: 20 if budget.quick else 100]:
        span = held_out.history.rows(cycle)
        begun = time.perf_counter()
        comparator.update(held_out.features.matrix[span], held_out.history.verdicts[span],
                          held_out.history.durations[span], rng)
        updates.append((time.perf_counter() - begun) * 1000)
    p95 = float(np.percentile(agent, 95))
    sizes = held_out.history.cycle_sizes[held_out.history.cycle_sizes >= 2]
    budget_note = "the smoke budget (--quick)" if budget.quick else "the shipped conf's budget"
    return Report("testprio", __doc__.splitlines()[0], "the cross-project DQN comparator", "LightGBM lambdarank", [
        Figure("training the cross-project model (api.run) vs fitting learning-to-rank", "s", training, fit,
               higher_is_better=False, target="<= 600 s", met=training <= 600.0,
               note=f"{budget_note}; the command includes Ray's start, the sweep, scoring and registration"),
        Figure(f"ranking one cycle of {HELD_OUT.name}, 95th percentile, vs learning-to-rank", "ms", p95,
               float(np.percentile(learned, 95)), higher_is_better=False, target="<= 50 ms", met=p95 <= 50.0,
               note=f"{len(agent)} cycles of 2..{int(sizes.max())} tests; median {statistics.median(agent):.2f} ms, "
                    f"max {max(agent):.1f} ms"),
        Figure("one online update after a cycle's verdicts", "ms", statistics.median(updates), None,
               higher_is_better=False, note=f"median of {len(updates)} cycles, 256 pairs, 4 Adam steps"),
    ], {"training_s": training, "ltr_fit_s": fit, "rank_ms_median": statistics.median(agent), "rank_ms_p95": p95,
        "rank_ms_max": max(agent), "update_ms_median": statistics.median(updates)})
