"""algos.numpy_policy computes what RLlib's torch forward_inference computes: real DQN and PPO RLModules built
from their configs (untrained, no Ray cluster), 500 env-like observations each; the result for one observation
does not depend on its batch, bit for bit; a saved policy loads to the same bits; anything else is refused."""
from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import types

import gymnasium as gym
import numpy as np
import pytest
import torch

import algos
from algos.dqn import SPEC as DQN_SPEC
from algos.numpy_policy import CHUNK_ROWS, STRUCTURE_KEY, NumpyPolicy, export_module
from algos.ppo import SPEC as PPO_SPEC
from algos.spec import GreedyRule, check_servable
from envs.errors import InputError
from tests.conftest import REPO

OBSERVATION_SIZE = 194  # the trading env's: clipped z-scores, then a one-hot position
POSITIONS = 3
ACTIONS = 3
ROWS = 500
TIE = 1e-5  # top two torch outputs closer than this: either action is the greedy one within float32 noise


def _observations(rows: int, seed: int = 0) -> np.ndarray:
    """Drawn like the env's observations: z-scores clipped to [-10, 10], then a one-hot position."""
    rng = np.random.default_rng(seed)
    features = np.clip(rng.standard_normal((rows, OBSERVATION_SIZE - POSITIONS)) * 2.0, -10, 10)
    position = np.eye(POSITIONS)[rng.integers(0, POSITIONS, rows)]
    return np.concatenate([features, position], axis=1).astype(np.float32)


def _module(algorithm: str, training: dict | None = None, model_config: dict | None = None,
            action_space: gym.Space | None = None):
    """An untrained RLModule as the algorithm's config builds it (seeded weights)."""
    from ray.rllib.algorithms.dqn import DQNConfig
    from ray.rllib.algorithms.ppo import PPOConfig

    config = (DQNConfig() if algorithm == "dqn" else PPOConfig()).environment(
        observation_space=gym.spaces.Box(-10, 10, (OBSERVATION_SIZE,), np.float32),
        action_space=action_space or gym.spaces.Discrete(ACTIONS))
    if training:
        config = config.training(**training)
    if model_config:
        config = config.rl_module(model_config=model_config)
    torch.manual_seed(7)
    module = config.get_rl_module_spec().build()
    module.eval()
    return module


