"""algos.families.testprio_online: the torch copy of an exported pairwise DQN computes what NumpyPolicy computes
(real, tiny RLlib DQN modules, untrained, no Ray cluster); a cold comparator learns online on a synthetic CI
stream where failures are predictable from one feature, and so does the periodic retrainer, which refits only
at multiples of `every`; updates on cycles with nothing to learn change nothing; a fork is independent."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from algos.export.numpy_policy import NumpyPolicy
from algos.families.testprio_online import OnlineComparator, PeriodicRetrainer
from envs.agents.testprio.metrics import apfd
from envs.agents.testprio.ranking import rank_pairwise
from envs.errors import InputError

FEATURES = 30  # a test's feature row; the pairwise observation is two of them
NOISE = 4      # distractor features of the synthetic stream
SEEDS = (0, 1, 2)
TIE = 1e-5     # top two Q-values closer than this: either action is greedy within float32 noise


@pytest.fixture(autouse=True)
def one_thread():
    """Two shared cores: one torch thread keeps the learning runs fast and their numbers repeatable."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _dqn_policy(training: dict | None = None, model_config: dict | None = None) -> NumpyPolicy:
    """An untrained RLlib DQN module for the pairwise env's observations, exported as the platform exports."""
    from ray.rllib.algorithms.dqn import DQNConfig

    import algos

    config = DQNConfig().environment(
        observation_space=gym.spaces.Box(-5, 5, (2 * FEATURES,), np.float32),
        action_space=gym.spaces.Discrete(2))
    if training:
        config = config.training(**training)
    if model_config:
        config = config.rl_module(model_config=model_config)
    torch.manual_seed(0)  # weights under which every case below takes both actions on _observations
    module = config.get_rl_module_spec().build()
    module.eval()
    return NumpyPolicy.from_arrays(algos.algorithm("dqn").export_numpy(module))


def _observations(rows: int, seed: int = 0) -> np.ndarray:
    drawn = np.random.default_rng(seed).standard_normal((rows, 2 * FEATURES)) * 1.5
    return np.clip(drawn, -5, 5).astype(np.float32)


@pytest.mark.parametrize("training, model_config", [
    (None, None),  # RLlib's default: dueling, tanh encoder
    ({"dueling": False}, None),
    (None, {"fcnet_hiddens": [32, 32], "fcnet_activation": "relu", "head_fcnet_hiddens": [16],
            "head_fcnet_activation": "elu"}),
    (None, {"fcnet_hiddens": [32, 32], "fcnet_activation": "silu", "fcnet_use_layernorm": True}),
], ids=["dueling default", "not dueling", "relu, elu heads", "layernorm silu"])
def test_from_policy_computes_what_the_numpy_policy_computes(training, model_config):
    policy = _dqn_policy(training, model_config)
    comparator = OnlineComparator.from_policy(policy)
    observations = _observations(500)
    expected = policy.outputs(observations)
    q_values = comparator.q_values(observations)
    scale = float(np.abs(expected).max())
    assert scale > 0
    assert float(np.abs(q_values - expected).max()) <= 1e-5 * scale
    gap = np.abs(expected[:, 0] - expected[:, 1])
    actions, greedy = comparator(observations), policy(observations)
    assert actions.dtype == np.int64 and actions.shape == (500,)
    assert np.array_equal(actions[gap > TIE], greedy[gap > TIE])
    assert len(np.unique(greedy)) == 2  # both actions occur, so equal actions say something


def test_from_policy_refuses_what_it_cannot_copy_in_one_line():
    from ray.rllib.algorithms.ppo import PPOConfig

    import algos

    ppo = PPOConfig().environment(observation_space=gym.spaces.Box(-5, 5, (4,), np.float32),
                                  action_space=gym.spaces.Discrete(2)).get_rl_module_spec().build()
    with pytest.raises(InputError, match="PPO policy") as refusal:
        OnlineComparator.from_policy(NumpyPolicy.from_arrays(algos.algorithm("ppo").export_numpy(ppo)))
    assert "\n" not in str(refusal.value)
    arrays = _dqn_policy().to_arrays()  # a DQN of three actions: its own af head, widened
    structure = str(arrays["structure"][()]).replace('"num_actions": 2', '"num_actions": 3')
    arrays.update({"structure": np.array(structure),
                   "af.0.weight": np.vstack([arrays["af.0.weight"]] * 2)[:3],
                   "af.0.bias": np.concatenate([arrays["af.0.bias"]] * 2)[:3]})
    with pytest.raises(InputError, match="3 actions"):
        OnlineComparator.from_policy(NumpyPolicy.from_arrays(arrays))


