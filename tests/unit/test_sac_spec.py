"""algos/sac/, the third entry of the algorithm table, and what it brought to the shared seams: the action spaces
each algorithm declares, the greedy rule of a squashed Gaussian (tanh of the mean, scaled to the Box) next to the
unchanged DQN and PPO rules, and the numpy export of SAC's policy network, checked against torch."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from pydantic import ValidationError

import algos
from algos.base import Algorithm
from algos.export.numpy_policy import BOUNDS, NumpyPolicy
from algos.greedy import GreedyRule
from algos.inputs import BuildInputs, Resources
from algos.sac.algorithm import SACTraining
from envs.errors import InputError
from envs.validation import describe_validation_error

DQN, PPO, SAC = (algos.algorithm(name) for name in ("dqn", "ppo", "sac"))

OBSERVATION_SIZE = 7
ROWS = 500
# Bounds not centred on 0: a rescaling that ignored low or high would show.
BOX = gym.spaces.Box(np.array([-2.0, 0.0, -1.0], np.float32), np.array([2.0, 1.0, 3.0], np.float32))


def _inputs(training: dict | None = None, env_id: str = "Pendulum-v1") -> BuildInputs:
    """What the platform hands SAC's builder for one trial on CPU (the sections as the experiment file's defaults
    dump them)."""
    sections = {
        "environment": {"env": env_id, "env_config": {}},
        "env_runners": {"rollout_fragment_length": 4},
        "learners": {},
        "training": SACTraining(**(training or {})).model_dump(),
        "rl_module": {"fcnet_hiddens": [64, 64], "fcnet_activation": "relu", "head_fcnet_hiddens": []},
        "evaluation": {"evaluation_interval": None, "evaluation_duration": 1, "evaluation_duration_unit": "episodes",
                       "env_config": {}},
        "reporting": {"min_sample_timesteps_per_iteration": 1000, "min_time_s_per_iteration": None},
    }
    resources = Resources(num_env_runners=0, num_envs_per_env_runner=1, num_cpus_per_env_runner=1, num_learners=0,
                          num_gpus_per_learner=0)
    return BuildInputs(env_id=env_id, sections=sections, resources=resources,
                       metric="env_runners/episode_return_mean", mode="max", seed=0)


def _refusal(section: dict) -> str:
    """The one line a user reads for a bad `training` section (as experiment files describe it)."""
    with pytest.raises(ValidationError) as refusal:
        SACTraining.model_validate(section)
    return describe_validation_error(refusal.value, "exp.yaml", SACTraining, "training.")


def test_the_table_entry_resolves_to_sac():
    entry = algos.ALGORITHMS["sac"]
    assert entry is SAC and entry.name == "sac" and entry.training_section is SACTraining
    from algos.sac.fast_sac import FastSAC

    learner = entry.learner
    assert learner.trainable(SACTraining().model_dump()) is FastSAC  # the default: implementation fast
    assert learner.trainable(SACTraining(implementation="rllib").model_dump()) == "SAC"
    assert learner.reports("learners/default_policy/alpha_value")
    assert learner.reports("replay_buffer/num_env_steps_stored")


@pytest.mark.parametrize("section, message", [
    ({"actor_lrr": 1e-3}, "unknown key 'training.actor_lrr': did you mean 'training.actor_lr'?"),
    ({"lr": -1e-3}, "training.lr: Input should be greater than 0"),
    ({"critic_lr": 0}, "training.critic_lr: Input should be greater than 0"),
    ({"target_entropy": "manual"}, "training.target_entropy: write auto"),
    ({"batch_scaling": "preset", "actor_lr": 1e-4}, "batch_scaling: preset scales training.lr only: drop actor_lr"),
    ({"implementation": "rllib", "replay_buffer_type": "prioritized"},
     "replay_buffer_type prioritized needs implementation fast"),
])
def test_the_training_section_refuses_bad_values_in_one_line(section, message):
    line = _refusal(section)
    assert message in line and "\n" not in line


def test_target_entropy_takes_auto_or_a_number():
    assert SACTraining().target_entropy == "auto"
    assert SACTraining(target_entropy=-2).target_entropy == -2.0


def test_build_returns_an_sac_config_with_lr_driving_every_optimizer():
    from ray.rllib.algorithms.sac import SACConfig

    config = SAC.learner.build(_inputs({"lr": 1e-3, "alpha_lr": 1e-4, "replay_buffer_capacity": 5000,
                                     "training_intensity": 64, "twin_q": False}))
    assert isinstance(config, SACConfig) and config.env == "Pendulum-v1"
    assert (config.actor_lr, config.critic_lr, config.alpha_lr) == (1e-3, 1e-3, 1e-4)
    assert config.replay_buffer_config["type"] == "EpisodeReplayBuffer"
    assert config.replay_buffer_config["capacity"] == 5000
    assert config.training_intensity == 64 and config.twin_q is False and config.grad_clip is None
    assert config.train_batch_size_per_learner == 256 and config.target_entropy == "auto"
    config.validate()  # RLlib accepts it as built


def test_the_replay_ratio_is_the_intensity_or_one_batch_per_sample_call():
    assert SAC.replay_ratio(SACTraining(training_intensity=64), 4, 1) == 64
    assert SAC.replay_ratio(SACTraining(), 4, 2) == 256 / 8


def _squashed(means: list[list[float]]) -> dict[str, np.ndarray]:
    """A forward_inference output for these means (log-stds beside them, which greedy actions ignore)."""
    mean = np.array(means, np.float32)
    return {"action_dist_inputs": np.concatenate([mean, np.full_like(mean, 5.0)], axis=-1)}


def test_the_squash_rule_maps_means_to_tanh_scaled_actions_in_the_box():
    rule = SAC.greedy
    out = _squashed([[0.0, 0.0, 0.0], [30.0, 30.0, 30.0], [-30.0, -30.0, -30.0], [0.5, -1.0, 2.0]])
    actions = rule.actions(out, BOX)
    assert actions.dtype == np.float32 and actions.shape == (4, 3)
    np.testing.assert_allclose(actions[0], [0.0, 0.5, 1.0], atol=1e-7)  # the mean 0: the Box's middle
    np.testing.assert_array_equal(actions[1], BOX.high)
    np.testing.assert_array_equal(actions[2], BOX.low)
    expected = BOX.low + (np.tanh([0.5, -1.0, 2.0]) + 1) * (BOX.high - BOX.low) / 2
    np.testing.assert_allclose(actions[3], expected, rtol=1e-6)
    assert np.all(actions >= BOX.low) and np.all(actions <= BOX.high)
    # No space, or an unbounded one (RLlib does not rescale that either): tanh of the mean.
    np.testing.assert_allclose(rule.actions(out)[3], np.tanh([0.5, -1.0, 2.0]), rtol=1e-6)
    unbounded = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
    np.testing.assert_array_equal(rule.actions(out, unbounded), rule.actions(out))


def test_the_squash_rule_keeps_torch_tensors_torch():
    out = _squashed([[0.5, -1.0, 2.0]])
    tensor = SAC.greedy.actions({"action_dist_inputs": torch.as_tensor(out["action_dist_inputs"])}, BOX)
    assert isinstance(tensor, torch.Tensor) and tensor.dtype == torch.float32
    np.testing.assert_allclose(tensor.numpy(), SAC.greedy.actions(out, BOX), rtol=1e-6)


def test_the_dqn_and_ppo_rules_are_unchanged():
    assert DQN.greedy == GreedyRule(output="actions") and not DQN.greedy.squash
    # PPO argmaxes discrete logits as before; on a Box its Gaussian's mean is the action (box_mean).
    assert PPO.greedy == GreedyRule(output="action_dist_inputs", argmax=True, box_mean=True)
    assert not PPO.greedy.squash
    logits = np.array([[0.1, 2.0, -1.0], [3.0, 0.0, 0.5]], np.float32)
    assert PPO.greedy.actions({"action_dist_inputs": logits}).tolist() == [1, 0]
    assert PPO.greedy.actions({"action_dist_inputs": torch.as_tensor(logits)}).tolist() == [1, 0]
    assert PPO.greedy.actions({"action_dist_inputs": logits}, gym.spaces.Discrete(3)).tolist() == [1, 0]


def test_ppo_on_a_box_acts_with_its_gaussian_mean_in_the_box():
    means_and_log_stds = np.array([[0.5, -3.0, 2.0, 0.1, 0.2, 0.3]], np.float32)
    actions = PPO.greedy.actions({"action_dist_inputs": means_and_log_stds}, BOX)
    np.testing.assert_allclose(actions, [[1.0, 0.0, 3.0]])  # (mean + 1) x (high - low) / 2 + low, clipped
    tensor = PPO.greedy.actions({"action_dist_inputs": torch.as_tensor(means_and_log_stds)}, BOX)
    assert isinstance(tensor, torch.Tensor) and np.array_equal(tensor.numpy(), actions)
    with pytest.raises(InputError, match="exclude each other"):
        GreedyRule(output="action_dist_inputs", box_mean=True, squash=True)
    actions = np.array([2, 0])
    assert DQN.greedy.actions({"actions": actions}) is actions


def test_a_rule_cannot_both_argmax_and_squash():
    with pytest.raises(InputError, match="exclude each other"):
        GreedyRule(output="action_dist_inputs", argmax=True, squash=True)


@pytest.mark.parametrize("name, discrete, box", [("dqn", True, False), ("ppo", True, True), ("sac", False, True)])
def test_each_algorithm_says_which_action_spaces_it_supports(name, discrete, box):
    entry = algos.algorithm(name)
    assert entry.supports(gym.spaces.Discrete(3)) is discrete
    assert entry.supports(BOX) is box
    assert not entry.supports(gym.spaces.MultiDiscrete([2, 3]))


def test_an_unknown_action_space_kind_is_refused():
    class Continuous(Algorithm):
        name = "x"
        training_section = SACTraining
        greedy = GreedyRule(output="actions")
        action_spaces = ("continuous",)
        learner = SAC.learner

    with pytest.raises(InputError, match="action_spaces \\['continuous'\\] must name one or more of discrete, box"):
        Continuous()


def _sac_module(action_space: gym.Space = BOX, model_config: dict | None = None, inference_only: bool = False):
    """An untrained SAC RLModule as RLlib's SACConfig builds it (seeded weights)."""
    from ray.rllib.algorithms.sac import SACConfig

    config = SACConfig().environment(
        observation_space=gym.spaces.Box(-10, 10, (OBSERVATION_SIZE,), np.float32), action_space=action_space)
    if model_config:
        config = config.rl_module(model_config=model_config)
    spec = config.get_rl_module_spec()
    spec.inference_only = inference_only
    torch.manual_seed(3)
    module = spec.build()
    module.eval()
    return module


