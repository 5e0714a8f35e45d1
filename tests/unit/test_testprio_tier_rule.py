"""The shipped execution agent's tier rule (issue 51): it never runs a test that failed within the heuristic's window
behind one that did not, its comparator reorders only the heuristic's own ties, and with a zero residual (a comparator
that never swaps) it ranks exactly as the recent-failures heuristic, on every cycle and through the served model's
reader."""
from pathlib import Path

import numpy as np
import pytest

from envs.agents.testprio import baselines
from envs.agents.testprio.config import parse_config
from envs.agents.testprio.cycle_reader import PairwiseCycleReader
from envs.agents.testprio.data import parse_retecs
from envs.agents.testprio.dataset import prepare
from envs.agents.testprio.evaluate import HEURISTIC, agent_order, baseline_orders, evaluate_pairwise_policy
from envs.agents.testprio.ranking import cycle_tiers, order_cycle
from envs.agents.testprio.synthetic import generate_recurring_frame
from experiments.config.load import load_experiment

CONF = Path(__file__).resolve().parents[2] / "conf/dqn_testprio_cross.yaml"
RANKING_KEYS = ("features", "history_window", "tiers", "tier_window", "residual_rounds")


def shipped(**extra):
    """The shipped conf's ranking settings (its tiers, tier window and residual bound) on another history."""
    env_config = load_experiment(CONF).environment.env_config
    return {**{key: env_config[key] for key in RANKING_KEYS if key in env_config}, "mode": "pairwise", **extra}


def never_swaps(observations):
    """A zero residual: "left first" in both presentations is a split vote, so no neighbour is ever swapped."""
    return np.zeros(len(observations), dtype=np.int64)


@pytest.fixture(scope="module")
def recurring(tmp_path_factory):
    """A CI history whose failures recur at 5-20 runs, as a RETECS file."""
    path = tmp_path_factory.mktemp("recurring") / "recurring.csv"
    generate_recurring_frame(n_cycles=120, n_tests=50, seed=2000).to_csv(path, sep=";", index=False)
    return str(path)


def test_a_test_that_last_failed_seven_runs_ago_runs_before_every_test_that_never_failed():
    config = parse_config(shipped())
    window = config.history_window
    verdicts = ["0000001000"] + ["0000000000"] * 5 + ["1000000000"]  # failed 7 runs ago; never; in the last run
    durations = np.array([100.0, 1.0, 2.0, 3.0, 4.0, 5.0, 50.0])  # the old failure is the longest test
    rates = np.array([0.1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.1])
    features = np.column_stack([np.array([[float(c) for c in row[:window]] for row in verdicts]), durations / 100])

    def shorter_first(observations):  # a comparator that learned only "shorter first": against the old failure
        width = features.shape[1]
        return (observations[:, width - 1] > observations[:, 2 * width - 1]).astype(np.int64)

    tiers = cycle_tiers(features, config.tiers, window, config.tier_runs(window), rates, durations)
    assert tiers[6] < tiers[0] < tiers[1:6].min()
    order = order_cycle(shorter_first, features, np.arange(7), mode="pairwise", priority_buckets=2,
                        tiers=config.tiers, window=window, tier_window=config.tier_runs(window), durations=durations,
                        failure_rates=rates, residual_rounds=config.residual_rounds)
    assert order.tolist()[:2] == [6, 0]  # the last run's failure, then the one of 7 runs ago, then the rest


def test_the_shipped_tiers_are_the_heuristics_own_ties(recurring):
    """The comparator may reorder only tests the heuristic cannot tell apart: the same verdict window, failure rate
    and estimated duration (so it never overrides the heuristic where the heuristic has a reason)."""
    config = parse_config(shipped(data_path=recurring))
    data = prepare(config)
    window, history = data.window, data.history
    keys = np.column_stack([history.history[:, :window] == 1, history.failure_rates,
                            data.features.duration_estimates])
    shared = 0
    for cycle in range(history.n_cycles):
        span = history.rows(cycle)
        tiers = cycle_tiers(data.features.matrix[span], config.tiers, window, config.tier_runs(window),
                            history.failure_rates[span], data.features.duration_estimates[span])
        for tier in np.unique(tiers):
            members = keys[span][tiers == tier]
            assert (members == members[0]).all(), (cycle, tier)
            shared += len(members) - 1
    assert shared > 0  # there are ties to break


def test_with_a_zero_residual_the_agent_ranks_every_cycle_as_the_heuristic(recurring):
    config = parse_config(shipped(data_path=recurring))
    data = prepare(config)
    rng = np.random.default_rng(0)
    compared = 0
    for cycle in np.flatnonzero(data.history.cycle_sizes >= 2):
        span = data.history.rows(cycle)
        agent = agent_order(never_swaps, config, data, span, rng.permutation(span.stop - span.start))
        assert np.array_equal(agent, baseline_orders(data, span, rng)[HEURISTIC]), cycle
        compared += 1
    assert compared > 100
    table = evaluate_pairwise_policy(never_swaps, shipped(data_path=recurring)).table
    assert table.loc["agent", "cycles_with_failures"] > 10
    for column in ("paper_apfdc", "paper_apfd", "paper_nrpa", "apfdc"):
        assert table.loc["agent", column] == table.loc[HEURISTIC, column], column
    assert not table.loc["agent", "below_heuristic"]


def test_the_served_model_with_a_zero_residual_ranks_a_cycles_table_as_the_heuristic(recurring):
    reader = PairwiseCycleReader.for_env_config(shipped(data_path=recurring))
    frame = generate_recurring_frame(n_cycles=120, n_tests=50, seed=2000)
    window = parse_config(shipped()).history_window
    for cycle in (40, 80, 120):
        table = frame[frame["Cycle"] == cycle].reset_index(drop=True)
        history = parse_retecs(table.astype(str), "one cycle")
        heuristic = baselines.recent_failures_order(history.history[:, :window], history.failure_rates,
                                                    history.duration_estimates)
        assert reader.decide(table, never_swaps)["row"].tolist() == heuristic.tolist()


@pytest.mark.parametrize(("tiers", "expected"), [
    ("heuristic", [0, 1, 2, 3, 3]),         # every key tied: only the last two share a tier
    ("failure_record", [0, 1, 2, 2, 2]),    # the window and the failure rate: the duration is the policy's
    ("recent_failures", [0, 1, 1, 1, 1]),   # the newest run only (tier_window 1): older failures are the policy's
])
def test_each_tier_rule_ties_its_share_of_the_heuristics_keys(tiers, expected):
    features = np.array([[1, 0], [0, 1], [0, 0], [0, 0], [0, 0]], dtype=np.float32)  # last run, run before, never
    rates = np.array([0.5, 0.5, 0.2, 0.2, 0.2])
    durations = np.array([9.0, 9.0, 1.0, 3.0, 3.0])
    tier_window = 1 if tiers == "recent_failures" else None
    assert cycle_tiers(features, tiers, 2, tier_window, rates, durations).tolist() == expected
