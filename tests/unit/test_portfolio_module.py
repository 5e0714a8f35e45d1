"""algos/portfolio_module.py: a policy whose weights are shared across the assets of a universe (EIIE), chosen by
`training.model`. Its parameters do not depend on N, its numpy export runs a model built for one N on another and
equals the torch forward pass, PPO with it learns to overweight the one asset that always rises in a toy universe
with the portfolio env's spaces, and the flat comparison model and SAC train through RLlib's stock learners."""
from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import torch
from pydantic import ValidationError

from algos.numpy_policy import NumpyPolicy, export_module
from algos.portfolio_model import pop_model_config
from algos.ppo import SPEC as PPO_SPEC
from algos.ppo import PPOTraining
from algos.sac import SPEC as SAC_SPEC
from algos.sac import SACTraining
from algos.spec import BuildInputs, Resources
from envs.errors import InputError
from envs.portfolio.weights import scores_to_weights
from envs.validation import describe_validation_error

ASSETS, WINDOW, FEATURES = 4, 2, 3
ROW = WINDOW * FEATURES + 2  # the window's features, the weight, the tradable flag
PLANTED = 2  # the asset that always rises
FLAKY = 3  # the asset that cannot trade on some steps
KAPPA = 3.0
STEPS = 16
ENV_ID = "PlantedUniverse-v0"
MODEL_CONFIG = {"fcnet_activation": "tanh"}


class PlantedUniverse(gym.Env):
    """The portfolio env's spaces on a toy market: each bar, every asset's log return is N(0, 0.03) except the
    planted asset's, 0.03 (+- 0.005): it always rises, and its features (its returns, scaled) say so. The reward is the
    log growth of the long-only softmax portfolio of the action's scores over the next bar's price relatives."""

    def __init__(self, assets: int = ASSETS) -> None:
        self.assets = assets
        self.observation_space = gym.spaces.Box(-10, 10, (assets, ROW), np.float32)
        self.action_space = gym.spaces.Box(-1, 1, (assets + 1,), np.float32)

    def _returns(self) -> np.ndarray:
        returns = self.np_random.normal(0.0, 0.03, self.assets)
        returns[PLANTED] = 0.03 + self.np_random.normal(0.0, 0.005)
        return returns

    def _features(self, returns: np.ndarray) -> np.ndarray:
        return np.stack([returns * 30, np.abs(returns) * 30, self.np_random.normal(0, 1, self.assets)], axis=1)

    def _draw_tradable(self) -> None:
        self.tradable = np.ones(self.assets, bool)
        self.tradable[FLAKY] = self.np_random.random() > 0.3

    def _obs(self) -> np.ndarray:
        obs = np.zeros((self.assets, ROW), np.float32)
        obs[:, :WINDOW * FEATURES] = np.concatenate(self.window, axis=1)
        obs[~self.tradable, :WINDOW * FEATURES] = 0.0
        obs[:, -2], obs[:, -1] = self.weights[1:], self.tradable
        return np.clip(obs, -10, 10)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t, self.weights = 0, np.eye(self.assets + 1)[0]
        self.window = [self._features(self._returns()) for _ in range(WINDOW)]
        self._draw_tradable()
        return self._obs(), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        weights = scores_to_weights(action, self.tradable, "long_only", KAPPA)
        returns = self._returns()
        relatives = np.concatenate([[1.0], np.exp(returns)])
        growth = float(weights @ relatives)
        self.weights = weights * relatives / growth
        self.window = self.window[1:] + [self._features(returns)]
        self._draw_tradable()
        self.t += 1
        return self._obs(), float(np.log(growth)), False, self.t >= STEPS, {}


gym.register(ENV_ID, entry_point=PlantedUniverse)


def _observations(rows: int, assets: int, seed: int = 0) -> np.ndarray:
    """Random rows with the portfolio layout: features, a weight, a tradable flag (about 1 in 5 untradable, features
    0), and real observations of the toy universe in the first rows."""
    rng = np.random.default_rng(seed)
    obs = (rng.standard_normal((rows, assets, ROW)) * 2).astype(np.float32)
    obs[..., -2] = rng.dirichlet(np.ones(assets + 1), rows)[:, 1:]
    obs[..., -1] = rng.random((rows, assets)) > 0.2
    obs[obs[..., -1] == 0.0, :WINDOW * FEATURES] = 0.0
    return obs


