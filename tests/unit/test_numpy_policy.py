"""The numpy export (algos/export/) computes what RLlib's torch forward_inference computes: real DQN and PPO RLModules
built from their configs (untrained, no Ray cluster), 500 env-like observations each; the result for one observation
does not depend on its batch, bit for bit; a saved policy loads to the same bits; anything else is refused.

And every algorithm x model of the table (tests/network_cases.py): its module, as its own learner builds it, on
random weights and random inputs, exports to a numpy policy whose outputs and greedy actions are the module's, or its
export is refused in one line; a pair of the table with neither case fails the coverage test."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

import algos
from algos.base import check_servable
from algos.export.mlp_numpy import CHUNK_ROWS
from algos.export.numpy_policy import STRUCTURE_KEY, NumpyPolicy
from algos.greedy import GreedyRule
from envs.errors import InputError
from tests import network_cases
from tests.conftest import REPO
from tests.network_cases import DEFAULT, Case

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
    return module, NumpyPolicy.from_arrays(algos.algorithm(algorithm).export_numpy(module))


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
    with pytest.raises(InputError) as refusal:
        algos.algorithm(algorithm).export_numpy(module)
    message = str(refusal.value)
    assert what in message and "scored with torch" in message and "\n" not in message


def test_a_module_another_algorithm_trains_is_refused():
    with pytest.raises(InputError, match="RLModule class DefaultDQNTorchRLModule is not supported"):
        algos.algorithm("ppo").export_numpy(_module("dqn"))


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
    code = ("import sys, algos.export.numpy_policy; "
            "print(sorted(m for m in ('torch', 'ray') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            cwd=REPO, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


class _MadeUpDQN(type(algos.algorithm("dqn"))):  # DQN's learner and module, a rule of its own
    name = "made_up_dqn"
    greedy = GreedyRule(output="qf_preds", argmax=True)


def test_an_algorithm_is_served_from_its_table_entry_alone(monkeypatch):
    """A new algorithm that trains DQN's module with a rule of its own is one entry (its Algorithm object): its export
    names it, and the numpy policy serves it while, and only while, the table has it."""
    entry = _MadeUpDQN()
    monkeypatch.setitem(algos.ALGORITHMS, "made_up_dqn", entry)
    check_servable("made_up_dqn", entry)
    module = _module("dqn")
    policy = NumpyPolicy.from_arrays(entry.export_numpy(module))
    dqn = NumpyPolicy.from_arrays(algos.algorithm("dqn").export_numpy(module))
    assert policy.algorithm == "made_up_dqn" and dqn.algorithm == "dqn"  # each entry's export names itself
    observations = _observations(64)
    assert np.array_equal(policy(observations), dqn(observations))
    monkeypatch.delitem(algos.ALGORITHMS, "made_up_dqn")
    servable = sorted(name for name, entry in algos.ALGORITHMS.items() if entry.learner.numpy_layouts is not None)
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
    arrays = algos.algorithm("dqn").export_numpy(_module("dqn"))
    structure = json.loads(str(arrays[STRUCTURE_KEY][()]))
    arrays[STRUCTURE_KEY] = np.array(json.dumps({**structure, "layout": "portfolio"}))
    with pytest.raises(InputError, match="are not a portfolio DQN's \\(it exports none\\)"):
        NumpyPolicy.from_arrays(arrays)


def test_a_gaussian_head_that_clips_its_log_stds_exports_with_the_clip():
    """The direct learner acts in a 1-d Box with PPO's module, whose pi head clips its log-stds: the export carries the
    clip as an op, its outputs equal torch's (means and clipped log-stds), and the greedy exposure is the mean in the
    Box, as trained."""
    space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
    module = _module("ppo", None, {"fcnet_hiddens": [32]}, action_space=space)
    assert module.pi.clip_log_std
    with torch.no_grad():  # log-stds beyond the clip, so the op has work to do
        module.pi.net.mlp[-1].bias[1] = 50.0
    policy = NumpyPolicy.from_arrays(algos.algorithm("direct").export_numpy(module))
    assert policy.algorithm == "direct"
    observations = _observations(50)
    with torch.no_grad():
        expected = module.forward_inference({"obs": torch.as_tensor(observations)})["action_dist_inputs"].numpy()
    outputs = policy.outputs(observations)
    assert float(np.abs(outputs - expected).max()) <= 1e-5 * float(np.abs(expected).max())
    assert float(expected[:, 1].max()) < 50.0  # torch clipped them
    np.testing.assert_allclose(policy(observations)[:, 0], np.clip((expected[:, 0] + 1.0) / 2.0, 0.0, 1.0), atol=1e-6)


# --- Every algorithm x model of the table (tests/network_cases.py): the export is the module, or it is refused

def _portfolio_cases(algorithm: str) -> dict[str, Case]:
    """An algorithm's two portfolio models: the shared net sized by training.model_hiddens (tanh), the flat one at its
    default sizes (swish)."""
    shared = Case(algorithm, "shared_assets", "box", {"model_hiddens": [16, 8]}, {"fcnet_activation": "tanh"})
    flat = Case(algorithm, "flat", "box", {}, {"fcnet_activation": "swish"})
    return {f"{algorithm}, shared_assets [16, 8] tanh": shared, f"{algorithm}, flat, swish": flat}


# Variants of each pair where the export has a branch: dueling or not, every rl_module.fcnet_activation, head layers,
# twin Q (SAC's critics are not exported: the policy net must be found all the same).
EXPORT_CASES: dict[str, Case] = {
    "dqn, dueling, relu": Case("dqn", DEFAULT, "discrete"),
    "dqn, not dueling, swish, head [16]": Case("dqn", DEFAULT, "discrete", {"dueling": False},
                                               {"fcnet_activation": "swish", "head_fcnet_hiddens": [16]}),
    "dqn, dueling, linear [32]": Case("dqn", DEFAULT, "discrete", {}, {"fcnet_hiddens": [32],
                                                                       "fcnet_activation": "linear"}),
    "ppo, tanh": Case("ppo", DEFAULT, "discrete", {}, {"fcnet_activation": "tanh"}),
    "ppo, linear, head [16]": Case("ppo", DEFAULT, "discrete", {}, {"fcnet_activation": "linear",
                                                                     "head_fcnet_hiddens": [16]}),
    "sac, relu": Case("sac", DEFAULT, "box"),
    "sac, no twin Q, tanh, head [8]": Case("sac", DEFAULT, "box", {"twin_q": False},
                                           {"fcnet_activation": "tanh", "head_fcnet_hiddens": [8]}),
    "direct, relu": Case("direct", DEFAULT, "box"),
    "direct, swish, head [8]": Case("direct", DEFAULT, "box", {}, {"fcnet_activation": "swish",
                                                                    "head_fcnet_hiddens": [8]}),
    **_portfolio_cases("ppo"),
    **_portfolio_cases("sac"),
    **_portfolio_cases("direct"),
}
# Pairs of the table whose module the export refuses, with the refusal's words: the run is scored with torch, and
# cannot be registered or served (the dry run refuses such a run: algos.base.check_servable_space).
EXPORT_REFUSALS: dict[tuple[str, str, str], str] = {
    # PPO's default module on a Box: a diagonal Gaussian with a free log-std head (PPO's portfolio module is served).
    ("ppo", DEFAULT, "box"): "action space Box",
}


def table_cases() -> dict[str, Case]:
    """One plain case for every pair of the table that neither the variants above nor the refusals name: a new
    algorithm or model is held to its module from its first entry, with no line here."""
    named = {case.pair for case in EXPORT_CASES.values()} | set(EXPORT_REFUSALS)
    return {", ".join(pair) + " (from the table)": Case(*pair) for pair in sorted(network_cases.table_pairs() - named)}


ALL_EXPORT_CASES = {**EXPORT_CASES, **table_cases()}


def _forward_inference(module, observations: np.ndarray) -> tuple[dict, np.ndarray]:
    """forward_inference's output, and the raw outputs the export gives: action_dist_inputs (logits, or a Gaussian's
    means then log-stds), or DQN's Q-values (its forward_inference returns only their argmax)."""
    batch = {"obs": torch.as_tensor(observations)}
    with torch.no_grad():
        out = module.forward_inference(batch)
        raw = out["action_dist_inputs"] if "action_dist_inputs" in out else module.compute_q_values(batch)["qf_preds"]
    return out, raw.numpy()


