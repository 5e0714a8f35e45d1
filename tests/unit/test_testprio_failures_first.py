"""An execution agent that finds failures first (issue 41): the heuristic's tiers the agent orders within, the
pairwise reward built on APFDc, model selection on the failing validation cycles, and the registry's guard."""
from itertools import pairwise
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest

from envs.agents.testprio import baselines
from envs.agents.testprio.config import parse_config
from envs.agents.testprio.env import PairwiseTestPrioritizationEnv, PointwiseTestPrioritizationEnv
from envs.agents.testprio.evaluate import (
    MIN_SELECTION_FAILING_CYCLES,
    evaluate_pairwise_policy,
    guard_tags,
    selection_note,
    validation_scores,
)
from envs.agents.testprio.ranking import (
    failure_tiers,
    order_cycle,
    rank_within_tiers,
    residual_transpositions,
)
from envs.errors import InputError
from experiments.api.serving import model_warnings
from experiments.results.promotion import resolve_version
from experiments.run import main as run_main

IOFROL = str(Path(__file__).resolve().parents[2] / "data/testprio/iofrol.csv")


def windows(*rows: str) -> np.ndarray:
    """Feature rows whose first columns are verdict windows ("10-" = failed last run, passed before, no run)."""
    code = {"1": 1.0, "0": 0.0, "-": -1.0}
    return np.array([[code[c] for c in row] + [0.5] for row in rows], dtype=np.float32)


def test_tiers_follow_the_heuristics_order_of_recent_failures():
    features = windows("000", "100", "010", "110", "0-0", "001", "100")
    tiers = failure_tiers(features, 3)
    # failed in the last two runs, then the last run only, then the run before, then three runs ago, then never
    assert tiers.tolist() == [4, 1, 2, 0, 4, 3, 1]
    history = np.where(features[:, :3] < 0, -1, features[:, :3]).astype(np.int8)
    heuristic = baselines.recent_failures_order(history, np.zeros(7), np.zeros(7))
    assert np.all(np.diff(tiers[heuristic]) >= 0)  # the heuristic's order runs the tiers in this order
    # a whole history at once (its cycle offsets) is each cycle on its own
    stacked = np.concatenate([features, features[::-1], features[:2]])
    offsets = np.array([0, 7, 14, 16])
    together = failure_tiers(stacked, 3, offsets)
    assert together.tolist() == [t for a, b in pairwise(offsets) for t in failure_tiers(stacked[a:b], 3)]


@pytest.mark.parametrize("mode", ["pairwise", "pointwise"])
def test_the_policy_orders_within_tiers_and_never_across_them(mode):
    rng = np.random.default_rng(0)
    features = np.column_stack([(rng.random((60, 4)) < 0.2).astype(np.float32), rng.random((60, 3))])
    width = features.shape[1] * (2 if mode == "pairwise" else 1)

    def contrary(observations):  # prefers the right test / the lowest bucket: against whatever comes first
        assert observations.shape[1] == width
        return np.ones(len(observations), dtype=np.int64) if mode == "pairwise" else (
            (observations[:, 4] * 10).astype(np.int64))

    tiebreak = rng.permutation(60)
    order = order_cycle(contrary, features, tiebreak, mode=mode, priority_buckets=10, tiers="recent_failures",
                        window=4)
    tiers = failure_tiers(features, 4)
    assert sorted(order.tolist()) == list(range(60)) and np.all(np.diff(tiers[order]) >= 0)
    untiered = order_cycle(contrary, features, tiebreak, mode=mode, priority_buckets=10, tiers="none", window=4)
    assert np.any(np.diff(tiers[untiered]) < 0)  # without tiers the same policy runs an old failure first


def test_pairs_are_drawn_within_tiers_and_the_apfdc_reward_is_what_the_choice_is_worth():
    env = PairwiseTestPrioritizationEnv(data_path=IOFROL, features="portable", history_window=10, max_cycles=80,
                                        tiers="recent_failures", pair_reward="apfdc", pairs_per_cycle=64)
    env.reset(seed=3)
    window = env.data.window
    left, right = env._features[env._left][:, :window] == 1, env._features[env._right][:, :window] == 1
    assert np.array_equal(left, right) and np.all(env._left != env._right)
    failed = env._verdicts
    mixed = failed[env._left] != failed[env._right]
    assert mixed.any()  # iofrol fails within tiers too: the (failing, passing) pairs are drawn
    t_left, t_right = env._durations[env._left], env._durations[env._right]
    passing = np.where(failed[env._left], t_right, t_left)
    expected = np.where(failed[env._left], 1.0, -1.0) * passing / (t_left + t_right)
    assert np.allclose(env._target[mixed], expected[mixed])
    same = ~mixed & (t_left + t_right > 0)
    shorter_left = np.sign(t_right - t_left)
    assert np.allclose(env._target[same], (shorter_left * np.abs(t_left - t_right) / (2 * (t_left + t_right)))[same])
    assert np.abs(env._target).max() <= 1.0


