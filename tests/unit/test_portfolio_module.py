"""algos/networks/portfolio_module.py: a policy whose weights are shared across the assets of a universe (EIIE), chosen
by `training.model`, for every algorithm of the table whose learner trains and exports one. Its parameters do not
depend on N, and its numpy export runs a model built for one N on another and equals the torch forward pass. That it
trains and learns: tests/integration/test_portfolio_training.py."""
from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import torch
from pydantic import ValidationError

import algos
from algos.export.numpy_policy import NumpyPolicy
from algos.networks.portfolio_model import pop_model_config
from envs.errors import InputError
from envs.validation import describe_validation_error
from tests.network_cases import DEFAULT, table_pairs
from tests.toy_universe import ASSETS, FEATURES, ROW, WINDOW
from tests.trial_inputs import local_trial

ACTIVATION = "tanh"  # rl_module.fcnet_activation: the portfolio nets' too
# The algorithms whose learner trains and exports a portfolio module, read from the table.
PORTFOLIO_ALGORITHMS = sorted(name for name, entry in algos.ALGORITHMS.items()
                              if entry.learner.numpy_layouts is not None and entry.learner.numpy_layouts.portfolio)
# The training sections that offer training.model.
MODEL_SECTIONS = [entry.training_section for entry in algos.ALGORITHMS.values()
                  if "model" in entry.training_section.model_fields]


def _observations(rows: int, assets: int, seed: int = 0) -> np.ndarray:
    """Random rows with the portfolio layout: features, a weight, a tradable flag (about 1 in 5 untradable, features
    0), and real observations of the toy universe in the first rows."""
    rng = np.random.default_rng(seed)
    obs = (rng.standard_normal((rows, assets, ROW)) * 2).astype(np.float32)
    obs[..., -2] = rng.dirichlet(np.ones(assets + 1), rows)[:, 1:]
    obs[..., -1] = rng.random((rows, assets)) > 0.2
    obs[obs[..., -1] == 0.0, :WINDOW * FEATURES] = 0.0
    return obs


def _config(algorithm: str, model: str, observation_space: gym.Space, action_space: gym.Space,
            hiddens: list[int] | None = None):
    """The algorithm's config as its learner builds it for a trial with this training.model, on these spaces."""
    entry = algos.algorithm(algorithm)
    training = entry.training_section.model_validate({"model": model, "model_hiddens": hiddens}).model_dump()
    config = entry.learner.build(local_trial("trading/Portfolio-v0", training, rollout_fragment_length="auto",
                                             activation=ACTIVATION))
    return config.environment(observation_space=observation_space, action_space=action_space)


def _module(algorithm: str, model: str, assets: int, hiddens: list[int] | None = None, seed: int = 3):
    """A portfolio RLModule as the algorithm's learner builds it (its training section, its model_config), for
    `assets`."""
    config = _config(algorithm, model, gym.spaces.Box(-10, 10, (assets, ROW), np.float32),
                     gym.spaces.Box(-1, 1, (assets + 1,), np.float32), hiddens)
    torch.manual_seed(seed)
    module = config.get_rl_module_spec().build()
    with torch.no_grad():  # means and log-stds of a trained size: an export that dropped a layer would show
        for param in module.pi.net[-1].parameters():
            param.mul_(500.0)
        if module.pi.shared:
            module.pi.cash.copy_(torch.tensor([0.3, -0.2]))
    module.eval()
    return module


def _parameters(module: torch.nn.Module) -> int:
    return sum(param.numel() for param in module.parameters())


def test_every_algorithm_that_offers_a_portfolio_model_trains_and_exports_one():
    """An algorithm whose training section offers training.model: shared_assets or flat has a portfolio module its
    learner exports, so the tests below (parametrized by the table) cover it."""
    offering = sorted({name for name, model, _ in table_pairs() if model != DEFAULT})
    assert offering == PORTFOLIO_ALGORITHMS and len(PORTFOLIO_ALGORITHMS) >= 3  # ppo, sac and direct today


@pytest.mark.parametrize("algorithm", PORTFOLIO_ALGORITHMS)
def test_the_shared_model_has_as_many_parameters_for_3_assets_as_for_500(algorithm):
    small, large = _module(algorithm, "shared_assets", 3), _module(algorithm, "shared_assets", 500)
    assert _parameters(small) == _parameters(large) > 0
    flat_small, flat_large = _module(algorithm, "flat", 3), _module(algorithm, "flat", 500)
    assert _parameters(flat_large) > 10 * _parameters(flat_small)  # the flat MLP grows with N: why it is not shared


@pytest.mark.parametrize("algorithm", PORTFOLIO_ALGORITHMS)
def test_the_numpy_export_equals_torch_at_3_and_at_50_assets_with_the_same_weights(algorithm):
    entry = algos.algorithm(algorithm)
    module = _module(algorithm, "shared_assets", 3)
    policy = NumpyPolicy.from_arrays(entry.export_numpy(module))
    assert policy.num_assets is None and policy.row_size == ROW
    for assets in (3, 50):
        observations = _observations(200, assets, seed=assets)
        with torch.no_grad():
            out = module.forward_inference({"obs": torch.as_tensor(observations)})
        expected = out["action_dist_inputs"].numpy()
        outputs = policy.outputs(observations)
        assert outputs.dtype == np.float32 and outputs.shape == (200, 2 * (assets + 1))
        assert float(np.abs(expected).max()) > 1.0  # the comparison has power: the means are not all near 0
        np.testing.assert_allclose(outputs, expected, rtol=0, atol=1e-6)  # torch's batched product: float32 rounding
        scores = policy(observations)
        torch_scores = entry.greedy.actions(out, gym.spaces.Box(-1, 1, (assets + 1,), np.float32)).numpy()
        np.testing.assert_allclose(scores, torch_scores, rtol=0, atol=1e-6)
        assert scores.shape == (200, assets + 1) and np.all(np.abs(scores) <= 1.0) and float(np.ptp(scores)) > 1.0
        untradable = np.concatenate([np.zeros((200, 1), bool), observations[..., -1] == 0.0], axis=1)
        assert untradable.any() and np.all(outputs[:, :assets + 1][untradable] == 0.0)
        assert np.all(outputs[:, assets + 1:][untradable] == 0.0) and np.all(np.isfinite(outputs))