def _observations(rows: int, seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal((rows, OBSERVATION_SIZE)) * 3).astype(np.float32)


MODULES = {
    "default (256x256 tanh), 3-d box": ({}, BOX, False),
    "64x32 relu, layernorm, head 16, 1-d box, inference only": (
        {"fcnet_hiddens": [64, 32], "fcnet_activation": "relu", "fcnet_use_layernorm": True,
         "head_fcnet_hiddens": [16]}, gym.spaces.Box(-2.0, 2.0, (1,), np.float32), True),
}


@pytest.fixture(scope="module", params=list(MODULES))
def sac_case(request):
    model_config, space, inference_only = MODULES[request.param]
    module = _sac_module(space, model_config, inference_only)
    return module, space, NumpyPolicy.from_arrays(SAC.export_numpy(module))


def test_the_numpy_export_of_sac_equals_torch(sac_case):
    module, space, policy = sac_case
    observations = _observations(ROWS)
    with torch.no_grad():
        out = module.forward_inference({"obs": torch.as_tensor(observations)})
    expected = SAC.greedy.actions(out, space).numpy()
    actions = policy(observations)
    assert actions.dtype == np.float32 and actions.shape == (ROWS, space.shape[0])
    np.testing.assert_allclose(actions, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(policy.outputs(observations), out["action_dist_inputs"].numpy(), rtol=1e-5, atol=1e-6)
    assert np.all(actions >= space.low) and np.all(actions <= space.high)
    assert float(np.ptp(actions)) > 0.1  # the actions vary, so equal actions say something
    assert policy.action_space == space and policy.num_actions is None


def test_one_observation_gets_the_same_action_bits_in_any_batch(sac_case, tmp_path):
    _, _, policy = sac_case
    observations = _observations(64, seed=1)
    whole = policy(observations)
    one_by_one = np.concatenate([policy(observations[i:i + 1]) for i in range(len(observations))])
    assert np.array_equal(whole.view(np.uint32), one_by_one.view(np.uint32))
    policy.save(tmp_path / "policy")
    assert np.array_equal(NumpyPolicy.load(tmp_path / "policy")(observations).view(np.uint32), whole.view(np.uint32))


def test_a_sac_module_it_cannot_serve_is_refused_in_one_line():
    with pytest.raises(InputError, match="action space Discrete\\(3\\) \\(this policy acts in a 1-d Box\\)"):
        SAC.export_numpy(_sac_module(gym.spaces.Discrete(3)))
    with pytest.raises(InputError, match="RLModule class DefaultSACTorchRLModule is not supported"):
        PPO.export_numpy(_sac_module())  # another learner's module: each learner exports its own classes


def test_an_export_without_its_bounds_is_refused(sac_case):
    _, _, policy = sac_case
    arrays = policy.to_arrays()
    del arrays[BOUNDS[0]]
    with pytest.raises(InputError, match="array 'action.low' is missing"):
        NumpyPolicy.from_arrays(arrays)
    arrays = policy.to_arrays()
    arrays[BOUNDS[0]] = arrays[BOUNDS[1]] + 1
    with pytest.raises(InputError, match="low <= high"):
        NumpyPolicy.from_arrays(arrays)


def _fusion_sizes(config) -> list[int]:
    """The output sizes of the fusion layers of the Q network RLlib builds from `config` for Pendulum-v1."""
    module = config.get_rl_module_spec(env=gym.make("Pendulum-v1")).build()
    return [layer.out_features for layer in module.qf_encoder.fusion_layers]


def test_the_q_networks_fusion_net_is_the_experiment_files_choice():
    from algos.fast.learner_math import FUSION_HIDDENS
    from experiments.config.experiment import RLModuleSection
    from experiments.config.load import load_experiment
    from experiments.hardware import load_preset, resolve_plan
    from experiments.sweep.rllib_config import build_config
    from tests.conftest import REPO

    conf = REPO / "conf" / "sac_pendulum.yaml"
    for overrides, sizes in (([], [64]), (["rl_module.fusionnet_hiddens=[32, 16]"], [32, 16])):
        exp = load_experiment(conf, overrides)
        plan = resolve_plan(load_preset("cpu"), exp.timeframe, 1, exp.training.train_batch_size_per_learner)
        assert _fusion_sizes(build_config(exp, plan, seed=0)) == sizes
    # Unset, it is RLlib's default, which the Ray-free learner benchmark replicates.
    assert RLModuleSection().fusionnet_hiddens == list(FUSION_HIDDENS)
    assert _fusion_sizes(SAC.learner.build(_inputs())) == list(FUSION_HIDDENS)
    with pytest.raises(InputError, match="rl_module.fusionnet_hiddens"):
        load_experiment(conf, ["rl_module.fusionnet_hiddens=[]"])
    # Another algorithm's network does not read it: set in its file, it is refused, not silently ignored.
    with pytest.raises(InputError, match=r"rl_module.fusionnet_hiddens: algorithm dqn's network does not read it"):
        load_experiment(REPO / "conf" / "dqn_btc.yaml", ["rl_module.fusionnet_hiddens=[64]"])
