"""`system`: what sampling a trial's system metrics costs its training, on vs off in the same run.

Platform: conf/dqn_btc.yaml trained as `train` does (build_config -> build_algo -> train() until the step budget,
in this process, one torch thread) with system metrics on (`tracking.system_metrics`, algos/rllib/system_metrics.py):
at the shipped interval (10 s) and at a tenth of it, which samples ten times as often. Peer: the same training
with `tracking.system_metrics=false`. The sides alternate in rounds (off, on, on at 1 s, off, ...) so a load that
comes and goes hits all of them; env steps/s is the median over rounds. Every "on" run must have logged
`system/*` values in its results, or the benchmark fails. Apart: what one sample and one iteration's drain (a
sample and the means) cost, timed alone, against the mean training iteration.
"""
from __future__ import annotations

import statistics
import time
from typing import Any

from experiments.benchmark.common import Budget, Figure, Report
from experiments.benchmark.train_bench import CONF, init_ray, lifetime, platform_experiment, silence_rllib

SIDES = {"off": ["tracking.system_metrics=false"], "on (10 s)": [],
         "on (1 s)": ["tracking.system_metrics_interval_s=1"]}
TARGET = 0.98  # "does not slow training measurably": within 2% of training without it


def _train(overrides: list[str], steps: int, seed: int) -> dict[str, Any]:
    from experiments.sweep.rllib_config import build_config

    exp, plan, _ = platform_experiment(CONF, steps, overrides)
    algo = build_config(exp, plan, seed=seed).build_algo()
    sampled, samples, iterations = 0.0, 0, 0
    start = time.perf_counter()
    while sampled < steps:
        result = algo.train()
        iterations += 1
        sampled = lifetime(result, "env_runners", "num_env_steps_sampled_lifetime")
        samples += bool(result.get("system"))
    train_s = time.perf_counter() - start
    algo.stop()
    return {"steps_per_s": sampled / train_s, "train_s": train_s, "iterations": iterations,
            "results_with_system_metrics": samples}


def _sampler_cost(repeats: int) -> tuple[float, float]:
    """Microseconds of one sample and of one drain, each the mean of `repeats` (the thread's interval: an hour)."""
    from algos.rllib.system_metrics import SystemSampler

    sampler = SystemSampler(interval_s=3600)
    start = time.perf_counter()
    for _ in range(repeats):
        sampler.sample()
    sample_s = (time.perf_counter() - start) / repeats
    start = time.perf_counter()
    for _ in range(repeats):
        sampler.drain()
    drain_s = (time.perf_counter() - start) / repeats
    sampler.stop()
    return sample_s * 1e6, drain_s * 1e6


def run(budget: Budget) -> Report:
    import torch

    steps = budget.pick(full=60_000, quick=300)
    rounds = 1 if budget.quick else 5
    torch.set_num_threads(1)
    init_ray()
    silence_rllib()
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
    for _ in range(rounds):
        for side, overrides in SIDES.items():
            runs[side].append(_train(overrides, steps, budget.seed))
    for side in SIDES:
        logged = [r["results_with_system_metrics"] for r in runs[side]]
        if (side == "off") == any(logged):
            raise RuntimeError(f"system metrics {side}: results carrying system/* metrics {logged}")
    speed = {side: statistics.median(r["steps_per_s"] for r in runs[side]) for side in SIDES}
    figures = []
    for side in ("on (10 s)", "on (1 s)"):
        figure = Figure(f"DQN training with system metrics {side}, env steps/s (peer: off)", "env steps/s",
                        speed[side], speed["off"], target=f">= {TARGET:.2f}x peer")
        figure.met = figure.ratio is not None and figure.ratio >= TARGET
        figure.note = f"median of {rounds} round(s) of {steps} env steps, sides alternating"
        figures.append(figure)
    sample_us, drain_us = _sampler_cost(repeats=20 if budget.quick else 1000)
    iteration_ms = statistics.mean(r["train_s"] / r["iterations"] for r in runs["off"]) * 1000
    cost = Figure("one iteration's drain (a sample and the means), alone", "µs", drain_us, None,
                  higher_is_better=False)
    cost.note = (f"one sample {sample_us:.0f} µs; a training iteration takes {iteration_ms:.0f} ms here, so the drain "
                 f"is {drain_us / 1000 / iteration_ms:.2e} of it; the interval thread adds one sample per interval")
    figures.append(cost)
    return Report("system", __doc__.splitlines()[0], "system metrics on", "system metrics off", figures,
                  {"steps": steps, "rounds": rounds, "conf": "conf/dqn_btc.yaml", "runs": runs})