def _module(algorithm: str, model: str, assets: int, hiddens: list[int] | None = None, seed: int = 3):
    """A portfolio RLModule as the builder makes it (the spec's training section, its model_config), for `assets`."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.algorithms.sac import SACConfig

    from algos.portfolio_module import with_portfolio_module

    training = {"model": model, "model_hiddens": hiddens}
    config = (PPOConfig() if algorithm == "ppo" else SACConfig()).environment(
        observation_space=gym.spaces.Box(-10, 10, (assets, ROW), np.float32),
        action_space=gym.spaces.Box(-1, 1, (assets + 1,), np.float32))
    config = with_portfolio_module(config, algorithm, pop_model_config(training), MODEL_CONFIG)
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


@pytest.mark.parametrize("algorithm", ["ppo", "sac"])
def test_the_shared_model_has_as_many_parameters_for_3_assets_as_for_500(algorithm):
    small, large = _module(algorithm, "shared_assets", 3), _module(algorithm, "shared_assets", 500)
    assert _parameters(small) == _parameters(large) > 0
    flat_small, flat_large = _module(algorithm, "flat", 3), _module(algorithm, "flat", 500)
    assert _parameters(flat_large) > 10 * _parameters(flat_small)  # the flat MLP grows with N: why it is not shared


@pytest.mark.parametrize("algorithm", ["ppo", "sac"])
def test_the_numpy_export_equals_torch_at_3_and_at_50_assets_with_the_same_weights(algorithm):
    spec = PPO_SPEC if algorithm == "ppo" else SAC_SPEC
    module = _module(algorithm, "shared_assets", 3)
    policy = NumpyPolicy.from_arrays(export_module(module, spec.greedy))
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
        torch_scores = spec.greedy.actions(out, gym.spaces.Box(-1, 1, (assets + 1,), np.float32)).numpy()
        np.testing.assert_allclose(scores, torch_scores, rtol=0, atol=1e-6)
        assert scores.shape == (200, assets + 1) and np.all(np.abs(scores) <= 1.0) and float(np.ptp(scores)) > 1.0
        untradable = np.concatenate([np.zeros((200, 1), bool), observations[..., -1] == 0.0], axis=1)
        assert untradable.any() and np.all(outputs[:, :assets + 1][untradable] == 0.0)
        assert np.all(outputs[:, assets + 1:][untradable] == 0.0) and np.all(np.isfinite(outputs))


def test_a_row_gets_the_same_score_bits_in_any_batch_and_after_a_save(tmp_path):
    policy = NumpyPolicy.from_arrays(export_module(_module("ppo", "shared_assets", 3), PPO_SPEC.greedy))
    observations = _observations(40, 7, seed=1)
    whole = policy(observations)
    one_by_one = np.concatenate([policy(observations[i:i + 1]) for i in range(len(observations))])
    assert np.array_equal(whole.view(np.uint32), one_by_one.view(np.uint32))
    policy.save(tmp_path / "policy")
    assert np.array_equal(NumpyPolicy.load(tmp_path / "policy")(observations).view(np.uint32), whole.view(np.uint32))


@pytest.mark.parametrize("algorithm", ["ppo", "sac"])
def test_a_checkpointed_module_is_scored_as_it_was_trained(algorithm, tmp_path):
    """The scorer reads a checkpoint's module folder back (experiments.results.policy): the class, its model_config
    and its weights come back, so its numpy policy gives the same score bits."""
    from ray.rllib.core.rl_module.rl_module import RLModule

    spec = PPO_SPEC if algorithm == "ppo" else SAC_SPEC
    module = _module(algorithm, "shared_assets", 3)
    module.save_to_path(tmp_path / "module")
    restored = RLModule.from_checkpoint(tmp_path / "module")
    assert type(restored) is type(module)
    observations = _observations(20, 9)
    scores = [NumpyPolicy.from_arrays(export_module(m, spec.greedy))(observations) for m in (module, restored)]
    assert np.array_equal(scores[0].view(np.uint32), scores[1].view(np.uint32))


def test_the_flat_model_exports_for_its_own_universe_only():
    module = _module("ppo", "flat", ASSETS)
    policy = NumpyPolicy.from_arrays(export_module(module, PPO_SPEC.greedy))
    observations = _observations(50, ASSETS)
    with torch.no_grad():
        expected = module.forward_inference({"obs": torch.as_tensor(observations)})["action_dist_inputs"].numpy()
    np.testing.assert_allclose(policy.outputs(observations), expected, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match=rf"observations must have shape \(n, {ASSETS}, {ROW}\)"):
        policy(_observations(5, ASSETS + 1))


def test_a_portfolio_export_missing_a_part_is_refused_in_one_line():
    arrays = export_module(_module("ppo", "shared_assets", 3), PPO_SPEC.greedy)
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
    from ray.rllib.algorithms.ppo import PPOConfig

    from algos.portfolio_module import with_portfolio_module

    config = PPOConfig().environment(observation_space=gym.spaces.Box(-1, 1, (8,), np.float32),
                                     action_space=gym.spaces.Box(-1, 1, (3,), np.float32))
    config = with_portfolio_module(config, "ppo", pop_model_config({"model": "shared_assets", "model_hiddens": None}),
                                   MODEL_CONFIG)
    with pytest.raises(InputError, match=r"training.model: shared_assets needs a Box observation of one row per asset"
                                         r".*use training.model: default$"):
        config.get_rl_module_spec().build()


@pytest.mark.parametrize("section, expected", [
    ({"model": "shared"}, "exp.yaml: training.model: Input should be 'default', 'shared_assets' or 'flat'"),
    ({"model_hiddens": [32]}, "exp.yaml: training.model_hiddens sizes a portfolio model"),
    ({"model": "flat", "model_hiddens": [0]}, "exp.yaml: training.model_hiddens.0: Input should be greater than 0"),
    ({"model": "flat", "model_hiddens": []}, "exp.yaml: training.model_hiddens: List should have at least 1 item"),
])
@pytest.mark.parametrize("training", [PPOTraining, SACTraining])
def test_bad_model_keys_are_refused_in_one_line_naming_the_key(training, section, expected):
    with pytest.raises(ValidationError) as refusal:
        training.model_validate(section)
    message = describe_validation_error(refusal.value, "exp.yaml", training, "training.")
    assert message.startswith(expected) and "\n" not in message


def test_a_searched_model_is_refused():
    with pytest.raises(InputError, match="training.model cannot be searched"):
        pop_model_config({"model": "__search__:training.model", "model_hiddens": None})
    assert pop_model_config({"model": "default", "model_hiddens": None}) is None


def _inputs(training: dict, rl_module: dict | None = None) -> BuildInputs:
    """What the platform hands a builder for one trial on the toy universe (one local env runner, local learner)."""
    sections = {
        "environment": {"env": ENV_ID, "env_config": {}},
        "env_runners": {"rollout_fragment_length": "auto" if "minibatch_size" in training else 4},
        "learners": {},
        "training": training,
        "rl_module": rl_module or {"fcnet_hiddens": [64, 64], "fcnet_activation": "tanh", "head_fcnet_hiddens": []},
        "evaluation": {"evaluation_interval": None, "evaluation_duration": 1, "evaluation_duration_unit": "episodes",
                       "env_config": {}},
        "reporting": {"min_sample_timesteps_per_iteration": None, "min_time_s_per_iteration": None},
    }
    resources = Resources(num_env_runners=0, num_envs_per_env_runner=1, num_cpus_per_env_runner=1, num_learners=0,
                          num_gpus_per_learner=0)
    return BuildInputs(env_id=ENV_ID, sections=sections, resources=resources,
                       metric="env_runners/episode_return_mean", mode="max", seed=0)


@pytest.fixture(scope="module")
def ray_session():
    """A small local Ray (one CPU, no dashboard) for this module's training tests, one torch thread."""
    import ray

    torch.set_num_threads(1)
    ray.shutdown()
    ray.init(num_cpus=1, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    yield
    ray.shutdown()


def _ppo(model: str) -> dict:
    return PPOTraining(model=model, lr=3e-3, gamma=0.9, lambda_=0.9, train_batch_size_per_learner=256,
                       minibatch_size=64, num_epochs=4, use_kl_loss=False).model_dump()


def _greedy_weights(algo, spec, observations: np.ndarray) -> np.ndarray:
    """The mean greedy weights (cash first) the scorer would hold on `observations`: the numpy policy's scores
    through the env's score-to-weight map."""
    scores = NumpyPolicy.from_arrays(export_module(algo.get_module(), spec.greedy))(observations)
    return scores_to_weights(scores, observations[..., -1] > 0.5, "long_only", KAPPA).mean(axis=0)


@pytest.mark.slow
def test_ppo_with_the_shared_model_learns_to_overweight_the_asset_that_always_rises(ray_session):
    algo = PPO_SPEC.build(_inputs(_ppo("shared_assets"))).build_algo()
    try:
        env = PlantedUniverse()
        observations = np.stack([env.reset(seed=seed)[0] for seed in range(64)])
        start = _greedy_weights(algo, PPO_SPEC, observations)
        assert abs(start[1 + PLANTED] - start[0]) < 0.02  # equal scores at first: no asset preferred
        for _ in range(10):
            learner = algo.train()["learners"]["default_policy"]
            assert np.isfinite(learner["total_loss"]) and np.isfinite(learner["vf_loss"])
            weights = _greedy_weights(algo, PPO_SPEC, observations)
            if weights[1 + PLANTED] > 0.5:
                break
        # Equal weights hold 0.2 of it; the planted asset now holds most of the book, more than cash or any other.
        assert weights[1 + PLANTED] > 0.5, weights
        assert weights[1 + PLANTED] > 2 * np.delete(weights, 1 + PLANTED).max(), weights
    finally:
        algo.stop()


@pytest.mark.slow
def test_the_flat_model_builds_and_trains_one_iteration(ray_session):
    algo = PPO_SPEC.build(_inputs(_ppo("flat"))).build_algo()
    try:
        before = _parameters(algo.get_module())
        learner = algo.train()["learners"]["default_policy"]
        assert np.isfinite(learner["total_loss"]) and learner["num_module_steps_trained"] > 0
        assert type(algo.get_module()).__name__ == "PortfolioPPOModule" and _parameters(algo.get_module()) == before
    finally:
        algo.stop()


@pytest.mark.slow
def test_sac_with_the_shared_model_trains_one_iteration(ray_session):
    training = SACTraining(model="shared_assets", model_hiddens=[32, 32], train_batch_size_per_learner=32,
                           num_steps_sampled_before_learning_starts=32, replay_buffer_capacity=1000,
                           training_intensity=32).model_dump()
    inputs = _inputs(training)
    inputs.sections["reporting"]["min_sample_timesteps_per_iteration"] = 64
    algo = SAC_SPEC.build(inputs).build_algo()
    try:
        learner = algo.train()["learners"]["default_policy"]
        assert all(np.isfinite(learner[key]) for key in ("qf_loss", "qf_twin_loss", "policy_loss", "alpha_loss"))
        assert learner["num_target_updates"] > 0  # the target Q nets (RLlib's, copied from ours) were updated
        # The env runner's module acts only: RLlib dropped its Q nets (InferenceOnlyAPI).
        assert type(algo.get_module()).__name__ == "PortfolioSACModule" and not hasattr(algo.get_module(), "qf")
        weights = _greedy_weights(algo, SAC_SPEC, np.stack([PlantedUniverse().reset(seed=0)[0]]))
        assert weights.shape == (ASSETS + 1,) and abs(weights.sum() - 1.0) < 1e-9
    finally:
        algo.stop()