def _stream(n_cycles: int, seed: int, n_tests: int = 30) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Cycles of a fixed suite where failure is predictable from feature 0 (the test failed last time: it
    fails again with probability 0.8, else 0.05); feature 1 is the test's log typical duration, the rest
    noise."""
    rng = np.random.default_rng(seed)
    typical = rng.lognormal(3.0, 1.0, n_tests)
    failed_last = np.zeros(n_tests, dtype=bool)
    cycles = []
    for _ in range(n_cycles):
        verdicts = rng.random(n_tests) < np.where(failed_last, 0.8, 0.05)
        durations = typical * rng.lognormal(0.0, 0.1, n_tests)
        noise = rng.standard_normal((n_tests, NOISE))
        features = np.column_stack([failed_last, np.log(typical) - 3.0, noise])
        cycles.append((features.astype(np.float32), verdicts, durations))
        failed_last = verdicts
    return cycles


def _online_apfd(agent: OnlineComparator | PeriodicRetrainer, cycles: list, seed: int) -> np.ndarray:
    """The CI loop: rank a cycle (seeded tie-break order), score it, then learn from its outcome."""
    rng = np.random.default_rng(seed)
    scores = []
    for features, verdicts, durations in cycles:
        order = rank_pairwise(agent, features, rng.permutation(len(verdicts)))
        scores.append(apfd(verdicts[order]))  # NaN without a failure: nanmean skips it
        agent.update(features, verdicts, durations, rng)
    return np.array(scores)


def _learning_margins(make_agent) -> tuple[float, float]:
    """Over SEEDS, the mean APFD of cycles 40..79 minus that of cycles 0..4, and minus random ordering's."""
    early, late, random = [], [], []
    for seed in SEEDS:
        cycles = _stream(80, seed)
        scores = _online_apfd(make_agent(seed), cycles, seed)
        shuffle = np.random.default_rng(seed + 100)
        baseline = [apfd(verdicts[shuffle.permutation(len(verdicts))]) for _, verdicts, _ in cycles[40:]]
        early.append(np.nanmean(scores[:5]))
        late.append(np.nanmean(scores[40:]))
        random.append(np.nanmean(baseline))
    return float(np.mean(late) - np.mean(early)), float(np.mean(late) - np.mean(random))


def _cold(seed: int) -> OnlineComparator:
    return OnlineComparator.cold(2 * (2 + NOISE), hidden=(32, 32), seed=seed)


def test_a_cold_comparator_learns_online():
    # Measured (seeds 0-2): late - early 0.25, late - random 0.31; late APFD 0.79, feature-0 sort 0.80.
    over_early, over_random = _learning_margins(_cold)
    assert over_early > 0.12
    assert over_random > 0.15


def test_the_periodic_retrainer_learns():
    # Measured (seeds 0-2, refits every 20 cycles, 2 epochs): late - early 0.22, late - random 0.31.
    over_early, over_random = _learning_margins(
        lambda seed: PeriodicRetrainer(_cold(seed), every=20, epochs=2))
    assert over_early > 0.12
    assert over_random > 0.15


def _weights(agent: OnlineComparator) -> list[torch.Tensor]:
    return [p.detach().clone() for p in agent.net.parameters()]


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_the_periodic_retrainer_refits_exactly_at_multiples_of_every():
    start = _cold(0)
    before = _weights(start)
    retrainer = PeriodicRetrainer(start, every=10, epochs=1)
    rng = np.random.default_rng(0)
    changed = []
    for features, verdicts, durations in _stream(25, seed=0):
        weights = _weights(retrainer.model)
        retrainer.update(features, verdicts, durations, rng)
        changed.append(not _same(weights, _weights(retrainer.model)))
    assert np.flatnonzero(changed).tolist() == [9, 19]
    assert retrainer.refits == 2
    # Refits fork the start: neither the caller's comparator nor the retrainer's copy of it moved.
    assert _same(before, _weights(start)) and _same(before, _weights(retrainer.start))


def test_update_without_anything_to_learn_changes_nothing():
    comparator = _cold(0)
    before = _weights(comparator)
    rng = np.random.default_rng(0)
    row = np.zeros((1, 2 + NOISE), dtype=np.float32)
    comparator.update(row, np.array([True]), np.array([3.0]), rng)
    ties = np.random.default_rng(1).standard_normal((5, 2 + NOISE)).astype(np.float32)
    comparator.update(ties, np.zeros(5, dtype=bool), np.full(5, 2.0), rng)  # same verdict, same duration
    comparator.update(ties, np.ones(5, dtype=bool), np.full(5, 2.0), rng)
    assert _same(before, _weights(comparator))
    comparator.update(ties, np.array([True, False, False, False, False]), np.full(5, 2.0), rng)
    assert not _same(before, _weights(comparator))  # the same rows with something to learn do change it


def test_a_fork_learns_as_the_original_and_apart_from_it():
    cycles = _stream(3, seed=1)
    original = _cold(1)
    original.update(*cycles[0], np.random.default_rng(0))  # Adam has moments to fork
    fork = original.copy()
    original.update(*cycles[1], np.random.default_rng(5))
    fork.update(*cycles[1], np.random.default_rng(5))
    assert _same(_weights(original), _weights(fork))
    fork.update(*cycles[2], np.random.default_rng(6))
    assert not _same(_weights(original), _weights(fork))


def test_ties_of_q_values_go_to_the_left_test():
    comparator = _cold(0)
    for parameter in comparator.net.parameters():
        torch.nn.init.zeros_(parameter)
    assert comparator(_observations(4)[:, : 2 * (2 + NOISE)]).tolist() == [0, 0, 0, 0]
