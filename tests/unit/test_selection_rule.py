"""A checkpoint's selection score as `tune.checkpoint.select` makes it (algos.inputs.SelectionRule), and the callback
that puts it in every result."""
from __future__ import annotations

import math

import pytest

from algos.inputs import SelectionRule
from algos.rllib.config import SELECTION_SCORE, copy_selection_score
from envs.errors import InputError
from experiments.api.preflight import check_selection
from experiments.config.load import load_experiment
from tests.conftest import REPO


def test_raw_smoothed_and_after_exploration_scores():
    history = [10.0, 50.0, 20.0, 30.0]
    assert SelectionRule().score(history, 4000, "max") == 30.0
    assert SelectionRule(smooth=3).score(history, 4000, "max") == pytest.approx(100 / 3)
    assert SelectionRule(smooth=3).score(history[:1], 1000, "max") == 10.0  # fewer iterations than the window
    assert SelectionRule(explore_until=5000).score(history, 4000, "max") == -math.inf
    assert SelectionRule(explore_until=5000).score(history, 5000, "min") == 30.0
    assert SelectionRule(smooth=2).score([1.0, math.nan], 9000, "min") == math.inf  # an iteration without a score


class FakeAlgorithm:
    """What the callback keeps its history on (RLlib hands it the Algorithm)."""


def test_the_callback_keeps_the_history_on_the_algorithm():
    algorithm, rule = FakeAlgorithm(), SelectionRule(smooth=2, explore_until=3000)
    scores = []
    for iteration, value in enumerate([5.0, 9.0, 1.0, 3.0], 1):
        result = {"evaluation": {"env_runners": {"episode_return_mean": value}},
                  "num_env_steps_sampled_lifetime": 1000 * iteration}
        copy_selection_score("evaluation/env_runners/episode_return_mean", "max", rule, result=result,
                             algorithm=algorithm)
        scores.append(result[SELECTION_SCORE])
    assert scores == [-math.inf, -math.inf, 5.0, 2.0]


def test_a_rule_that_leaves_no_checkpoint_is_refused():
    exp = load_experiment(REPO / "conf" / "dqn_btc.yaml", ["tune.stop={training_iteration: 4}"])
    with pytest.raises(InputError, match="exploration decays at 20000 env steps but a trial stops at about 16000"):
        check_selection(exp, "conf/dqn_btc.yaml")
    check_selection(load_experiment(REPO / "conf" / "dqn_btc.yaml"), "conf/dqn_btc.yaml")
