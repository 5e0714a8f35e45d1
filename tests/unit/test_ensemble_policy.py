"""algos/export/ensemble_policy.py: an ensemble decides by the mean of its members' Q-values (DQN), action
probabilities (PPO), portfolio weights (mapped back to scores the env maps to exactly that mean) or target exposures
(a Box), on hand-made members whose outputs are known; it saves and loads as one file, decides a row alike in any
batch, and refuses one member or members that read different inputs in one line."""
from __future__ import annotations

import json

import numpy as np
import pytest

from algos.export.ensemble_policy import EnsemblePolicy, ensemble_for, load_policy
from algos.export.numpy_policy import FORMAT, STRUCTURE_KEY, NumpyPolicy
from algos.families.portfolio_weights import WeightRule, weights_to_scores
from envs.errors import InputError
from envs.portfolio.weights import scores_to_weights

SIZE = 4


def _linear(arrays: dict, name: str, weight: np.ndarray, bias: np.ndarray) -> list[dict]:
    arrays[f"{name}.weight"] = np.asarray(weight, np.float32)
    arrays[f"{name}.bias"] = np.asarray(bias, np.float32)
    return [{"op": "linear", "weight": f"{name}.weight", "bias": f"{name}.bias"}]


def _member(algorithm: str, head: str, weight: np.ndarray, bias: np.ndarray, **sizes) -> NumpyPolicy:
    """A one-layer policy: an identity encoder, then `head` = weight @ obs + bias (outputs known by hand)."""
    arrays: dict = {}
    nets = {"encoder": _linear(arrays, "encoder.0", np.eye(SIZE), np.zeros(SIZE)),
            head: _linear(arrays, f"{head}.0", weight, bias)}
    if "action_size" in sizes:
        arrays["action.low"], arrays["action.high"] = (np.array([b], np.float32) for b in sizes.pop("bounds"))
    structure = {"format": FORMAT, "algorithm": algorithm, "observation_size": SIZE, **sizes, "nets": nets}
    return NumpyPolicy.from_arrays({**arrays, STRUCTURE_KEY: np.array(json.dumps(structure))})


def _portfolio_member(rng: np.random.Generator, row_size: int, scale: float = 1.0) -> NumpyPolicy:
    """A shared-assets PPO portfolio policy: each asset's score is a random linear map of its row (clipped to
    [-1, 1] by the greedy rule), cash's a learned constant."""
    arrays: dict = {"cash": np.array([rng.uniform(-1, 1), 0.0], np.float32)}
    nets = {"pi": _linear(arrays, "pi.0", rng.normal(0, scale, (2, row_size)), rng.normal(0, scale, 2))}
    structure = {"format": FORMAT, "algorithm": "ppo", "layout": "portfolio", "shared": True, "row_size": row_size,
                 "nets": nets}
    return NumpyPolicy.from_arrays({**arrays, STRUCTURE_KEY: np.array(json.dumps(structure))})


def _observations(rows: int = 50, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 1, (rows, SIZE)).astype(np.float32)


def test_dqn_members_act_on_the_mean_of_their_q_values():
    rng = np.random.default_rng(1)
    members = [_member("dqn", "q", rng.normal(0, 1, (3, SIZE)), rng.normal(0, 1, 3), num_actions=3)
               for _ in range(3)]
    ensemble = EnsemblePolicy(members)
    observations = _observations()
    expected = np.mean([m.outputs(observations).astype(np.float64) for m in members], axis=0).argmax(axis=1)
    actions = ensemble(observations)
    assert ensemble.kind == "q_values" and actions.dtype == np.int64
    assert np.array_equal(actions, expected)
    # Two members that each prefer another action agree on a third when it is second best for both.
    split = [_member("dqn", "q", np.zeros((3, SIZE)), q, num_actions=3) for q in ([1.0, 0.0, 0.8], [0.0, 1.0, 0.8])]
    assert [m(observations[:1])[0] for m in split] == [0, 1]
    assert EnsemblePolicy(split)(observations[:1])[0] == 2


def test_ppo_members_act_on_the_mean_of_their_action_probabilities_not_of_their_logits():
    logits = ([2.0, 0.0, -10.0], [-10.0, 0.5, 0.0])  # probabilities average to action 0, logits to action 1
    members = [_member("ppo", "pi", np.zeros((3, SIZE)), values, num_actions=3) for values in logits]
    ensemble = EnsemblePolicy(members)
    assert ensemble.kind == "probabilities"
    assert np.mean(logits, axis=0).argmax() == 1
    assert ensemble(_observations(1))[0] == 0
    rng = np.random.default_rng(2)
    members = [_member("ppo", "pi", rng.normal(0, 2, (3, SIZE)), rng.normal(0, 1, 3), num_actions=3)
               for _ in range(4)]
    observations = _observations()

    def probabilities(member):
        values = member.outputs(observations).astype(np.float64)
        exp = np.exp(values - values.max(axis=1, keepdims=True))
        return exp / exp.sum(axis=1, keepdims=True)

    expected = np.mean([probabilities(m) for m in members], axis=0).argmax(axis=1)
    assert np.array_equal(EnsemblePolicy(members)(observations), expected)


def test_box_members_act_on_the_mean_of_their_target_exposures():
    rng = np.random.default_rng(3)
    members = [_member("sac", "pi", rng.normal(0, 1, (2, SIZE)), rng.normal(0, 1, 2), action_size=1,
                       bounds=(0.0, 1.0)) for _ in range(3)]
    ensemble = EnsemblePolicy(members)
    observations = _observations()
    actions = ensemble(observations)
    expected = np.mean([m(observations).astype(np.float64) for m in members], axis=0).astype(np.float32)
    assert ensemble.kind == "exposure" and actions.dtype == np.float32 and actions.shape == (50, 1)
    assert np.array_equal(actions, expected)
    assert np.all((actions >= 0.0) & (actions <= 1.0))


