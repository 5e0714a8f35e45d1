"""The test-generation environment: Gymnasium API, seeding, rewards, observations and findings."""

import subprocess
import sys

import gymnasium as gym
import numpy as np
from gymnasium.utils.env_checker import check_env

import envs  # noqa: F401  (registers the env ids)
from envs.agents.testgen.env import FEATURES, TestGenerationEnv
from envs.agents.testgen.findings import Findings
from envs.agents.testgen.mutators import ACTIONS
from envs.agents.testgen.programs import PROGRAMS
from tests.conftest import REPO

SMALL = {"split": "test", "budget": 60}


def rollout(env: gym.Env, seed: int, actions: np.random.Generator, **reset) -> tuple[list, list, list]:
    observation, info = env.reset(seed=seed, **reset)
    observations, rewards, infos = [observation], [], [info]
    while True:
        observation, reward, terminated, truncated, info = env.step(int(actions.integers(len(ACTIONS))))
        observations.append(observation)
        rewards.append(reward)
        infos.append(info)
        if terminated or truncated:
            return observations, rewards, infos


def test_make_with_a_config_passes_the_env_checker():
    env = gym.make("agents/TestGeneration-v0", config={"budget": 30})
    check_env(env.unwrapped)
    observation, info = env.reset(seed=0)
    assert env.observation_space.contains(observation) and observation.shape == (len(FEATURES),)
    assert env.action_space.n == len(ACTIONS) and info["program"] in ("html.parser", "email", "markdown-it")


def test_same_seed_gives_the_same_episode_and_another_seed_another():
    env = TestGenerationEnv(SMALL)
    first = rollout(env, 3, np.random.default_rng(0))
    again = rollout(TestGenerationEnv(SMALL), 3, np.random.default_rng(0))
    other = rollout(env, 4, np.random.default_rng(0))
    assert all(np.array_equal(a, b) for a, b in zip(first[0], again[0], strict=True)) and first[1] == again[1]
    assert [i["coverage"] for i in first[2]] == [i["coverage"] for i in again[2]]
    assert any(not np.array_equal(a, b) for a, b in zip(first[0], other[0], strict=True))


def test_the_return_is_the_scaled_coverage_gained_and_the_episode_is_truncated_at_the_budget():
    env = TestGenerationEnv({**SMALL, "reward_scale": 0.5})
    _, rewards, infos = rollout(env, 0, np.random.default_rng(1))
    per_step = env.config.executions_per_step
    assert len(rewards) == -(-SMALL["budget"] // per_step) and infos[-1]["executions"] == SMALL["budget"]
    assert all(len(i["coverage_curve"]) == per_step for i in infos[1:-1])
    assert np.isclose(sum(rewards), 0.5 * (infos[-1]["coverage"] - infos[0]["coverage"]))
    assert sum(rewards) > 0 and all(r >= 0 for r in rewards)
    curve = np.array([infos[0]["coverage"], *(c for i in infos[1:] for c in i["coverage_curve"])])
    assert infos[-1]["corpus"] == len(PROGRAMS["tomllib"].seeds) + int((np.diff(curve) > 0).sum())
    assert env.coverage.arcs == infos[-1]["coverage"] and len(env.corpus) == infos[-1]["corpus"]


def test_repeated_episodes_of_one_process_measure_the_same():
    env = TestGenerationEnv({**SMALL, "budget": 200})
    finals = [rollout(env, 5, np.random.default_rng(2))[2][-1]["coverage"] for _ in range(2)]
    rollout(TestGenerationEnv({**SMALL, "test_programs": ["urllib.parse"]}), 0, np.random.default_rng(0))
    finals.append(rollout(env, 5, np.random.default_rng(2))[2][-1]["coverage"])
    assert finals[0] == finals[1] == finals[2]


EPISODE_AFTER = """
import sys
import numpy as np
from envs.agents.testgen.env import TestGenerationEnv
env = TestGenerationEnv({"split": "test", "test_programs": ["urllib.parse"], "budget": 1000})
for seed in [int(s) for s in sys.argv[1:]] + [9]:
    observation, _ = env.reset(seed=seed)
    actions, truncated = np.random.default_rng(seed), False
    while not truncated:
        _, _, _, truncated, info = env.step(int(actions.integers(12)))
print(info["coverage"])
"""


def test_an_episode_measures_the_same_first_in_a_fresh_process_or_after_others():
    """urllib.parse fills a module table on its first '%' (and urlsplit is memoized): without the harness'
    warm-up and cache clearing, the first episode of a process would get arcs no later one can."""
    def final_coverage(*before: str) -> int:
        done = subprocess.run([sys.executable, "-c", EPISODE_AFTER, *before], cwd=REPO, capture_output=True,
                              text=True, check=True, timeout=120)
        return int(done.stdout.split()[-1])

    assert final_coverage() == final_coverage("0", "1", "2", "3")


def test_the_observation_tracks_the_budget_the_input_and_each_actions_success():
    env = TestGenerationEnv({"split": "validation", "budget": 40})
    observation, _ = env.reset(seed=0)
    index = {name: i for i, name in enumerate(FEATURES)}
    assert observation[index["budget_used"]] == 0 and observation[index["success_blocks_either"]] == 0
    shares = observation[[i for name, i in index.items() if name.startswith("bytes_")]]
    assert np.isclose(shares.sum(), 1.0)
    assert np.isclose(observation[index["input_length"]], len(env.current) / 512)
    for _ in range(20 // env.config.executions_per_step + 1):  # 24 executions
        observation, _, _, _, info = env.step(0)
    assert np.isclose(observation[index["budget_used"]], 24 / 40)
    successes = observation[index["success_uniform_current"] :]
    assert (successes[1:] == 0).all() and (successes[0] > 0) == (env.corpus != list(env.harness.program.seeds))


def test_an_episode_reports_each_crash_site_once_with_an_input_that_reproduces_it():
    env = TestGenerationEnv({"split": "test", "test_programs": ["html.parser"], "train_programs": ["email"],
                             "budget": 2000})
    _, _, infos = rollout(env, 0, np.random.default_rng(0))
    crashes = [i for i in infos if i["outcome"] == "crash"]
    assert infos[-1]["crashes"] == len(env.findings) > 0 and len(crashes) >= len(env.findings)
    again = Findings(env.harness.files)
    for finding in env.findings.unique.values():
        execution, outcome = env.harness.execute(finding.input)
        assert outcome == "crash" and again.record(execution.error, finding.input)
    assert again.unique.keys() == env.findings.unique.keys()
