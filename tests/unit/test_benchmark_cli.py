"""`python -m experiments.benchmark`: arguments, budgets, JSON shape; the env and cli benchmarks with tiny budgets.

No test here asserts a wall-clock time or a ratio: they depend on the machine and its load.
"""
from __future__ import annotations

import importlib.util
import json

import pytest

from experiments.benchmark import BENCHMARKS
from experiments.benchmark.__main__ import main, parse_args
from experiments.benchmark.common import Budget, Figure, machine, versions

HAS_ANYTRADING = importlib.util.find_spec("gym_anytrading") is not None


def test_parse_defaults_to_all():
    args = parse_args([])
    assert args.names == list(BENCHMARKS)
    assert {"env", "train", "solve", "tracking"} <= set(BENCHMARKS)


def test_parse_rejects_unknown_benchmark(capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_args(["envs"])
    assert exit_info.value.code == 2
    assert "unknown benchmark" in capsys.readouterr().err


def test_parse_rejects_non_positive_steps():
    with pytest.raises(SystemExit):
        parse_args(["env", "--steps", "0"])


def test_budget_pick():
    assert Budget().pick(full=100, quick=3) == 100
    assert Budget(quick=True).pick(full=100, quick=3) == 3
    assert Budget(steps=7, quick=True).pick(full=100, quick=3) == 7


def test_figure_ratio_is_platform_over_peer():
    assert Figure("x", "steps/s", 30.0, 10.0).ratio == 3.0
    assert Figure("x", "s", 5.0, None).ratio is None
    assert Figure("x", "s", None, 2.0).as_dict()["ratio"] is None


def test_machine_and_versions_describe_this_box():
    described = machine()
    assert described["logical_cpus"] >= 1 and described["cpu"]
    assert versions()["python"]


@pytest.mark.skipif(not HAS_ANYTRADING, reason='gym-anytrading is not installed: pip install -e ".[bench]"')
def test_env_benchmark_tiny_budget_writes_json(tmp_path):
    assert main(["env", "--quick", "--steps", "400", "--output", str(tmp_path)]) == 0
    document = json.loads((tmp_path / "env.json").read_text())
    assert document["benchmark"] == "env"
    assert {"machine", "versions", "figures", "budget", "details"} <= set(document)
    assert document["budget"]["steps"] == 400
    assert document["machine"]["load_average_1_5_15_before"] is not None
    for figure in document["figures"]:
        assert figure["platform"] > 0 and figure["peer"] > 0 and figure["unit"] == "steps/s"


@pytest.mark.skipif(not HAS_ANYTRADING, reason='gym-anytrading is not installed: pip install -e ".[bench]"')
def test_a_run_without_output_writes_under_runs_and_leaves_the_tracked_results_alone(tmp_path, monkeypatch):
    """A user's benchmark run must not dirty their checkout: the default is runs/benchmarks (untracked, under the
    working folder); the tracked benchmarks/results/*.json change only with --output benchmarks/results."""
    from tests.conftest import REPO

    tracked = REPO / "benchmarks" / "results" / "env.json"
    before = tracked.read_bytes()
    monkeypatch.chdir(tmp_path)
    assert main(["env", "--quick", "--steps", "400"]) == 0
    assert json.loads((tmp_path / "runs" / "benchmarks" / "env.json").read_text())["budget"]["steps"] == 400
    assert tracked.read_bytes() == before


def test_missing_peer_is_skipped_with_install_hint(tmp_path, monkeypatch, capsys):
    import experiments.benchmark.common as common

    def fail(budget):
        raise common.PeerMissing(f"gym-anytrading is not installed: {common.BENCH_EXTRA}")

    monkeypatch.setitem(common.BENCHMARKS, "env", "tests.unit.test_benchmark_cli:_unused")
    monkeypatch.setattr(common, "run_benchmark", lambda name, budget, argv: fail(budget))
    assert main(["env", "--quick", "--output", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "skipped env" in out and "bench" in out
    assert not (tmp_path / "env.json").exists()


def test_cli_benchmark_times_a_dry_run(tmp_path):
    assert main(["cli", "--quick", "--output", str(tmp_path)]) == 0
    figure = json.loads((tmp_path / "cli.json").read_text())["figures"][0]
    assert figure["platform"] > 0 and figure["target"] == "<= 3 s"