@pytest.mark.parametrize("name", list(ALL_EXPORT_CASES))
def test_every_algorithm_and_model_exports_the_outputs_and_actions_of_its_module(name):
    case = ALL_EXPORT_CASES[name]
    entry = algos.algorithm(case.algorithm)
    module = network_cases.module(case)
    policy = NumpyPolicy.from_arrays(entry.export_numpy(module))
    assert policy.algorithm == case.algorithm and policy.portfolio == (case.model != DEFAULT)
    # A shared-weights model runs on any number of assets: on another N too, with the same weights.
    universes = (network_cases.ASSETS, 9) if case.model == "shared_assets" else (network_cases.ASSETS,)
    for assets in universes:
        observations = network_cases.observations(case, 300, seed=assets, assets=assets)
        out, expected = _forward_inference(module, observations)
        outputs = policy.outputs(observations)
        scale = float(np.abs(expected).max())
        assert outputs.dtype == np.float32 and outputs.shape == expected.shape and scale > 0.5  # power: not all ~0
        assert float(np.abs(outputs - expected).max()) <= 1e-5 * max(scale, 1.0), name
        space = network_cases.spaces(case, assets)[1]
        expected_actions = np.asarray(entry.greedy.actions(out, space))
        actions = policy(observations)
        if case.kind == "discrete":
            top_two = np.sort(expected, axis=1)[:, -2:]
            clear = top_two[:, 1] - top_two[:, 0] > TIE  # off a near-tie, the argmax is the same action
            assert actions.dtype == np.int64 and np.array_equal(actions[clear], expected_actions[clear])
            assert clear.mean() > 0.99 and len(np.unique(expected_actions)) > 1
        else:
            assert actions.dtype == np.float32 and actions.shape == expected_actions.shape
            np.testing.assert_allclose(actions, expected_actions, rtol=0, atol=1e-5)
            assert float(np.ptp(expected_actions)) > 0.1  # the actions vary, so equal actions say something


