"""The shared-weights portfolio module trains through RLlib's stock learners on a real local Ray: PPO with it learns to
overweight the one asset that always rises in the toy universe (tests/toy_universe.py), and the flat comparison model
and SAC train an iteration. Its export and parameter counts are tests/unit/test_portfolio_module.py's."""
from __future__ import annotations

import numpy as np
import torch

import algos
from algos.export.numpy_policy import NumpyPolicy
from algos.inputs import BuildInputs
from algos.ppo.algorithm import PPOTraining
from algos.sac.algorithm import SACTraining
from envs.portfolio.weights import scores_to_weights
from tests.toy_universe import ASSETS, ENV_ID, KAPPA, PLANTED, PlantedUniverse
from tests.trial_inputs import local_trial

PPO, SAC = algos.algorithm("ppo"), algos.algorithm("sac")


def _parameters(module: torch.nn.Module) -> int:
    return sum(param.numel() for param in module.parameters())


def _inputs(training: dict) -> BuildInputs:
    """What the platform hands a builder for one trial on the toy universe (one local env runner, local learner)."""
    return local_trial(ENV_ID, training, rollout_fragment_length="auto" if "minibatch_size" in training else 4,
                       activation="tanh")


def _ppo(model: str) -> dict:
    return PPOTraining(model=model, lr=3e-3, gamma=0.9, lambda_=0.9, train_batch_size_per_learner=256,
                       minibatch_size=64, num_epochs=4, use_kl_loss=False).model_dump()


def _greedy_weights(algo, algorithm, observations: np.ndarray) -> np.ndarray:
    """The mean greedy weights (cash first) the scorer would hold on `observations`: the numpy policy's scores
    through the env's score-to-weight map."""
    scores = NumpyPolicy.from_arrays(algorithm.export_numpy(algo.get_module()))(observations)
    return scores_to_weights(scores, observations[..., -1] > 0.5, "long_only", KAPPA).mean(axis=0)


def test_ppo_with_the_shared_model_learns_to_overweight_the_asset_that_always_rises(ray_session):
    algo = PPO.learner.build(_inputs(_ppo("shared_assets"))).build_algo()
    try:
        env = PlantedUniverse()
        observations = np.stack([env.reset(seed=seed)[0] for seed in range(64)])
        start = _greedy_weights(algo, PPO, observations)
        assert abs(start[1 + PLANTED] - start[0]) < 0.02  # equal scores at first: no asset preferred
        for _ in range(10):
            learner = algo.train()["learners"]["default_policy"]
            assert np.isfinite(learner["total_loss"]) and np.isfinite(learner["vf_loss"])
            weights = _greedy_weights(algo, PPO, observations)
            if weights[1 + PLANTED] > 0.5:
                break
        # Equal weights hold 0.2 of it; the planted asset now holds most of the book, more than cash or any other.
        assert weights[1 + PLANTED] > 0.5, weights
        assert weights[1 + PLANTED] > 2 * np.delete(weights, 1 + PLANTED).max(), weights
    finally:
        algo.stop()


def test_the_flat_model_builds_and_trains_one_iteration(ray_session):
    algo = PPO.learner.build(_inputs(_ppo("flat"))).build_algo()
    try:
        before = _parameters(algo.get_module())
        learner = algo.train()["learners"]["default_policy"]
        assert np.isfinite(learner["total_loss"]) and learner["num_module_steps_trained"] > 0
        assert type(algo.get_module()).__name__ == "PortfolioPPOModule" and _parameters(algo.get_module()) == before
    finally:
        algo.stop()


def test_sac_with_the_shared_model_trains_one_iteration(ray_session):
    training = SACTraining(model="shared_assets", model_hiddens=[32, 32], train_batch_size_per_learner=32,
                           num_steps_sampled_before_learning_starts=32, replay_buffer_capacity=1000,
                           training_intensity=32).model_dump()
    inputs = _inputs(training)
    inputs.sections["reporting"]["min_sample_timesteps_per_iteration"] = 64
    algo = SAC.learner.build(inputs).build_algo()
    try:
        learner = algo.train()["learners"]["default_policy"]
        assert all(np.isfinite(learner[key]) for key in ("qf_loss", "qf_twin_loss", "policy_loss", "alpha_loss"))
        assert learner["num_target_updates"] > 0  # the target Q nets (RLlib's, copied from ours) were updated
        # The env runner's module acts only: RLlib dropped its Q nets (InferenceOnlyAPI).
        assert type(algo.get_module()).__name__ == "PortfolioSACModule" and not hasattr(algo.get_module(), "qf")
        weights = _greedy_weights(algo, SAC, np.stack([PlantedUniverse().reset(seed=0)[0]]))
        assert weights.shape == (ASSETS + 1,) and abs(weights.sum() - 1.0) < 1e-9
    finally:
        algo.stop()