def test_model_selection_scores_apfdc_on_failing_validation_cycles_and_says_on_how_many():
    config = {"data_path": IOFROL, "features": "portable", "history_window": 10, "max_cycles": 120,
              "validation_fraction": 0.15, "split": "validation", "tiers": "recent_failures"}
    scores = validation_scores(lambda obs: np.zeros(len(obs), dtype=np.int64), {**config, "mode": "pairwise"})
    assert scores["failing_cycles"] >= MIN_SELECTION_FAILING_CYCLES and scores["score"] == scores["apfdc"]
    assert 0.0 < scores["apfdc"] < 1.0 and 0.0 < scores["nrpa"] <= 1.0 and scores["cycles"] >= scores["failing_cycles"]
    note = selection_note(parse_config(config))
    assert f"APFDc on the {int(scores['failing_cycles'])} failing cycles" in note
    # the synthetic default history: its few validation cycles rarely fail, so selection falls back to NRPA
    few = validation_scores(lambda obs: np.zeros(len(obs), dtype=np.int64),
                            {"validation_fraction": 0.05, "split": "validation", "max_cycles": 40})
    assert few["failing_cycles"] < MIN_SELECTION_FAILING_CYCLES and few["score"] == few["nrpa"]
    assert "= NRPA: only" in selection_note(parse_config({"validation_fraction": 0.05, "max_cycles": 40}))


def test_the_guard_tags_a_model_below_the_heuristic_and_serve_warns(tmp_path):
    table = pd.DataFrame({"paper_apfdc": [0.40, 0.60]}, index=["agent", "recent_failures"])
    tags = guard_tags(table)
    assert tags["apfdc_below_heuristic"] == "true" and "finds failures later" in tags["warning"]
    assert "warning" not in guard_tags(table.assign(paper_apfdc=[0.6, 0.6]))
    assert guard_tags(table.assign(paper_apfdc=float("nan")))["apfdc_below_heuristic"] == "unknown"
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    client.create_registered_model("agent")
    for agent_tags in (tags, guard_tags(table.assign(paper_apfdc=[0.7, 0.6]))):
        client.create_model_version("agent", source=str(tmp_path), tags=agent_tags)
    flagged, passing = resolve_version(client, "models:/agent/1"), resolve_version(client, "models:/agent/2")
    assert model_warnings(flagged) == [f"warning: agent version 1: {tags['warning']}"]
    assert model_warnings(passing) == []


def test_the_evaluation_of_a_tiered_agent_ranks_the_learned_baseline_within_the_same_tiers():
    report = evaluate_pairwise_policy(lambda obs: np.zeros(len(obs), dtype=np.int64),
                                      {"data_path": IOFROL, "features": "portable", "max_cycles": 60,
                                       "tiers": "recent_failures"})
    assert "ranking within the same tiers as the agent" in " ".join(report.notes)
    table = report.table
    # a comparator that always says "left first" is a split vote on every pair: tiers, then the tie-break order
    assert table.loc["agent", "paper_apfd"] >= table.loc["random", "paper_apfd"]
    assert set(report.model_tags) >= {"apfdc_below_heuristic"}


def test_residual_rounds_move_a_test_at_most_two_places_a_round_from_the_prior():
    rng = np.random.default_rng(1)
    features = rng.random((40, 3)).astype(np.float32)

    def lower_first(observations):  # a consistent comparator: the test with the lower first feature runs first
        return (observations[:, 0] > observations[:, 3]).astype(np.int64)

    prior = rng.permutation(40)
    for rounds in (1, 3):
        order = residual_transpositions(lower_first, features, prior, rounds)
        moved = np.abs(np.argsort(order) - np.argsort(prior))
        assert sorted(order.tolist()) == list(range(40)) and moved.max() <= 2 * rounds and moved.max() > 0
    assert np.array_equal(residual_transpositions(lower_first, features, prior, 40), np.argsort(features[:, 0]))
    # a comparator that splits its vote on every pair (always "left first") keeps the prior
    assert np.array_equal(residual_transpositions(lambda obs: np.zeros(len(obs), dtype=np.int64), features, prior, 5),
                          prior)


