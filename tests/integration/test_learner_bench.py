"""`python -m experiments.benchmark learner` runs with a tiny budget, and the benchmark imports neither Ray, mlflow
nor pydantic: the update math it times needs torch alone (algos.fast.learner_math, algos.fast.losses); the direct
learner's row, which needs both (its env and its module), runs in a child process. Each check runs in a fresh
interpreter, so nothing this test session imported counts. No wall-clock time is asserted."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO

HEAVY = ("ray", "mlflow", "pydantic")


def test_the_quick_run_writes_a_row_per_algorithm_batch_and_variant(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "experiments.benchmark", "learner", "--quick", "--time-limit", "20",
                           "--output", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    document = json.loads((tmp_path / "learner.json").read_text())
    rows = document["details"]["rows"]
    assert {(r["algorithm"], r["batch"], r["variant"]) for r in rows} == {
        (a, b, v) for a in ("FastDQN", "FastSAC") for b in (32, 256) for v in ("fp32", "bf16")}
    figures, direct_figures = document["figures"][:len(rows)], document["figures"][len(rows):]
    assert all(f["peer"] is None for f in figures)  # the update math has no peer
    for row, figure in zip(rows, figures, strict=True):
        # Measured (updates/s and transitions/s agree), or skipped with the reason.
        assert (figure["platform"] is not None
                and row["transitions_per_s"] == pytest.approx(row["batch"] * figure["platform"])
                or row["note"].startswith("skipped")), row
    assert rows[0]["median_s"] is not None  # the cheapest row always fits
    # The direct learner's update at N = 20 against a PPO minibatch of the same net, measured in turn: a ratio (the
    # PPO update's time over the direct one's), or the reason its child did not finish.
    (direct,), (figure,) = document["details"]["direct_rows"], direct_figures
    assert (direct["assets"], direct["batch"], direct["peer_batch"]) == (20, 64, 256)
    assert figure["what"] == "direct update, 64 consecutive decisions, N = 20" and figure["target"] == ">= 1.0x peer"
    if direct["median_s"] is None:
        assert figure["ratio"] is None and "did not finish" in figure["note"], figure
    else:
        assert figure["ratio"] == pytest.approx(direct["peer_median_s"] / direct["median_s"])
        assert figure["met"] == (figure["ratio"] >= 1.0) and direct["updates"] >= 1


def test_the_benchmark_imports_no_ray_mlflow_or_pydantic():
    script = ("import json, sys\n"
              "from experiments.benchmark import learner_bench\n"
              "from experiments.benchmark.common import Budget\n"
              "report = learner_bench.run(Budget(quick=True, steps=1, time_limit_s=5))\n"
              f"print(json.dumps([m for m in sorted(sys.modules) if m.split('.')[0] in {HEAVY!r}]))\n"
              "print(len(report.figures))\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    heavy, figures = proc.stdout.strip().splitlines()[-2:]
    assert json.loads(heavy) == []
    assert int(figures) == 8 + 1  # and the direct row, from its child
