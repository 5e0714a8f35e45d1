"""`python -m experiments.benchmark`: arguments, budgets, JSON shape; the env, portfolio_env and cli benchmarks with
tiny budgets.

No test here asserts a wall-clock time or a ratio: they depend on the machine and its load.
"""
from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from experiments.benchmark import BENCHMARKS
from experiments.benchmark.__main__ import main, parse_args
from experiments.benchmark.common import Budget, Figure, machine, versions

HAS_ANYTRADING = importlib.util.find_spec("gym_anytrading") is not None
HAS_FINRL = importlib.util.find_spec("finrl") is not None


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


@pytest.mark.skipif(not HAS_FINRL, reason='finrl is not installed: pip install -e ".[bench]"')
def test_portfolio_env_benchmark_tiny_budget_writes_json_and_leaves_no_peer_plots(tmp_path, monkeypatch):
    """Both envs walk the same days at both (quick) sizes; FinRL's plots and CSVs stay in the temporary folder."""
    monkeypatch.chdir(tmp_path)
    assert main(["portfolio_env", "--quick", "--output", "out"]) == 0
    document = json.loads((tmp_path / "out" / "portfolio_env.json").read_text())
    assert document["versions"]["finrl"] == "0.3.7"
    assert len(document["figures"]) == 4
    for figure in document["figures"]:
        assert figure["platform"] > 0 and figure["peer"] > 0 and figure["unit"] == "steps/s"
    assert "no costs and holds no cash" in document["figures"][0]["note"]
    for n in (4, 8):
        measured = document["details"][f"n{n}"]
        assert measured["peer_observation_shape"] == [n + len(measured["features"]), n]
        assert measured["platform_steps_per_episode"] == measured["peer_steps_per_episode"] - 1 == 39
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_rolling_covariances_match_numpy_per_day():
    from experiments.benchmark.portfolio_env_bench import rolling_covariances

    returns = np.random.default_rng(0).normal(0.0, 0.02, size=(80, 4))
    covariances = rolling_covariances(returns, first=30, count=40, lookback=25)
    for i, day in enumerate(range(30, 70)):
        np.testing.assert_allclose(covariances[i], np.cov(returns[day - 25:day], rowvar=False), rtol=1e-9, atol=1e-15)


@pytest.mark.skipif(not HAS_FINRL, reason='finrl is not installed: pip install -e ".[bench]"')
def test_the_peer_observes_the_covariance_of_the_year_before_and_the_platforms_features(tmp_path):
    from envs.portfolio.config import PortfolioConfig
    from envs.portfolio.market import load_portfolio_market
    from experiments.benchmark import portfolio_env_bench as bench

    table = bench.write_table(3, bench.HISTORY_ROWS + 30 + bench.TEST_ROWS, 0, tmp_path / "closes.csv")
    market = load_portfolio_market(PortfolioConfig.from_dict(bench.platform_config(table, 30)))
    peer = bench.peer_env(bench.peer_module(), bench.peer_frame(market), 3, market.feature_names)
    state, _ = peer.reset()
    lo = market.bounds["validation"][0]
    closes = market.universe.closes[lo - bench.COV_LOOKBACK:lo + 1]
    np.testing.assert_allclose(state[:3], np.cov(closes[1:] / closes[:-1] - 1.0, rowvar=False), rtol=1e-9)
    np.testing.assert_array_equal(state[3:], market.features[:, lo, :].T)


def test_portfolio_env_without_finrl_names_the_install_command(monkeypatch):
    from experiments.benchmark import PeerMissing
    from experiments.benchmark import portfolio_env_bench as bench

    monkeypatch.setattr(bench.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(PeerMissing, match=r"finrl is not installed: pip install -e \".\[bench\]\""):
        bench.peer_module()


def test_reference_prints_one_line_with_the_machines_speed(tmp_path, capsys):
    """`reference` is the number the README gives beside each wall time: the best of its passes, in ms, on one line."""
    assert main(["reference", "--quick", "--output", str(tmp_path)]) == 0
    document = json.loads((tmp_path / "reference.json").read_text())
    (figure,) = document["figures"]
    details = document["details"]
    assert figure["unit"] == "ms" and figure["platform"] == min(details["samples_ms"]) > 0
    assert details["passes"] == len(details["samples_ms"]) == 20
    assert details["summary"] in capsys.readouterr().out.splitlines()  # whole, on one line, however wide the terminal
    assert details["summary"].startswith(
        f"reference: {figure['platform']:.2f} ms (TA-Lib alone, 30 indicators over the bundled 20,111 bars, best of 20")
