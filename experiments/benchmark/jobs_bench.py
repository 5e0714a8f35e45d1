"""`jobs`: the main job and its SAC twin end to end, from the command line, as a new user runs them.

- `python -m experiments.run conf/dqn_btc.yaml` (16 trials) against the goal of two minutes on 2 cores;
- `python -m experiments.run conf/sac_btc.yaml` (8 trials) against that dqn_btc run: at most 1.5x its wall time.

Each runs in a fresh process with a fresh storage root and MLflow store in a temporary folder (--quick: their smoke
budget, `--smoke-test`, and no goals). Where each run's time went comes from the run itself: when each of its phases
began (its `--status-file`) and Tune's result of every trial iteration (`time_this_iter_s`, `time_total_s`,
`timestamp`): planning, Ray's start, the trials' training, what happens between their iterations (checkpoints,
results), trial starts and ends, scoring and registration, and the shutdown.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.benchmark.common import REPO, Budget, Figure, Report, load_average

DQN, SAC = "conf/dqn_btc.yaml", "conf/sac_btc.yaml"
GOAL_S = 120.0       # dqn_btc's wall time on 2 cores
GOAL_RATIO = 1.5     # sac_btc's wall time over dqn_btc's


@dataclass(frozen=True)
class TrialTimes:
    """One trial as its Tune results tell it: when its first iteration began and its last ended (epoch seconds,
    Tune's whole-second timestamps), the seconds its iterations took, and the env steps it sampled."""

    name: str
    start: float
    end: float
    train_s: float
    iterations: int
    env_steps: float

    @property
    def span_s(self) -> float:
        return self.end - self.start


def read_trials(tune_root: Path) -> list[TrialTimes]:
    """Every trial under a run's Tune folder(s) (`<output>/<name>/tune/<sweep>/<trial>/result.json`)."""
    trials = []
    for path in sorted(tune_root.rglob("result.json")):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if not rows:
            continue
        first, last = rows[0], rows[-1]
        trials.append(TrialTimes(path.parent.name, float(first["timestamp"]) - float(first["time_this_iter_s"]),
                                 float(last["timestamp"]), float(last["time_total_s"]), len(rows),
                                 float(last.get("num_env_steps_sampled_lifetime") or 0.0)))
    return trials


def most_at_once(trials: list[TrialTimes]) -> int:
    """The most trials whose spans overlap (the sweep's slots)."""
    events = sorted([(t.start, 1) for t in trials] + [(t.end, -1) for t in trials], key=lambda e: (e[0], e[1]))
    running = best = 0
    for _, change in events:
        running += change
        best = max(best, running)
    return max(best, 1)


def breakdown(started: float, ended: float, phase_started: dict[str, float],
              trials: list[TrialTimes]) -> list[tuple[str, float]]:
    """The run's wall time by phase, in seconds, adding up to `ended - started`. The sweep's share is split per slot
    (trials at once): their iterations, the gaps between iterations, and the rest (trial starts and ends, Tune)."""
    marks = {phase: phase_started.get(phase) for phase in ("starting", "training", "scoring", "done")}
    if any(value is None for value in marks.values()):
        return [("whole run (the run wrote no phase times)", ended - started)]
    sweep = marks["scoring"] - marks["training"]
    slots = most_at_once(trials) if trials else 1
    training = sum(t.train_s for t in trials) / slots
    between = sum(max(t.span_s - t.train_s, 0.0) for t in trials) / slots
    return [
        ("plan: imports, checks, features", marks["starting"] - started),
        ("Ray start, MLflow experiment and parent run", marks["training"] - marks["starting"]),
        ("trials' iterations (env steps, updates, per-iteration evaluation), per slot", training),
        ("between iterations (checkpoints, results), per slot", between),
        ("trial starts and ends (worker, imports, algorithm and env runners), Tune", sweep - training - between),
        ("scoring: backtests, feature importance, MLflow logging, registration", marks["done"] - marks["scoring"]),
        ("shutdown: Ray, MLflow runs closed, exit", ended - marks["done"]),
    ]


def describe(phases: list[tuple[str, float]]) -> str:
    total = sum(seconds for _, seconds in phases) or 1.0
    return "; ".join(f"{name} {seconds:.1f} s ({seconds / total:.0%})" for name, seconds in phases)


def run_job(conf: str, root: Path, smoke: bool) -> dict[str, Any]:
    """`python -m experiments.run CONF` in a fresh process, storage root and MLflow store under `root`: its wall
    time, its phases and its trials."""
    root.mkdir(parents=True)
    status = root / "status.json"
    command = [sys.executable, "-m", "experiments.run", conf, *(["--smoke-test"] if smoke else []),
               "--output", str(root / "runs"), "--status-file", str(status)]
    environment = {**os.environ, "PYTHONPATH": str(REPO), "MLFLOW_TRACKING_URI": f"sqlite:///{root / 'mlflow.db'}"}
    load_before = load_average()
    started = time.time()
    proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=3600, env=environment)
    ended = time.time()
    if proc.returncode != 0:
        raise RuntimeError(f"{conf} failed ({proc.returncode}): {(proc.stdout + proc.stderr)[-800:]}")
    fields = json.loads(status.read_text()) if status.exists() else {}
    trials = read_trials(root / "runs")
    phases = breakdown(started, ended, fields.get("phase_started", {}), trials)
    rates = sorted(t.env_steps / t.train_s for t in trials if t.train_s > 0)
    return {"conf": conf, "wall_s": ended - started, "phases": dict(phases), "run_timings": fields.get("timings"),
            "trials": len(trials), "trials_at_once": most_at_once(trials) if trials else 0,
            "trial_train_s_sum": sum(t.train_s for t in trials),
            "env_steps_per_s_per_trial": [round(rates[0]), round(rates[len(rates) // 2]), round(rates[-1])]
            if rates else None,
            "load_average_before": load_before, "load_average_after": load_average(),
            "took_line": next((line for line in proc.stdout.splitlines() if line.startswith("took ")), "")}


def run(budget: Budget) -> Report:
    smoke = budget.quick
    with tempfile.TemporaryDirectory() as folder:
        dqn = run_job(DQN, Path(folder) / "dqn_btc", smoke)
        sac = run_job(SAC, Path(folder) / "sac_btc", smoke)
    ratio = sac["wall_s"] / dqn["wall_s"]
    scope = "the smoke budget (--quick): the goals are the full runs'" if smoke else "the shipped files"
    rates = "; {} trials, {} at once, env steps/s per trial min/median/max {}"
    return Report("jobs", __doc__.splitlines()[0], "python -m experiments.run", "see each row", [
        Figure(f"{DQN} from the command line, wall time", "s", dqn["wall_s"], None, higher_is_better=False,
               target=f"<= {GOAL_S:.0f} s", met=None if smoke else dqn["wall_s"] <= GOAL_S,
               note=f"{scope}{rates.format(dqn['trials'], dqn['trials_at_once'], dqn['env_steps_per_s_per_trial'])}:"
                    f" {describe(list(dqn['phases'].items()))}"),
        Figure(f"{SAC} vs {DQN}, wall time", "s", sac["wall_s"], dqn["wall_s"], higher_is_better=False,
               target=f"<= {GOAL_RATIO}x", met=None if smoke else ratio <= GOAL_RATIO,
               note=f"{scope}{rates.format(sac['trials'], sac['trials_at_once'], sac['env_steps_per_s_per_trial'])}:"
                    f" {describe(list(sac['phases'].items()))}"),
    ], {"dqn_btc": dqn, "sac_btc": sac, "sac_over_dqn": ratio, "budget": scope})
