"""The algorithm x model table that the network tests cover, and the RLModules they compare against.

Each network exists three times: the RLModule a learner trains, its numpy export (algos/export/) and, for FastDQN and
FastSAC, the torch replica the learner benchmark times (algos/fast/learner_math.py). Their tests
(tests/unit/test_numpy_policy.py, test_learner_math.py, test_portfolio_module.py) hold the copies to the module on
random weights and random inputs, case by case. `table_pairs` lists what must be covered, read from the table
itself: every algorithm of `algos.ALGORITHMS`, every model its `training` section offers (`training.model`), in every
action-space kind it acts in. A test asserts that its cases cover every pair, so a new algorithm or model without a
case fails there until one is written.

`module` builds a case's RLModule with the algorithm's own learner (`learner.build`, as a trial's config is built;
no Ray cluster), its every weight redrawn at random.
"""
from __future__ import annotations

import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

import algos
from tests.trial_inputs import local_trial

DEFAULT = "default"  # RLlib's default module: an MLP over a flat observation (training.model: default)
OBSERVATION_SIZE = 20
ACTIONS = 3
# A Box not centred on 0, of two actions: a rescaling that ignored low or high, or a mixed-up axis, would show.
BOX = gym.spaces.Box(np.array([-1.0, 0.0], np.float32), np.array([1.0, 2.0], np.float32), dtype=np.float32)
# A small universe for the portfolio models: rows of 5 features, then the asset's weight, then its tradable flag.
ASSETS, ROW = 4, 7
WEIGHT_COLUMN, TRADABLE_COLUMN = -2, -1
SPOT, PORTFOLIO = "trading/Spot-v0", "trading/Portfolio-v0"

Pair = tuple[str, str, str]  # (algorithm, model, action kind)


@dataclass(frozen=True)
class Case:
    """One algorithm x model x action kind, with the training and rl_module keys that pick a variant of its network
    (over tests.trial_inputs.local_trial's [64, 64] relu network)."""

    algorithm: str
    model: str
    kind: str
    training: dict[str, Any] = field(default_factory=dict)
    rl_module: dict[str, Any] = field(default_factory=dict)

    @property
    def pair(self) -> Pair:
        return self.algorithm, self.model, self.kind


def models(algorithm: Any) -> tuple[str, ...]:
    """The models an algorithm's training section offers (its `model` key's choices), or the default alone."""
    model = algorithm.training_section.model_fields.get("model")
    return typing.get_args(model.annotation) if model is not None else (DEFAULT,)


def table_pairs() -> set[Pair]:
    """Every (algorithm, model, action kind) of the table: the default model in each kind the algorithm acts in, a
    portfolio model (shared_assets, flat) in the Box of scores it acts in (the only kind it has)."""
    pairs: set[Pair] = set()
    for name, algorithm in algos.ALGORITHMS.items():
        for model in models(algorithm):
            kinds = algorithm.action_spaces if model == DEFAULT else [k for k in algorithm.action_spaces if k == "box"]
            pairs |= {(name, model, kind) for kind in kinds}
    return pairs


def uncovered(covered: Iterable[Pair]) -> list[Pair]:
    """The pairs of the table that no case covers, sorted (empty when every one is)."""
    return sorted(table_pairs() - set(covered))


def spaces(case: Case, assets: int = ASSETS) -> tuple[gym.Space, gym.Space]:
    """The case's (observation space, action space): a flat observation and Discrete or BOX actions; a universe of
    `assets` rows and N+1 scores in [-1, 1] for a portfolio model."""
    if case.model != DEFAULT:
        return (gym.spaces.Box(-10, 10, (assets, ROW), np.float32),
                gym.spaces.Box(-1.0, 1.0, (assets + 1,), np.float32))
    observation = gym.spaces.Box(-10, 10, (OBSERVATION_SIZE,), np.float32)
    return observation, gym.spaces.Discrete(ACTIONS) if case.kind == "discrete" else BOX


def module(case: Case, seed: int = 0) -> Any:
    """The case's RLModule as its algorithm's learner configures it, with target networks where it has them (its
    learner adds them), every weight redrawn (`randomize`), in eval mode."""
    import torch

    algorithm = algos.algorithm(case.algorithm)
    section = {**case.training, **({"model": case.model} if case.model != DEFAULT else {})}
    training = algorithm.training_section.model_validate(section).model_dump()
    inputs = _trial(case, training)
    config = algorithm.learner.build(inputs)
    observation_space, action_space = spaces(case)
    config.environment(observation_space=observation_space, action_space=action_space)
    torch.manual_seed(seed)
    built = config.get_rl_module_spec().build()
    if hasattr(built, "make_target_networks"):
        built.make_target_networks()
    randomize(built, seed)
    built.eval()
    return built


def _trial(case: Case, training: dict[str, Any]) -> Any:
    """What the platform hands the learner's builder for one trial of the case (tests.trial_inputs.local_trial), its
    rl_module section overlaid with the case's keys."""
    inputs = local_trial(SPOT if case.model == DEFAULT else PORTFOLIO, training, rollout_fragment_length="auto",
                         activation="relu")
    inputs.sections["rl_module"].update(case.rl_module)
    return inputs


def rl_module(case: Case) -> dict[str, Any]:
    """The rl_module section the case's module is built from (fcnet_hiddens, fcnet_activation, head_fcnet_hiddens,
    ...): what a replica of it is sized by."""
    return dict(_trial(case, {}).sections["rl_module"])


def randomize(net: Any, seed: int) -> None:
    """Every parameter redrawn: N(0, 1/fan_in) for a matrix, N(0, 1) for a vector (biases, LayerNorm scales, cash's
    pair), so every output is of order 1 and every layer, bias and target copy counts in a comparison."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in net.parameters():
            scale = param.shape[-1] ** -0.5 if param.dim() > 1 else 1.0
            param.copy_(torch.randn(param.shape, generator=generator) * scale)


def observations(case: Case, rows: int, seed: int = 0, assets: int = ASSETS) -> np.ndarray:
    """Random float32 inputs of the case's observation space: standard normals x 2; a portfolio's rows end with
    weights that sum to at most 1 and a tradable flag (about 1 in 5 assets untradable, its features 0)."""
    rng = np.random.default_rng(seed)
    if case.model == DEFAULT:
        return (rng.standard_normal((rows, OBSERVATION_SIZE)) * 2).astype(np.float32)
    obs = (rng.standard_normal((rows, assets, ROW)) * 2).astype(np.float32)
    obs[..., WEIGHT_COLUMN] = rng.dirichlet(np.ones(assets + 1), rows)[:, 1:]
    obs[..., TRADABLE_COLUMN] = rng.random((rows, assets)) > 0.2
    obs[obs[..., TRADABLE_COLUMN] == 0.0, :WEIGHT_COLUMN] = 0.0
    return obs
