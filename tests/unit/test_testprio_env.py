"""The pointwise and pairwise Gymnasium environments: API, seeding, rewards, config errors."""

import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
from gymnasium.utils.env_checker import check_env

import envs  # noqa: F401  (registers the env ids)
from envs.agents.testprio.env import PairwiseTestPrioritizationEnv, PointwiseTestPrioritizationEnv
from envs.errors import InputError

REAL_DATA = Path(__file__).resolve().parents[2] / "data/testprio"
ENV_IDS = ("agents/TestPrioritization-v0", "agents/TestPrioritizationPairwise-v0")


def rollout(env: gym.Env, seed: int, policy) -> tuple[list[np.ndarray], list[float]]:
    observation, _ = env.reset(seed=seed)
    observations, rewards = [observation], []
    while True:
        observation, reward, terminated, truncated, _ = env.step(policy(observation))
        observations.append(observation)
        rewards.append(reward)
        if terminated or truncated:
            return observations, rewards


def clean_history_file(tmp_path: Path) -> Path:
    """Ten cycles of two tests: 'A' always fails (duration 5) and 'B' always passes (duration 1)."""
    rows = []
    for cycle in range(1, 11):
        for name, verdict, duration in (("A", 1, 5), ("B", 0, 1)):
            past = "[" + ", ".join([str(verdict)] * cycle) + "]"
            rows.append(
                (len(rows) + 1, name, duration, 0, f"2020-01-{cycle:02d} 10:00:00", past, verdict, cycle)
            )
    frame = pd.DataFrame(
        rows, columns=["Id", "Name", "Duration", "CalcPrio", "LastRun", "LastResults", "Verdict", "Cycle"]
    )
    path = tmp_path / "clean.csv"
    frame.to_csv(path, sep=";", index=False)
    return path


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_make_with_no_config_passes_the_env_checker(env_id):
    env = gym.make(env_id)
    check_env(env.unwrapped)
    observation, _ = env.reset(seed=0)
    assert env.observation_space.contains(observation)
    assert np.isfinite(env.observation_space.low).all() and np.isfinite(env.observation_space.high).all()


@pytest.mark.parametrize("env_class", [PointwiseTestPrioritizationEnv, PairwiseTestPrioritizationEnv])
def test_same_seed_gives_the_same_episode(env_class):
    def policy(observation):
        return int(observation[0] > 0)

    first_obs, first_rewards = rollout(env_class({"cycles_per_episode": 2}), 11, policy)
    again_obs, again_rewards = rollout(env_class(cycles_per_episode=2), 11, policy)
    other_obs, _ = rollout(env_class({"cycles_per_episode": 2}), 12, policy)
    assert first_rewards == again_rewards
    assert all(np.array_equal(a, b) for a, b in zip(first_obs, again_obs, strict=True))
    assert len(first_obs) != len(other_obs) or not all(
        np.array_equal(a, b) for a, b in zip(first_obs, other_obs, strict=True)
    )


def test_first_reset_without_seed_uses_the_config_seed():
    first, _ = PointwiseTestPrioritizationEnv(seed=5).reset()
    again, _ = PointwiseTestPrioritizationEnv(seed=5).reset()
    assert np.array_equal(first, again)


def test_pointwise_reward_is_a_brier_score_of_the_bucket(tmp_path):
    env = PointwiseTestPrioritizationEnv(data_path=str(clean_history_file(tmp_path)), priority_buckets=5)
    # history_1 is 1 for the always-failing test: the right bucket earns 1 every step.
    _, rewards = rollout(env, 0, lambda obs: 4 if obs[0] == 1 else 0)
    assert rewards == [1.0, 1.0]
    _, rewards = rollout(env, 0, lambda obs: 0 if obs[0] == 1 else 4)
    assert rewards == [0.0, 0.0]
    _, rewards = rollout(env, 0, lambda obs: 2)
    assert rewards == [0.75, 0.75]


def test_pairwise_reward_follows_the_optimal_order(tmp_path):
    env = PairwiseTestPrioritizationEnv(data_path=str(clean_history_file(tmp_path)), pairs_per_cycle=8)
    width = env.observation_space.shape[0] // 2
    _, rewards = rollout(env, 0, lambda obs: 0 if obs[0] == 1 else 1)  # the failing test first
    assert rewards == [1.0] * 8
    _, rewards = rollout(env, 0, lambda obs: 0 if obs[width] == 1 else 1)  # the passing test first
    assert rewards == [-1.0] * 8


def test_pairwise_rewards_are_antisymmetric():
    _, left_first = rollout(PairwiseTestPrioritizationEnv(), 3, lambda obs: 0)
    _, right_first = rollout(PairwiseTestPrioritizationEnv(), 3, lambda obs: 1)
    assert set(left_first) <= {-1.0, 0.0, 1.0}
    assert left_first == [-r for r in right_first]
    assert any(left_first)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"history_windw": 3}, "did you mean 'env_config.history_window'"),
        ({"time_budget": 0}, "env_config.time_budget"),
        ({"split": "validation"}, "env_config.split"),
        ({"history_window": 100}, "env_config.history_window: Input should be less than or equal to 64"),
        ({"mode": "pairwise"}, "does not match this pointwise environment"),
        ({"data_path": "/nonexistent/ci.csv"}, "does not exist"),
        ({"max_cycles": 3, "train_fraction": 0.2}, "empty training or test split"),
    ],
)
def test_bad_config_raises_input_error(config, message):
    with pytest.raises(InputError, match=message):
        PointwiseTestPrioritizationEnv(config)


@pytest.mark.parametrize("file_name", ["iofrol.csv", "Commons_codec.csv"])
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_real_data_envs_pass_the_env_checker(env_id, file_name):
    """Gymnasium's checker raises on a broken API and warns on a doubtful one (dtypes, bounds, seeding): neither."""
    env = gym.make(env_id, data_path=str(REAL_DATA / file_name), max_cycles=120)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    assert [str(w.message) for w in caught] == []
