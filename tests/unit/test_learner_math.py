"""`algos.fast.learner_math` runs the update FastDQN's and FastSAC's learners run, without Ray: its torch-only replicas
of RLlib's modules (built as the platform configures them: conf/dqn_btc.yaml, conf/sac_btc.yaml) take RLlib's weights
key for key, give RLlib's loss and gradients on one batch, and one update moves every weight as one minibatch of the
learner's `update_minibatches` does (learners built locally, no Ray session).

And every algorithm x model of the table (tests/network_cases.py) either has a replica whose outputs are its module's
on random weights and random inputs (every net: policy, Q, critics, targets), in each variant of the rl_module section
the replica is sized by, or says why it has none; a pair with neither fails the coverage test."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import algos
from tests import network_cases
from tests.network_cases import DEFAULT, Case

MID = "default_policy"
MODEL = {"fcnet_hiddens": [128, 128], "fcnet_activation": "relu", "head_fcnet_hiddens": []}  # the rl_module section
OBS_DIM = 194  # trading/Spot-v0 with window 24 (conf/dqn_btc.yaml)
TIMESTEPS = {"num_env_steps_sampled_lifetime": 0}


def _spaces(action_space: gym.Space) -> dict[str, tuple[gym.Space, gym.Space]]:
    obs_space = gym.spaces.Box(-10.0, 10.0, (OBS_DIM,), np.float32)
    return {"__env__": (obs_space, action_space), MID: (obs_space, action_space)}


def _learner(config, action_space: gym.Space):
    """An RLlib learner, built once (`build_learner` builds it: a second `build()` would give SAC a new log alpha
    that its alpha optimizer does not hold)."""
    return config.environment(observation_space=_spaces(action_space)[MID][0], action_space=action_space
                              ).rl_module(model_config=MODEL).build_learner(env=None, spaces=_spaces(action_space))


def _replica_state(rllib_state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """RLlib's state-dict keys as the replicas spell them (the heads' unused log-std clip constants dropped)."""
    return {key.replace(".net.mlp", "").removeprefix("_"): value.clone() for key, value in rllib_state.items()
            if not key.endswith("log_std_clip_param_const")}


def _columns(size: int, seed: int, continuous: bool) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    actions = (rng.uniform(-1, 1, (size, 1)).astype(np.float32) if continuous
               else rng.integers(0, 2, size).astype(np.int64))
    return {"obs": rng.normal(size=(size, OBS_DIM)).astype(np.float32),
            "new_obs": rng.normal(size=(size, OBS_DIM)).astype(np.float32), "actions": actions,
            "rewards": rng.normal(size=size).astype(np.float32),
            "terminateds": (rng.random(size) < 0.2).astype(np.float32),
            "n_step": rng.integers(1, 4, size).astype(np.float32),
            "weights": rng.uniform(0.5, 1.5, size).astype(np.float32)}


def _tensors(columns: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {key: torch.from_numpy(value) for key, value in columns.items()}


def _perturbed(state: dict[str, torch.Tensor], key: str) -> dict[str, torch.Tensor]:
    state[key][0, 0] += 0.5
    return state


def _gradient(learner, gradients: dict, param: torch.Tensor) -> torch.Tensor | None:
    """RLlib's gradient of `param` (compute_gradients keys them by the learner's parameter references)."""
    refs = [ref for ref, registered in learner._params.items() if registered is param]
    return gradients.get(refs[0]) if refs else None


def _assert_same_gradients(learner, gradients: dict, replica: torch.nn.Module) -> None:
    """Every parameter RLlib has a gradient for has the same gradient in the replica; the others (targets) none."""
    replica_params = dict(replica.named_parameters())
    named = dict(learner.module[MID].named_parameters())
    compared = 0
    for name, param in named.items():
        expected, got = _gradient(learner, gradients, param), replica_params[name.replace(".net.mlp", "").lstrip("_")]
        if expected is None:
            assert got.grad is None, name
        else:
            torch.testing.assert_close(got.grad, expected, rtol=1e-5, atol=1e-6)
            compared += 1
    assert compared >= 6


def _assert_same_weights(learner, replica: torch.nn.Module) -> None:
    for key, value in _replica_state(learner.module[MID].state_dict()).items():
        torch.testing.assert_close(replica.state_dict()[key], value, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("grad_clip", [40.0, 0.05])
def test_dqn_replica_gives_rllibs_loss_gradients_and_update(grad_clip):
    from algos.dqn.fast_dqn import FastDQNConfig
    from algos.fast.learner_math import DQNNet, DQNUpdate

    torch.manual_seed(0)
    learner = _learner(FastDQNConfig().training(double_q=True, dueling=True, td_error_loss_fn="huber",
                                                grad_clip=grad_clip, gamma=0.99, lr=5e-4), gym.spaces.Discrete(2))
    net = DQNNet(OBS_DIM, 2, MODEL["fcnet_hiddens"], "relu", dueling=True)
    net.load_state_dict(_replica_state(learner.module[MID].state_dict()))
    update = DQNUpdate(net, lr=5e-4, gamma=0.99, double_q=True, huber=True, grad_clip=grad_clip)
    columns = _columns(64, seed=1, continuous=False)
    batch = _tensors(columns)

    # RLlib's own forward_train and loss (not FastDQN's), and its gradients.
    config = learner.config.get_config_for_module(MID)
    stock_loss = learner.compute_loss_for_module(module_id=MID, config=config, batch=batch,
                                                 fwd_out=learner.module[MID].forward_train(batch))
    gradients = learner.compute_gradients({MID: stock_loss})
    loss, _ = update.loss(batch)
    assert loss.item() == pytest.approx(stock_loss.item(), rel=1e-5)
    loss.backward()
    _assert_same_gradients(learner, gradients, net)
    # The comparison has power: a perturbed weight gives another loss.
    perturbed = DQNNet(OBS_DIM, 2, MODEL["fcnet_hiddens"], "relu", dueling=True)
    perturbed.load_state_dict(_perturbed(_replica_state(learner.module[MID].state_dict()), "encoder.0.weight"))
    assert DQNUpdate(perturbed).loss(batch)[0].item() != pytest.approx(stock_loss.item(), rel=1e-4)

    # One update = one minibatch of FastDQN's loop (clip, fused Adam; the target network stays).
    _, stock_td = learner.update_minibatches(columns, minibatch_size=64, timesteps=TIMESTEPS)
    before = {key: value.clone() for key, value in net.state_dict().items()}
    td_error = update(batch)
    np.testing.assert_allclose(td_error.numpy(), stock_td, rtol=1e-5, atol=1e-6)
    _assert_same_weights(learner, net)
    moved = {key for key, value in net.state_dict().items() if not torch.equal(value, before[key])}
    assert moved == {key for key in before if not key.startswith("target_")}


def test_sac_replica_gives_rllibs_losses_gradients_and_update():
    from ray.rllib.algorithms.sac.sac_learner import QF_LOSS_KEY, QF_TWIN_LOSS_KEY
    from ray.rllib.core.learner.learner import POLICY_LOSS_KEY

    from algos.fast.learner_math import SACNet, SACUpdate
    from algos.sac.fast_sac import FastSACConfig

    torch.manual_seed(0)
    learner = _learner(FastSACConfig().training(twin_q=True, gamma=0.99, tau=5e-3, initial_alpha=0.2,
                                                actor_lr=3e-4, critic_lr=3e-4, alpha_lr=3e-4),
                       gym.spaces.Box(-1.0, 1.0, (1,), np.float32))
    net = SACNet(OBS_DIM, 1, MODEL["fcnet_hiddens"], "relu", twin_q=True)
    net.load_state_dict(_replica_state(learner.module[MID].state_dict()))
    update = SACUpdate(net, lr=3e-4, gamma=0.99, tau=5e-3, initial_alpha=0.2)
    torch.testing.assert_close(update.log_alpha, learner.curr_log_alpha[MID].detach())
    columns = _columns(64, seed=2, continuous=True)
    batch = _tensors(columns)

    # RLlib's own forward_train, loss and four backward passes, against the replica's one pass of the losses' sum.
    config = learner.config.get_config_for_module(MID)
    torch.manual_seed(7)
    stock_total = learner.compute_loss_for_module(module_id=MID, config=config, batch=batch,
                                                  fwd_out=learner.module[MID].forward_train(batch))
    stock = {key: learner._temp_losses[(MID, key)].item() for key in (POLICY_LOSS_KEY, QF_LOSS_KEY, QF_TWIN_LOSS_KEY)}
    gradients = learner.compute_gradients({MID: stock_total})
    torch.manual_seed(7)
    losses = update.losses(batch)
    assert losses.actor.item() == pytest.approx(stock[POLICY_LOSS_KEY], rel=1e-5)
    assert losses.critic.item() == pytest.approx(stock[QF_LOSS_KEY], rel=1e-5)
    assert losses.critic_twin.item() == pytest.approx(stock[QF_TWIN_LOSS_KEY], rel=1e-5)
    losses.total().backward()
    _assert_same_gradients(learner, gradients, net)
    torch.testing.assert_close(update.log_alpha.grad, _gradient(learner, gradients, learner.curr_log_alpha[MID]),
                               rtol=1e-5, atol=1e-7)
    # The comparison has power: a perturbed weight gives another critic loss.
    perturbed = SACNet(OBS_DIM, 1, MODEL["fcnet_hiddens"], "relu", twin_q=True)
    perturbed.load_state_dict(_perturbed(_replica_state(learner.module[MID].state_dict()),
                                         "qf_encoder.fusion_layers.0.weight"))
    torch.manual_seed(7)
    assert SACUpdate(perturbed).losses(batch).critic.item() != pytest.approx(stock[QF_LOSS_KEY], rel=1e-4)

    # One update = one minibatch of FastSAC's loop (four fused Adam steps, then the soft target update).
    torch.manual_seed(11)
    _, stock_td = learner.update_minibatches(columns, minibatch_size=64, timesteps=TIMESTEPS)
    before = {key: value.clone() for key, value in net.state_dict().items()}
    torch.manual_seed(11)
    td_error = update(batch)
    np.testing.assert_allclose(td_error.numpy(), stock_td, rtol=1e-5, atol=1e-6)
    _assert_same_weights(learner, net)
    torch.testing.assert_close(update.log_alpha, learner.curr_log_alpha[MID].detach(), rtol=1e-6, atol=1e-7)
    assert all(not torch.equal(value, before[key]) for key, value in net.state_dict().items())
    assert update.log_alpha.item() != pytest.approx(np.log(0.2), abs=1e-6)


# --- Every algorithm x model of the table: a replica equal to its module, or the reason it has none

# The replicas' variants: each rl_module.fcnet_activation, head layers, dueling or not, twin Q or one critic.
REPLICA_CASES: dict[str, Case] = {
    "dqn, dueling, relu": Case("dqn", DEFAULT, "discrete"),
    "dqn, dueling, tanh [32, 24], head [16]": Case("dqn", DEFAULT, "discrete", {}, {
        "fcnet_hiddens": [32, 24], "fcnet_activation": "tanh", "head_fcnet_hiddens": [16]}),
    "dqn, not dueling, swish": Case("dqn", DEFAULT, "discrete", {"dueling": False}, {"fcnet_activation": "swish"}),
    "dqn, not dueling, linear, head [8]": Case("dqn", DEFAULT, "discrete", {"dueling": False}, {
        "fcnet_activation": "linear", "head_fcnet_hiddens": [8]}),
    "sac, twin Q, relu": Case("sac", DEFAULT, "box"),
    "sac, twin Q, swish [32, 24], head [16]": Case("sac", DEFAULT, "box", {}, {
        "fcnet_hiddens": [32, 24], "fcnet_activation": "swish", "head_fcnet_hiddens": [16]}),
    "sac, one critic, tanh": Case("sac", DEFAULT, "box", {"twin_q": False}, {"fcnet_activation": "tanh"}),
    "sac, one critic, linear": Case("sac", DEFAULT, "box", {"twin_q": False}, {"fcnet_activation": "linear"}),
}
# Pairs of the table with no replica, and why: the benchmark times FastDQN's and FastSAC's updates on RLlib's default
# modules only (experiments/benchmark/learner_bench.py); every other learner runs its module itself.
_RLLIB_UPDATE = "RLlib's PPO learner runs its module itself; the learner benchmark times no PPO replica"
_DIRECT = "the direct learner runs its module itself, and so do the benchmark's direct rows (no replica to drift)"
_PORTFOLIO_SAC = "FastSAC on a portfolio module runs the module itself; the benchmark's replica is the default module's"
NO_REPLICA: dict[tuple[str, str, str], str] = {
    ("ppo", DEFAULT, "discrete"): _RLLIB_UPDATE,
    ("ppo", DEFAULT, "box"): _RLLIB_UPDATE,
    ("ppo", "shared_assets", "box"): _RLLIB_UPDATE,
    ("ppo", "flat", "box"): _RLLIB_UPDATE,
    ("sac", "shared_assets", "box"): _PORTFOLIO_SAC,
    ("sac", "flat", "box"): _PORTFOLIO_SAC,
    ("direct", DEFAULT, "box"): _DIRECT,
    ("direct", "shared_assets", "box"): _DIRECT,
    ("direct", "flat", "box"): _DIRECT,
}


def _replica(case: Case, module: torch.nn.Module) -> torch.nn.Module:
    """The case's replica, sized from the same rl_module and training sections as its module, holding its weights
    (the load is strict: a layer the replica lacks or adds fails here)."""
    from algos.fast.learner_math import DQNNet, SACNet

    section = network_cases.rl_module(case)
    training = algos.algorithm(case.algorithm).training_section.model_validate(case.training)
    sizes = (section["fcnet_hiddens"], section["fcnet_activation"], section["head_fcnet_hiddens"])
    if case.algorithm == "dqn":
        net = DQNNet(network_cases.OBSERVATION_SIZE, network_cases.ACTIONS, *sizes, dueling=training.dueling)
    else:
        net = SACNet(network_cases.OBSERVATION_SIZE, network_cases.BOX.shape[0], *sizes, twin_q=training.twin_q)
    net.load_state_dict(_replica_state(module.state_dict()))
    return net


def _same(got: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    assert got.shape == expected.shape and float(expected.abs().max()) > 0.05, what  # power: not all ~0
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5, msg=what)


@pytest.mark.parametrize("name", list(REPLICA_CASES))
def test_every_replica_computes_what_its_module_computes(name):
    case = REPLICA_CASES[name]
    module = network_cases.module(case)
    net = _replica(case, module)
    obs = torch.as_tensor(network_cases.observations(case, 128, seed=1))
    with torch.no_grad():
        if case.algorithm == "dqn":
            _same(net.q_values(obs), module.compute_q_values({"obs": obs})["qf_preds"], "Q")
            _same(net.q_values(obs, target=True), module.forward_target({"obs": obs})["qf_preds"], "target Q")
            return
        actions = torch.as_tensor(np.random.default_rng(2).uniform(-1, 1, (128, 2)).astype(np.float32))
        batch = {"obs": obs, "new_obs": obs, "actions": actions}
        nets = net.nets()
        _same(nets.pi(obs), module.forward_inference({"obs": obs})["action_dist_inputs"], "policy")
        trained = module.forward_train(batch)  # its critics on the batch's actions (its sampled ones aside)
        _same(nets.critic(obs, actions), trained["qf_preds"], "critic")
        if net.critics == ("qf", "qf_twin"):
            _same(nets.critic_twin(obs, actions), trained["qf_twin_preds"], "twin critic")
        _same(nets.target(obs, actions), module.forward_target(batch), "target critics (their minimum)")


def test_the_q_encoder_replica_takes_the_files_fusion_net():
    """rl_module.fusionnet_hiddens sizes SAC's Q encoder; the replica's QEncoder takes it too (SACNet builds RLlib's
    default, FUSION_HIDDENS, which conf/sac_btc.yaml keeps: the benchmark's replica)."""
    from algos.fast.learner_math import QEncoder

    case = Case("sac", DEFAULT, "box", {}, {"fusionnet_hiddens": [32, 16], "fcnet_activation": "tanh"})
    module = network_cases.module(case)
    section = network_cases.rl_module(case)
    encoder = QEncoder(network_cases.OBSERVATION_SIZE, network_cases.BOX.shape[0], section["fcnet_hiddens"],
                       section["fcnet_activation"], fusion=section["fusionnet_hiddens"])
    encoder.load_state_dict(_replica_state(module.qf_encoder.state_dict()))
    obs = torch.as_tensor(network_cases.observations(case, 128, seed=3))
    actions = torch.as_tensor(np.random.default_rng(4).uniform(-1, 1, (128, 2)).astype(np.float32))
    with torch.no_grad():
        _same(encoder(obs, actions), module.qf_encoder({"obs": obs, "actions": actions})["encoder_out"], "Q encoder")


def test_every_algorithm_and_model_of_the_table_has_a_replica_case_or_says_why_not():
    """A new algorithm, model or action kind in the table fails here until REPLICA_CASES has it or NO_REPLICA says
    why it has none; an entry for a pair the table no longer has fails too."""
    replicated = {case.pair for case in REPLICA_CASES.values()}
    assert network_cases.uncovered([*replicated, *NO_REPLICA]) == []
    assert sorted((replicated | set(NO_REPLICA)) - network_cases.table_pairs()) == []
    assert not replicated & set(NO_REPLICA)