def test_the_residual_starts_from_the_heuristics_own_order():
    features = windows("100", "000", "000", "100", "001")
    durations = np.array([5.0, 3.0, 1.0, 2.0, 2.0])
    rates = np.array([0.1, 0.2, 0.0, 0.1, 0.0])
    silent = lambda obs: np.zeros(len(obs), dtype=np.int64)  # noqa: E731
    order = order_cycle(silent, features, np.arange(5), mode="pairwise", priority_buckets=2, tiers="recent_failures",
                        window=3, tier_window=1, durations=durations, failure_rates=rates, residual_rounds=2)
    # the failed last run (shorter first), then the old failure, then the higher failure rate, then shorter
    assert order.tolist() == [3, 0, 4, 1, 2]


@pytest.mark.parametrize(("config", "message"), [
    ({"history_window": 4, "tier_window": 6, "tiers": "recent_failures"}, "tier_window 6 is longer"),
    ({"residual_rounds": 2}, "set tiers: heuristic"),
    ({"tiers": "heuristic", "tier_window": 4}, "'heuristic', which reads the whole window"),
])
def test_residual_settings_that_cannot_mean_anything_are_refused(config, message):
    with pytest.raises(InputError, match=message):
        parse_config(config)


def test_the_pointwise_env_refuses_residual_rounds():
    with pytest.raises(InputError, match="residual_rounds: the pointwise env"):
        PointwiseTestPrioritizationEnv(tiers="recent_failures", residual_rounds=2)


def test_all_tiers_in_one_transposition_sort_are_each_tiers_own_sort_in_fewer_policy_calls():
    rng = np.random.default_rng(4)
    features = np.column_stack([(rng.random((300, 4)) < 0.3).astype(np.float32), rng.random((300, 3))])
    durations = rng.lognormal(0.0, 1.0, 300)
    calls = []

    def noisy(observations):  # an inconsistent comparator: whatever it does, the two must agree
        calls.append(len(observations))
        return (np.sin(observations.sum(axis=1) * 97.0) > 0).astype(np.int64)

    rates = rng.random(300)
    batched = order_cycle(noisy, features, rng.permutation(300), mode="pairwise", priority_buckets=2,
                          tiers="recent_failures", window=4, durations=durations, failure_rates=rates,
                          residual_rounds=3)
    assert len(calls) <= 6
    tiers = failure_tiers(features, 4)
    heuristic = baselines.recent_failures_order(features[:, :4], rates, durations)

    def naive(members):  # every round asks every neighbour again: no cache, no early end
        order = members.copy()
        for _ in range(3):
            for parity in (0, 1):
                for i in range(parity, order.size - 1, 2):
                    pair = np.concatenate([features[[order[i], order[i + 1]]].ravel(),
                                           features[[order[i + 1], order[i]]].ravel()]).reshape(2, -1)
                    first, second = noisy(pair)
                    if first == 1 and second == 0:  # both presentations run the later test first
                        order[i], order[i + 1] = order[i + 1], order[i]
        return order

    assert np.array_equal(batched, rank_within_tiers(naive, tiers, heuristic))


@pytest.mark.parametrize("settings, fragment", [
    (["tune.metric=evaluation/validation/scroe"], "did you mean 'evaluation/validation/score'?"),
    (["evaluation.evaluation_interval=null"], "is scored after each evaluation, and evaluation.evaluation_interval is "
                                              "not set"),
])
def test_selecting_on_the_validation_score_is_checked_before_ray(capsys, settings, fragment):
    conf = Path(__file__).resolve().parents[2] / "conf/dqn_testprio_cross.yaml"
    argv = [str(conf), "--dry-run", "--output", "/nonexistent-never-written"]
    for setting in settings:
        argv += ["--set", setting]
    code = run_main(argv)
    err = capsys.readouterr().err
    assert code == 2 and fragment in err and err.count("\n") == 1, err