def test_a_row_gets_the_same_score_bits_in_any_batch_and_after_a_save(tmp_path):
    policy = NumpyPolicy.from_arrays(algos.algorithm("ppo").export_numpy(_module("ppo", "shared_assets", 3)))
    observations = _observations(40, 7, seed=1)
    whole = policy(observations)
    one_by_one = np.concatenate([policy(observations[i:i + 1]) for i in range(len(observations))])
    assert np.array_equal(whole.view(np.uint32), one_by_one.view(np.uint32))
    policy.save(tmp_path / "policy")
    assert np.array_equal(NumpyPolicy.load(tmp_path / "policy")(observations).view(np.uint32), whole.view(np.uint32))


@pytest.mark.parametrize("algorithm", PORTFOLIO_ALGORITHMS)
def test_a_checkpointed_module_is_scored_as_it_was_trained(algorithm, tmp_path):
    """The scorer reads a checkpoint's module folder back (experiments.results.policy): the class, its model_config
    and its weights come back, so its numpy policy gives the same score bits."""
    from ray.rllib.core.rl_module.rl_module import RLModule

    entry = algos.algorithm(algorithm)
    module = _module(algorithm, "shared_assets", 3)
    module.save_to_path(tmp_path / "module")
    restored = RLModule.from_checkpoint(tmp_path / "module")
    assert type(restored) is type(module)
    observations = _observations(20, 9)
    scores = [NumpyPolicy.from_arrays(entry.export_numpy(m))(observations) for m in (module, restored)]
    assert np.array_equal(scores[0].view(np.uint32), scores[1].view(np.uint32))


@pytest.mark.parametrize("algorithm", PORTFOLIO_ALGORITHMS)
def test_the_flat_model_exports_for_its_own_universe_only(algorithm):
    module = _module(algorithm, "flat", ASSETS)
    policy = NumpyPolicy.from_arrays(algos.algorithm(algorithm).export_numpy(module))
    observations = _observations(50, ASSETS)
    with torch.no_grad():
        expected = module.forward_inference({"obs": torch.as_tensor(observations)})["action_dist_inputs"].numpy()
    np.testing.assert_allclose(policy.outputs(observations), expected, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match=rf"observations must have shape \(n, {ASSETS}, {ROW}\)"):
        policy(_observations(5, ASSETS + 1))


def test_a_portfolio_export_missing_a_part_is_refused_in_one_line():
    arrays = algos.algorithm("ppo").export_numpy(_module("ppo", "shared_assets", 3))
    without_cash = {key: value for key, value in arrays.items() if key != "cash"}
    with pytest.raises(InputError, match="numpy policy cash: array 'cash' is missing"):
        NumpyPolicy.from_arrays(without_cash)
    structure = json.loads(str(arrays["structure"][()]))
    with pytest.raises(InputError, match="numpy policy shared 'yes' is not true or false"):
        NumpyPolicy.from_arrays({**arrays, "structure": np.array(json.dumps({**structure, "shared": "yes"}))})
    with pytest.raises(InputError, match=r"numpy policy nets \['encoder', 'pi'\] are not a portfolio PPO's \(pi\)"):
        NumpyPolicy.from_arrays({**arrays, "structure": np.array(json.dumps(
            {**structure, "nets": {"encoder": [], "pi": structure["nets"]["pi"]}}))})


def test_a_non_portfolio_space_is_refused_in_one_line():
    config = _config("ppo", "shared_assets", gym.spaces.Box(-1, 1, (8,), np.float32),
                     gym.spaces.Box(-1, 1, (3,), np.float32))
    with pytest.raises(InputError, match=r"training.model: shared_assets needs a Box observation of one row per asset"
                                         r".*use training.model: default$"):
        config.get_rl_module_spec().build()


@pytest.mark.parametrize("section, expected", [
    ({"model": "shared"}, "exp.yaml: training.model: Input should be 'default', 'shared_assets' or 'flat'"),
    ({"model_hiddens": [32]}, "exp.yaml: training.model_hiddens sizes a portfolio model"),
    ({"model": "flat", "model_hiddens": [0]}, "exp.yaml: training.model_hiddens.0: Input should be greater than 0"),
    ({"model": "flat", "model_hiddens": []}, "exp.yaml: training.model_hiddens: List should have at least 1 item"),
])
@pytest.mark.parametrize("training", MODEL_SECTIONS)
def test_bad_model_keys_are_refused_in_one_line_naming_the_key(training, section, expected):
    with pytest.raises(ValidationError) as refusal:
        training.model_validate(section)
    message = describe_validation_error(refusal.value, "exp.yaml", training, "training.")
    assert message.startswith(expected) and "\n" not in message


def test_a_searched_model_is_refused():
    with pytest.raises(InputError, match="training.model cannot be searched"):
        pop_model_config({"model": "__search__:training.model", "model_hiddens": None})
    assert pop_model_config({"model": "default", "model_hiddens": None}) is None
