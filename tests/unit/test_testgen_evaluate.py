"""Scoring on held-out programs: the report, the baselines' equal footing, and the Atheris peer."""

import numpy as np
import pytest

from envs import family
from envs.agents.testgen import atheris_peer
from envs.agents.testgen.baselines import GreedyStrategy, RandomStrategy
from envs.agents.testgen.config import parse_config
from envs.agents.testgen.env import TestGenerationEnv
from envs.agents.testgen.evaluate import (
    Run,
    evaluate_policy,
    findings_frame,
    paired_with_agent,
    run_all,
    run_strategy,
)

BASELINES = [b.name for b in family("agents/TestGeneration-v0").baseline_table()]  # read, never pinned
needs_atheris = pytest.mark.skipif(not atheris_peer.atheris_installed(), reason="atheris not installed")


def always(action: int):
    return lambda observations: np.full(len(observations), action)


def test_the_report_has_a_row_per_strategy_and_a_curve_per_execution(monkeypatch):
    monkeypatch.setattr(atheris_peer, "atheris_installed", lambda: False)
    report = family("agents/TestGeneration-v0").evaluator()(always(7), {"eval_budget": 80, "eval_seeds": 2})
    assert list(report.table.index) == ["agent", *BASELINES]
    assert {"arcs", "arcs_std", "gained", "lines", "crashes", "execs_per_s"} <= set(report.table.columns)
    assert list(report.series.index) == list(range(81)) and report.series.notna().all().all()
    assert (report.series.diff().dropna() >= 0).all().all()  # coverage never shrinks
    assert report.agent_metrics["eval/arcs"] == report.table.loc["agent", "arcs"] == report.series["agent"].iloc[-1]
    assert np.isclose(report.agent_metrics["eval/arcs_vs_random"],
                      report.table.loc["agent", "arcs"] - report.table.loc["random", "arcs"])
    assert "eval/arcs_vs_atheris" not in report.agent_metrics
    assert any("80 executions after the seeds" in note and "tomllib" in note for note in report.notes)
    assert atheris_peer.NOT_INSTALLED in report.notes


def test_strategies_share_the_envs_mechanics_and_differ_only_by_their_choices():
    env = TestGenerationEnv({"split": "test", "budget": 50})
    first = run_strategy(env, RandomStrategy(env.action_space.n, 1), "tomllib", 1, "random")
    again = run_strategy(env, RandomStrategy(env.action_space.n, 1), "tomllib", 1, "random")
    greedy = run_strategy(env, GreedyStrategy(env.action_space.n, 1), "tomllib", 1, "greedy")
    assert np.array_equal(first.curve, again.curve) and first.curve[0] == greedy.curve[0]
    assert len(first.curve) == len(greedy.curve) == 51


def test_findings_are_listed_once_per_strategy_and_site_with_their_input(monkeypatch):
    monkeypatch.setattr(atheris_peer, "atheris_installed", lambda: False)
    config = parse_config({"test_programs": ["html.parser"], "train_programs": ["email"], "eval_budget": 1500,
                           "eval_seeds": 2})
    runs, _ = run_all(always(6), config)  # token-heavy schedule on corpus entries: "<![" tokens reach the asserts
    frame = findings_frame(runs)
    assert not frame.duplicated(["strategy", "program", "exception", "location"]).any()
    assert set(frame["exception"]) <= {"AssertionError"} and len(frame) > 0
    report = evaluate_policy(always(6), config.model_dump())
    assert report.table["crashes"].sum() == len(frame)
    assert sum("html.parser: AssertionError at _markupbase.py" in note for note in report.notes) == len(frame)


@needs_atheris
def test_atheris_runs_the_budget_and_returns_a_coverage_curve():
    run = atheris_peer.run_atheris("tomllib", budget=200, seed=0, max_input_bytes=64)
    env = TestGenerationEnv({"split": "test", "budget": 1})
    _, info = env.reset(seed=0)
    assert len(run.curve) == 201 and (np.diff(run.curve) >= 0).all()
    assert run.curve[0] >= info["coverage"] and run.curve[-1] > run.curve[0]
    assert run.execs_per_s > 0 and run.lines > 0


@needs_atheris
def test_the_report_has_an_atheris_row_when_it_is_installed():
    report = evaluate_policy(always(0), {"eval_budget": 50, "eval_seeds": 1})
    assert list(report.table.index) == ["agent", *BASELINES, "atheris"]
    assert "eval/arcs_vs_atheris" in report.agent_metrics
    assert len(report.series["atheris"]) == 51


def test_the_paired_columns_compare_the_agent_with_each_strategy_on_the_same_seeds():
    def run(strategy: str, seed: int, final: int) -> Run:
        return Run(strategy, "tomllib", seed, np.array([100, final]), 0, [], 1.0)

    runs = [run("agent", 0, 130), run("random", 0, 120), run("agent", 1, 110), run("random", 1, 114),
            run("agent", 2, 150), run("random", 2, 141)]
    paired = paired_with_agent(runs)
    assert list(paired.index) == ["random"]
    differences = np.array([10, -4, 9])
    assert np.isclose(paired.loc["random", "agent_minus"], differences.mean())
    assert np.isclose(paired.loc["random", "agent_minus_se"], differences.std(ddof=1) / np.sqrt(3))
    assert paired.loc["random", "agent_ahead"] == 2


def test_a_second_checkpoint_with_the_same_config_reuses_the_baseline_runs(monkeypatch):
    """A sweep scores every trial's checkpoint with one env_config: the baselines run once per process."""
    monkeypatch.setattr(atheris_peer, "atheris_installed", lambda: False)
    config = parse_config({"eval_budget": 40, "eval_seeds": 2, "seed": 7})
    first, _ = run_all(always(0), config)
    second, _ = run_all(always(5), config)
    def split(runs):
        return [r for r in runs if r.strategy == "agent"], [r for r in runs if r.strategy != "agent"]

    (agent_first, baseline_first), (agent_second, baseline_second) = split(first), split(second)
    assert len(baseline_first) == len(BASELINES) * 2  # every baseline on each of the 2 seeds
    assert all(a is b for a, b in zip(baseline_first, baseline_second, strict=True))
    assert len(agent_second) == 2 and all(a is not b for a, b in zip(agent_first, agent_second, strict=True))
