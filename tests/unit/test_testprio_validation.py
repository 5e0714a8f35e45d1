"""The validation split, the extended features, the reward targets and the terminal score of the envs."""

from pathlib import Path

import numpy as np
import pytest

from envs.agents.testprio import metrics
from envs.agents.testprio.config import parse_config
from envs.agents.testprio.dataset import prepare
from envs.agents.testprio.env import (
    PairwiseTestPrioritizationEnv,
    PointwiseTestPrioritizationEnv,
    reward_targets,
)
from envs.errors import InputError

REAL_DATA = Path(__file__).resolve().parents[2] / "data/testprio"


def test_validation_split_sits_between_train_and_test():
    data = prepare(parse_config({"train_fraction": 0.7, "validation_fraction": 0.2}))
    n = data.history.n_cycles
    train, validation, test = data.train_cycles, data.validation_cycles, data.test_cycles
    assert train[-1] + 1 == validation[0] and validation[-1] + 1 == test[0] and test[-1] == n - 1
    assert validation.size == round(0.2 * n) and test.size == n - int(0.7 * n)
    env = PointwiseTestPrioritizationEnv(train_fraction=0.7, validation_fraction=0.2, split="validation")
    assert set(env._cycles) <= set(validation)
    train_env = PointwiseTestPrioritizationEnv(train_fraction=0.7, validation_fraction=0.2)
    assert set(train_env._cycles) <= set(train)


def test_the_test_split_does_not_move_with_a_validation_split():
    without = prepare(parse_config({}))
    with_validation = prepare(parse_config({"validation_fraction": 0.15}))
    assert np.array_equal(without.test_cycles, with_validation.test_cycles)


@pytest.mark.parametrize(
    "config, fragment",
    [
        ({"split": "validation"}, "validation_fraction"),
        ({"validation_fraction": 0.8}, "validation_fraction"),
        ({"features": "fancy"}, "env_config.features"),
        ({"reward": "apfd"}, "env_config.reward"),
        ({"terminal_score": "napfd"}, "env_config.terminal_score"),
        ({"duration_weight": 2}, "env_config.duration_weight"),
    ],
)
def test_bad_new_keys_name_the_key(config, fragment):
    with pytest.raises(InputError, match=fragment):
        PointwiseTestPrioritizationEnv(config)


def test_extended_features_are_finite_and_causal():
    basic = prepare(parse_config({}))
    extended = prepare(parse_config({"features": "extended"}))
    assert extended.features.dim == basic.features.dim + 7
    assert np.array_equal(extended.features.matrix[:, : basic.features.dim], basic.features.matrix)
    assert np.isfinite(extended.features.matrix).all() and np.abs(extended.features.matrix).max() <= 5
    # Same features whatever the verdicts of the current cycle: the loaders keep outcomes apart, and
    # the extended columns read only the stored history (previous runs) and cycle sizes.
    assert "failure_ema_0.5" in extended.features.names


def test_reward_targets():
    data = prepare(parse_config({}))
    history = data.history
    assert np.array_equal(reward_targets(data, "verdict", 0.0), history.verdicts.astype(float))
    rank = reward_targets(data, "optimal_rank", 0.0)
    blend = reward_targets(data, "verdict", 0.1)
    assert rank.min() >= 0 and rank.max() <= 1 and blend.min() >= 0 and blend.max() <= 1
    cycle = next(c for c in range(history.n_cycles) if 0 < history.verdicts[history.rows(c)].sum()
                 < history.cycle_sizes[c])
    span = history.rows(cycle)
    # Sorting by the rank target is an optimal order; failing tests outrank passing ones in the blend.
    order = np.argsort(-rank[span], kind="stable")
    assert metrics.nrpa(history.verdicts[span][order], history.durations[span][order]) == pytest.approx(1.0)
    assert blend[span][history.verdicts[span]].min() > blend[span][~history.verdicts[span]].max()


@pytest.mark.parametrize("score", ["apfd", "nrpa"])
def test_terminal_score_pays_the_cycles_score_at_its_last_step(score):
    env = PointwiseTestPrioritizationEnv(terminal_score=score, cycles_per_episode=2, priority_buckets=2)
    observation, _ = env.reset(seed=3)
    rewards, done = [], False
    while not done:
        observation, reward, done, _, _ = env.step(1)  # one bucket: the presentation order
        rewards.append(reward)
    ends = env._cycle_ends
    assert all(r == 0 for k, r in enumerate(rewards, 1) if k not in ends)
    for start, end in zip([0, *ends[:-1]], ends, strict=True):
        rows = env._rows[start:end]
        verdicts, durations = env.data.history.verdicts[rows], env.data.history.durations[rows]
        expected = metrics.apfd(verdicts) if score == "apfd" else metrics.nrpa(verdicts, durations)
        assert rewards[end - 1] == pytest.approx(expected)
    if score == "apfd":
        assert all(env.data.history.verdicts[env._rows[s:e]].any() for s, e in zip([0, *ends[:-1]], ends, strict=True))


def test_pairwise_env_takes_the_validation_split_and_extended_features():
    env = PairwiseTestPrioritizationEnv(validation_fraction=0.15, split="validation", features="extended")
    observation, _ = env.reset(seed=0)
    assert env.observation_space.contains(observation)


def test_real_iofrol_validation_split():
    config = parse_config({"data_path": str(REAL_DATA / "iofrol.csv"), "validation_fraction": 0.15})
    data = prepare(config)
    sizes = data.train_cycles.size + data.validation_cycles.size + data.test_cycles.size
    assert sizes == data.history.n_cycles
    assert data.test_cycles[0] == int(0.7 * data.history.n_cycles)