@pytest.mark.parametrize("pair", list(EXPORT_REFUSALS))
def test_a_pair_the_export_does_not_serve_is_refused_in_one_line(pair):
    module = network_cases.module(Case(*pair))
    with pytest.raises(InputError) as refusal:
        algos.algorithm(pair[0]).export_numpy(module)
    message = str(refusal.value)
    assert EXPORT_REFUSALS[pair] in message and "scored with torch" in message and "\n" not in message


def test_every_algorithm_and_model_of_the_table_has_an_export_case():
    """Every pair of the table is exported and checked (a variant, a plain case from the table, or a refusal); a named
    variant or refusal of a pair the table no longer has fails."""
    covered = [case.pair for case in ALL_EXPORT_CASES.values()] + list(EXPORT_REFUSALS)
    assert network_cases.uncovered(covered) == []
    assert sorted(set(covered) - network_cases.table_pairs()) == []
    assert not set(EXPORT_REFUSALS) & {case.pair for case in ALL_EXPORT_CASES.values()}


def test_a_new_algorithm_gets_an_export_case_without_a_test_edit(monkeypatch):
    """The plain cases come from the table: an entry added to it is a case of its own."""
    monkeypatch.setitem(algos.ALGORITHMS, "made_up_dqn", _MadeUpDQN())
    assert ("made_up_dqn", DEFAULT, "discrete") in {case.pair for case in table_cases().values()}