def _torch_outputs(module, observations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Torch's raw head output (Q-values or logits) and the greedy actions forward_inference gives."""
    batch = {"obs": torch.as_tensor(observations)}
    with torch.no_grad():
        out = module.forward_inference(batch)
        if "actions" in out:  # DQN: forward_inference returns argmax Q only; Q is what it took the argmax of
            return module.compute_q_values(batch)["qf_preds"].numpy(), out["actions"].numpy()
        logits = out["action_dist_inputs"].numpy()
    return logits, logits.argmax(axis=1)


CASES = {
    "dqn dueling (default)": ("dqn", None, None),
    "dqn not dueling": ("dqn", {"dueling": False}, None),
    "dqn [64, 32] tanh": ("dqn", None, {"fcnet_hiddens": [64, 32], "fcnet_activation": "tanh"}),
    "dqn relu, elu head": ("dqn", None, {"fcnet_hiddens": [128, 128], "fcnet_activation": "relu",
                                         "head_fcnet_hiddens": [16], "head_fcnet_activation": "elu"}),
    "ppo default": ("ppo", None, None),
    "ppo shared layernorm silu": ("ppo", None, {"vf_share_layers": True, "fcnet_use_layernorm": True,
                                                "fcnet_activation": "silu", "fcnet_hiddens": [64, 64]}),
}


@pytest.fixture(scope="module", params=list(CASES))
def case(request):
    algorithm, training, model_config = CASES[request.param]
    module = _module(algorithm, training, model_config)
    spec = DQN_SPEC if algorithm == "dqn" else PPO_SPEC
    return module, NumpyPolicy.from_arrays(export_module(module, spec.greedy))


def test_outputs_and_actions_match_torch(case):
    module, policy = case
    observations = _observations(ROWS)
    expected, torch_actions = _torch_outputs(module, observations)
    outputs = policy.outputs(observations)
    assert outputs.dtype == np.float32 and outputs.shape == (ROWS, ACTIONS)
    scale = float(np.abs(expected).max())
    assert scale > 0  # the comparison has power: the outputs are not all zero
    assert float(np.abs(outputs - expected).max()) <= 1e-5 * scale
    top_two = np.sort(expected, axis=1)[:, -2:]
    near_tie = (top_two[:, 1] - top_two[:, 0]) <= TIE
    actions = policy(observations)
    assert actions.dtype == np.int64
    assert np.array_equal(actions[~near_tie], torch_actions[~near_tie])
    # 0 expected: a gap of 1e-5 between outputs of ~0.5 is rare among 500 rows
    assert near_tie.sum() <= 2, f"{near_tie.sum()} near-ties among {ROWS} rows"
    assert len(np.unique(torch_actions)) > 1  # the actions vary, so equal actions say something


def _bits(values: np.ndarray) -> np.ndarray:
    return values.view(np.uint32)


def test_one_observation_gets_the_same_bits_in_any_batch(case):
    _, policy = case
    observations = _observations(ROWS, seed=1)
    whole = policy.outputs(observations)
    one_by_one = np.concatenate([policy.outputs(observations[i:i + 1]) for i in range(ROWS)])
    assert np.array_equal(_bits(whole), _bits(one_by_one))
    # Other offsets, strides and memory orders of the same rows (a batched matmul would differ here).
    assert np.array_equal(_bits(policy.outputs(observations[1:])), _bits(whole[1:]))
    for shift in range(2, CHUNK_ROWS):  # every position in a block of rows, and every length of the last block
        assert np.array_equal(_bits(policy.outputs(observations[shift:shift + 45])), _bits(whole[shift:shift + 45]))
    assert np.array_equal(_bits(policy.outputs(observations[::3])), _bits(whole[::3]))
    assert np.array_equal(_bits(policy.outputs(np.asfortranarray(observations))), _bits(whole))
    assert np.array_equal(_bits(policy.outputs(observations.astype(np.float64))), _bits(whole))


def test_a_saved_policy_loads_to_the_same_bits(case, tmp_path):
    _, policy = case
    path = tmp_path / "policy"  # no .npz: saved exactly where asked
    policy.save(path)
    loaded = NumpyPolicy.load(path)
    observations = _observations(64, seed=2)
    assert np.array_equal(_bits(loaded.outputs(observations)),
                          _bits(policy.outputs(observations)))
    assert loaded.structure == policy.structure


@pytest.mark.parametrize("what, algorithm, training, model_config, action_space", [
    ("distributional DQN (num_atoms=2)", "dqn", {"num_atoms": 2}, None, None),
    ("PPO encoder TorchStatefulActorCriticEncoder", "ppo", None, {"use_lstm": True}, None),
    ("action space Box", "ppo", None, None, gym.spaces.Box(-1, 1, (2,), np.float32)),
    ("encoder TorchLSTMEncoder", "dqn", None, {"use_lstm": True}, None),
    ("encoder layer 1 (Sigmoid)", "dqn", None, {"fcnet_activation": "Sigmoid"}, None),
])
def test_an_unsupported_module_is_refused_in_one_line(what, algorithm, training, model_config, action_space):
    module = _module(algorithm, training, model_config, action_space)
    spec = DQN_SPEC if algorithm == "dqn" else PPO_SPEC
    with pytest.raises(InputError) as refusal:
        export_module(module, spec.greedy)
    message = str(refusal.value)
    assert what in message and "scored with torch" in message and "\n" not in message


def test_a_greedy_rule_that_does_not_fit_the_module_is_refused():
    with pytest.raises(InputError, match="greedy rule"):
        export_module(_module("dqn"), PPO_SPEC.greedy)


def test_a_damaged_or_foreign_file_is_refused_in_one_line(case, tmp_path):
    _, policy = case
    arrays = policy.to_arrays()
    missing = next(key for key in arrays if key.endswith(".weight"))
    del arrays[missing]
    with pytest.raises(InputError, match=f"array '{missing}' is missing"):
        NumpyPolicy.from_arrays(arrays)
    foreign = tmp_path / "not_a_policy.npz"
    foreign.write_text("hello")
    with pytest.raises(InputError) as refusal:
        NumpyPolicy.load(foreign)
    assert "\n" not in str(refusal.value)
    with pytest.raises(InputError, match=STRUCTURE_KEY):
        NumpyPolicy.from_arrays({"x": np.zeros(3, np.float32)})


def test_the_numpy_policy_imports_neither_torch_nor_ray():
    code = ("import sys, algos.numpy_policy; "
            "print(sorted(m for m in ('torch', 'ray') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            cwd=REPO, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_an_algorithm_is_served_from_its_table_entry_alone(monkeypatch):
    """A new algorithm that trains DQN's module with a rule of its own is one entry (its module's SPEC): numpy_policy
    exports it under its name, and serves it while, and only while, the table has it."""
    rule = GreedyRule(output="qf_preds", argmax=True)
    entry = types.ModuleType("made_up_dqn")
    entry.SPEC = dataclasses.replace(DQN_SPEC, name="made_up_dqn", greedy=rule)
    monkeypatch.setitem(sys.modules, "made_up_dqn", entry)
    monkeypatch.setitem(algos.ALGORITHMS, "made_up_dqn", "made_up_dqn")
    check_servable("made_up_dqn", entry.SPEC)
    module = _module("dqn")
    policy = NumpyPolicy.from_arrays(export_module(module, rule))
    dqn = NumpyPolicy.from_arrays(export_module(module, DQN_SPEC.greedy))
    assert policy.algorithm == "made_up_dqn" and dqn.algorithm == "dqn"  # each algorithm's rule picks its name
    observations = _observations(64)
    assert np.array_equal(policy(observations), dqn(observations))
    monkeypatch.delitem(algos.ALGORITHMS, "made_up_dqn")
    servable = sorted(name for name in algos.ALGORITHMS if algos.algorithm(name).export is not None)
    with pytest.raises(InputError, match=re.escape(f"numpy policy algorithm 'made_up_dqn' is not one of {servable}")):
        NumpyPolicy.from_arrays(policy.to_arrays())


def _linear(rows: list[list[float]]) -> np.ndarray:
    return np.array(rows, dtype=np.float32)


# Files as the exporter wrote them before the algorithms brought their exports (the structure JSON is unchanged).
OLD_FILES = {
    "dqn": ({"format": "rlplatform-numpy-policy/1", "algorithm": "dqn", "observation_size": 2, "num_actions": 2,
             "nets": {"encoder": [{"op": "linear", "weight": "encoder.0.weight", "bias": "encoder.0.bias"},
                                  {"op": "relu"}],
                      "q": [{"op": "linear", "weight": "q.0.weight", "bias": None}]}},
            {"encoder.0.weight": _linear([[1, 0], [0, 1]]), "encoder.0.bias": _linear([0, 0]),
             "q.0.weight": _linear([[1, 0], [0, 1]])},
            [[1.0, 2.0], [3.0, -1.0]], [1, 0]),
    "sac": ({"format": "rlplatform-numpy-policy/1", "algorithm": "sac", "observation_size": 1, "action_size": 1,
             "nets": {"encoder": [{"op": "linear", "weight": "encoder.0.weight", "bias": None}],
                      "pi": [{"op": "linear", "weight": "pi.0.weight", "bias": None}]}},
            {"encoder.0.weight": _linear([[1]]), "pi.0.weight": _linear([[1], [0]]),
             "action.low": _linear([-2]), "action.high": _linear([2])},
            [[0.5], [-1.0]], [[2 * np.tanh(0.5)], [2 * np.tanh(-1.0)]]),
}


@pytest.mark.parametrize("name", list(OLD_FILES))
def test_a_file_exported_before_the_table_carried_the_exports_still_loads(name, tmp_path):
    structure, arrays, observations, actions = OLD_FILES[name]
    path = tmp_path / "policy.npz"
    np.savez(path, **arrays, **{STRUCTURE_KEY: np.array(json.dumps(structure))})
    policy = NumpyPolicy.load(path)
    np.testing.assert_allclose(policy(np.array(observations, dtype=np.float32)), actions, rtol=1e-6)


def test_a_portfolio_file_of_an_algorithm_without_a_portfolio_export_is_refused():
    arrays = export_module(_module("dqn"), DQN_SPEC.greedy)
    structure = json.loads(str(arrays[STRUCTURE_KEY][()]))
    arrays[STRUCTURE_KEY] = np.array(json.dumps({**structure, "layout": "portfolio"}))
    with pytest.raises(InputError, match="are not a portfolio DQN's \\(it exports none\\)"):
        NumpyPolicy.from_arrays(arrays)


def test_a_gaussian_head_that_clips_its_log_stds_exports_with_the_clip():
    """The direct learner acts in a 1-d Box with PPO's module, whose pi head clips its log-stds: the export carries the
    clip as an op, its outputs equal torch's (means and clipped log-stds), and the greedy exposure is the mean in the
    Box, as trained."""
    from algos.direct.spec import SPEC as DIRECT_SPEC

    space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
    module = _module("ppo", None, {"fcnet_hiddens": [32]}, action_space=space)
    assert module.pi.clip_log_std
    with torch.no_grad():  # log-stds beyond the clip, so the op has work to do
        module.pi.net.mlp[-1].bias[1] = 50.0
    policy = NumpyPolicy.from_arrays(export_module(module, DIRECT_SPEC.greedy))
    assert policy.algorithm == "direct"
    observations = _observations(50)
    with torch.no_grad():
        expected = module.forward_inference({"obs": torch.as_tensor(observations)})["action_dist_inputs"].numpy()
    outputs = policy.outputs(observations)
    assert float(np.abs(outputs - expected).max()) <= 1e-5 * float(np.abs(expected).max())
    assert float(expected[:, 1].max()) < 50.0  # torch clipped them
    np.testing.assert_allclose(policy(observations)[:, 0], np.clip((expected[:, 0] + 1.0) / 2.0, 0.0, 1.0), atol=1e-6)