@pytest.mark.parametrize("rule", [WeightRule("long_only", 5.0), WeightRule("long_only", 1.0),
                                  WeightRule("long_only", 20.0), WeightRule("long_short", 5.0, 1.0),
                                  WeightRule("long_short", 2.0, 1.5)])
def test_portfolio_members_decide_the_mean_of_their_weights_which_the_env_maps_the_scores_back_to(rule):
    rng = np.random.default_rng(4)
    row_size, assets = 6, 7
    members = [_portfolio_member(rng, row_size, scale=4.0) for _ in range(3)]  # scores often at the bounds
    observations = rng.normal(0, 1, (40, assets, row_size)).astype(np.float32)
    tradable = rng.random((40, assets)) > 0.3
    observations[..., -1] = tradable
    ensemble = EnsemblePolicy(members, rule)
    scores = ensemble(observations)
    mean = np.mean([scores_to_weights(m(observations), tradable, rule.rule, rule.kappa, rule.gross_cap)
                    for m in members], axis=0)
    assert scores.shape == (40, assets + 1) and np.all(np.abs(scores) <= 1.0)
    env_weights = scores_to_weights(scores, tradable, rule.rule, rule.kappa, rule.gross_cap)
    assert np.max(np.abs(env_weights - mean)) <= 1e-9
    assert np.all(env_weights[:, 1:][~tradable] == 0.0)


@pytest.mark.parametrize("rule", [WeightRule("long_only", 5.0), WeightRule("long_short", 5.0, 1.0)])
def test_weights_at_the_rules_extremes_map_back_exactly(rule):
    """Members whose scores sit at -1 and 1 (a weight ratio of e^(2 kappa), an asset at tanh(kappa)): their mean is
    still within what scores in [-1, 1] reach."""
    tradable = np.array([[True, True, False, True]])
    extremes = np.array([[1.0, -1.0, 0.3, 1.0, -1.0], [-1.0, 1.0, 1.0, -1.0, -1.0], [1.0, 1.0, 1.0, 1.0, 1.0]])
    weights = [scores_to_weights(s[None], tradable, rule.rule, rule.kappa, rule.gross_cap) for s in extremes]
    mean = np.mean(weights, axis=0)
    back = weights_to_scores(mean, tradable, rule)
    assert np.all(np.abs(back) <= 1.0)
    assert np.max(np.abs(scores_to_weights(back, tradable, rule.rule, rule.kappa, rule.gross_cap) - mean)) <= 1e-9


def test_an_ensemble_saves_and_loads_as_one_file_that_decides_the_same_bits(tmp_path):
    rng = np.random.default_rng(5)
    observations = rng.normal(0, 1, (30, 5, 6)).astype(np.float32)
    observations[..., -1] = 1.0
    ensemble = ensemble_for([_portfolio_member(rng, 6) for _ in range(2)],
                            {"source": "synthetic", "weights": "long_short", "kappa": 3, "gross_cap": 1.5})
    assert ensemble.weight_rule == WeightRule("long_short", 3.0, 1.5)
    path = tmp_path / "policy.npz"
    ensemble.save(path)
    loaded = load_policy(path)
    assert isinstance(loaded, EnsemblePolicy) and loaded.weight_rule == ensemble.weight_rule
    assert np.array_equal(loaded(observations).view(np.uint64), ensemble(observations).view(np.uint64))
    # One row decides alike alone and in its batch (paper trading asks one row at a time, the backtest too).
    assert all(np.array_equal(loaded(observations[i:i + 1])[0], ensemble(observations)[i]) for i in range(30))
    single = _member("dqn", "q", np.eye(3, SIZE), np.zeros(3), num_actions=3)
    single.save(tmp_path / "single.npz")
    assert isinstance(load_policy(tmp_path / "single.npz"), NumpyPolicy)


def test_one_member_members_with_different_inputs_and_damaged_files_are_refused_in_one_line(tmp_path):
    rng = np.random.default_rng(6)
    dqn = _member("dqn", "q", rng.normal(0, 1, (3, SIZE)), np.zeros(3), num_actions=3)
    with pytest.raises(InputError, match="an ensemble of 1 member") as one:
        EnsemblePolicy([dqn])
    other_actions = _member("dqn", "q", rng.normal(0, 1, (2, SIZE)), np.zeros(2), num_actions=2)
    with pytest.raises(InputError, match="read different inputs: member 0 reads 4 floats, answering one of 3 "
                                         "actions, member 1 4 floats, answering one of 2 actions") as different:
        EnsemblePolicy([dqn, other_actions])
    wider = [_portfolio_member(rng, 6), _portfolio_member(rng, 8)]
    with pytest.raises(InputError, match="rows of 6 floats .* rows of 8 floats"):
        EnsemblePolicy(wider, WeightRule("long_only", 5.0))
    ppo = _member("ppo", "pi", rng.normal(0, 1, (3, SIZE)), np.zeros(3), num_actions=3)
    with pytest.raises(InputError, match="decide in different ways"):
        EnsemblePolicy([dqn, ppo])
    with pytest.raises(InputError, match="needs the env's weight rule"):
        EnsemblePolicy([_portfolio_member(rng, 6), _portfolio_member(rng, 6)])
    arrays = EnsemblePolicy([dqn, dqn]).to_arrays()
    damaged = {k: v for k, v in arrays.items() if not k.startswith("member1/")}
    with pytest.raises(InputError, match="member 1 of 2 has no arrays"):
        EnsemblePolicy.from_arrays(damaged)
    for error in (one, different):
        assert "\n" not in str(error.value)
