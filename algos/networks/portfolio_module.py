"""RLModules for a universe of assets whose weights are shared across the assets (Jiang, Xu & Liang 2017, EIIE).

The env observes one row per asset, (N, D): the asset's window of features, then its current weight, then whether it
can trade at the next fill (an untradable asset's features are 0). The action is N+1 scores in [-1, 1], cash first,
that the env maps to weights. `training.model` (algos/networks/portfolio_model.py) picks:

- `shared_assets`: one MLP reads each asset's row and gives that asset's Gaussian mean and log-std; cash's come from
  two learned parameters. The parameters do not depend on N, so a model trained on 3 assets scores 500: the numpy
  export (algos/networks/portfolio_numpy.py) runs the same per-row net over any N. PPO's value is a per-asset net
  mean-pooled over the tradable assets, plus a learned multiple of the cash weight (what the rows cannot see alone);
  SAC's Q is a per-asset net over (row, the asset's score, cash's score), mean-pooled the same way.
- `flat`: one MLP over the whole flattened universe (N fixed), for comparison.

An untradable asset gets mean 0 and log-std 0 whatever the nets say: the env ignores its score, so its dimension is
the same under the old and the new policy (PPO's ratio and KL are untouched by it) and takes no gradient. The
action_dist_inputs are RLlib's diagonal Gaussian layout, [means (N+1), log-stds (N+1)]: PPO's TorchDiagGaussian (the
greedy score is the mean, clipped to the Box), SAC's squashed Gaussian (the greedy score is tanh of the mean,
algos/sac/catalog.py). Imported by the learners' methods only (it imports Ray and torch): a learner's
`portfolio_module()` returns the class it trains, which is the class its numpy export matches.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.algorithms.sac.torch.default_sac_torch_rl_module import DefaultSACTorchRLModule
from ray.rllib.core.columns import Columns
from ray.rllib.core.distribution.torch.torch_distribution import TorchDiagGaussian
from ray.rllib.core.models.base import ENCODER_OUT
from ray.rllib.core.rl_module.apis import InferenceOnlyAPI, ValueFunctionAPI
from ray.rllib.core.rl_module.torch import TorchRLModule
from torch import nn

from algos.networks.portfolio_model import (
    DEFAULT_HIDDENS,
    HIDDENS_KEY,
    MODEL_KEY,
    TRADABLE_ABOVE,
    TRADABLE_COLUMN,
    UNTRADABLE_LOG_STD,
    UNTRADABLE_MEAN,
    WEIGHT_COLUMN,
)
from algos.sac.catalog import TanhMeanSquashedGaussian
from envs.errors import InputError

# RLlib's fcnet_activation names (rl_module.fcnet_activation) as torch layers; "linear": none.
ACTIVATIONS: dict[str, type[nn.Module] | None] = {"relu": nn.ReLU, "tanh": nn.Tanh, "swish": nn.SiLU, "linear": None}
# The policy's last layer starts this small: means near 0 (equal scores, equal weights) and log-stds near 0.
POLICY_OUTPUT_GAIN = 0.01


@dataclasses.dataclass(frozen=True)
class Universe:
    """The shape a portfolio module was built for: N assets, rows of D columns (window x features, weight,
    tradable). A shared_assets module runs on any N; only its flat sibling is tied to this one."""

    num_assets: int
    row_size: int


def universe_of(observation_space: gym.Space, action_space: gym.Space, shared: bool) -> Universe:
    """The universe of a portfolio env's spaces, or InputError in one line when they are not a portfolio's."""
    model = "shared_assets" if shared else "flat"
    shape = getattr(observation_space, "shape", None)
    if not isinstance(observation_space, gym.spaces.Box) or shape is None or len(shape) != 2 or shape[1] < 3:
        raise InputError(f"training.model: {model} needs a Box observation of one row per asset (N, D >= 3: "
                         f"features, weight, tradable); got {observation_space}: use training.model: default")
    num_assets, row_size = shape
    scores = (num_assets + 1,)
    if not (isinstance(action_space, gym.spaces.Box) and action_space.shape == scores
            and np.all(action_space.low == -1.0) and np.all(action_space.high == 1.0)):
        raise InputError(f"training.model: {model} needs a Box(-1, 1, {scores}) action of scores, cash first; got "
                         f"{action_space}: use training.model: default")
    return Universe(num_assets, row_size)


def _settings(model_config: Any) -> tuple[bool, list[int], str]:
    """(shared, hidden sizes, activation) from RLlib's model_config (a dict, RLlib's dataclass, or None: the shared
    model with DEFAULT_HIDDENS and relu)."""
    if model_config is None:
        config: dict[str, Any] = {}
    else:
        config = model_config if isinstance(model_config, dict) else dataclasses.asdict(model_config)
    model, activation = config.get(MODEL_KEY, "shared_assets"), config.get("fcnet_activation", "relu")
    if model not in ("shared_assets", "flat"):
        raise InputError(f"training.model: {model!r} is not a portfolio model (shared_assets or flat)")
    if activation not in ACTIVATIONS:
        raise InputError(f"rl_module.fcnet_activation: {activation!r} is not one of {', '.join(ACTIVATIONS)}")
    return model == "shared_assets", list(config.get(HIDDENS_KEY) or DEFAULT_HIDDENS), activation


def mlp(inputs: int, hiddens: list[int], outputs: int, activation: str, output_gain: float = 1.0) -> nn.Sequential:
    """Linear layers with `activation` between them (none after the last), whose last layer is scaled by
    `output_gain`: the layers the numpy export reads back (algos.export.torch_layers.export_layers)."""
    layers: list[nn.Module] = []
    width = inputs
    for size in hiddens:
        layers.append(nn.Linear(width, size))
        act = ACTIVATIONS[activation]
        if act is not None:
            layers.append(act())
        width = size
    last = nn.Linear(width, outputs)
    with torch.no_grad():
        last.weight.mul_(output_gain)
        last.bias.mul_(output_gain)
    layers.append(last)
    return nn.Sequential(*layers)


def tradable_of(obs: torch.Tensor) -> torch.Tensor:
    """(B, N) bool: which assets can trade at the next fill (the rows' flag column)."""
    return obs[..., TRADABLE_COLUMN] > TRADABLE_ABOVE


def masked_mean(values: torch.Tensor, tradable: torch.Tensor) -> torch.Tensor:
    """(B,) the mean of (B, N) `values` over each row's tradable assets; over all assets where none can trade, so a
    value is still defined (and still learns) on such a step."""
    weights = tradable.to(values.dtype)
    weights = torch.where(weights.sum(-1, keepdim=True) > 0, weights, torch.ones_like(weights))
    return (values * weights).sum(-1) / weights.sum(-1)


class PolicyNet(nn.Module):
    """obs (B, N, D) -> action_dist_inputs (B, 2(N+1)): the means (cash first), then the log-stds."""

    def __init__(self, universe: Universe, hiddens: list[int], activation: str, shared: bool) -> None:
        super().__init__()
        self.universe, self.shared = universe, shared
        if shared:  # one net for every asset: (mean, log-std) per row; cash's pair is a learned bias
            self.net = mlp(universe.row_size, hiddens, 2, activation, POLICY_OUTPUT_GAIN)
            self.cash = nn.Parameter(torch.zeros(2))
        else:
            scores = universe.num_assets + 1
            self.net = mlp(universe.num_assets * universe.row_size, hiddens, 2 * scores, activation,
                           POLICY_OUTPUT_GAIN)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        tradable = tradable_of(obs)
        if self.shared:
            per_asset = self.net(obs)  # (B, N, 2)
            cash = self.cash.expand(obs.shape[0], 2)
            means = torch.cat([cash[:, :1], per_asset[..., 0]], dim=-1)
            log_stds = torch.cat([cash[:, 1:], per_asset[..., 1]], dim=-1)
        else:
            means, log_stds = self.net(obs.flatten(1)).chunk(2, dim=-1)
        scored = torch.cat([torch.ones_like(tradable[:, :1]), tradable], dim=-1)  # cash always
        means = torch.where(scored, means, torch.full_like(means, UNTRADABLE_MEAN))
        log_stds = torch.where(scored, log_stds, torch.full_like(log_stds, UNTRADABLE_LOG_STD))
        return torch.cat([means, log_stds], dim=-1)


class ValueNet(nn.Module):
    """obs (B, N, D) -> (B,) PPO's state value."""

    def __init__(self, universe: Universe, hiddens: list[int], activation: str, shared: bool) -> None:
        super().__init__()
        self.shared = shared
        if shared:
            self.net = mlp(universe.row_size, hiddens, 1, activation)
            # No row holds the cash weight (1 - the assets' weights), and a mean over rows sees their sum only / N.
            self.cash_weight = nn.Parameter(torch.zeros(()))
        else:
            self.net = mlp(universe.num_assets * universe.row_size, hiddens, 1, activation)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        if not self.shared:
            return self.net(obs.flatten(1)).squeeze(-1)
        per_asset = self.net(obs).squeeze(-1)  # (B, N)
        cash = 1.0 - obs[..., WEIGHT_COLUMN].sum(-1)
        return masked_mean(per_asset, tradable_of(obs)) + self.cash_weight * cash


class QNet(nn.Module):
    """(obs (B, N, D), scores (B, N+1)) -> (B,) SAC's Q. Shared: each asset's net also reads cash's score, since an
    asset's weight under the env's softmax depends on its score relative to cash's."""

    def __init__(self, universe: Universe, hiddens: list[int], activation: str, shared: bool) -> None:
        super().__init__()
        self.shared = shared
        if shared:
            self.net = mlp(universe.row_size + 2, hiddens, 1, activation)
        else:
            inputs = universe.num_assets * universe.row_size + universe.num_assets + 1
            self.net = mlp(inputs, hiddens, 1, activation)

    def forward(self, obs: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if not self.shared:
            return self.net(torch.cat([obs.flatten(1), scores], dim=-1)).squeeze(-1)
        assets = obs.shape[1]
        cash = scores[:, :1].expand(-1, assets)
        rows = torch.cat([obs, scores[:, 1:, None], cash[..., None]], dim=-1)
        return masked_mean(self.net(rows).squeeze(-1), tradable_of(obs))


class PortfolioPPOModule(TorchRLModule, ValueFunctionAPI, InferenceOnlyAPI):
    """PPO's module for a universe of assets: `pi` gives the diagonal Gaussian's inputs, `vf` the value."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # No catalog: RLlib's cannot build an encoder for a 2-d observation (it would log a warning per build).
        kwargs.pop("catalog_class", None)
        super().__init__(*args, **kwargs)

    def setup(self) -> None:
        shared, hiddens, activation = _settings(self.model_config)
        universe = universe_of(self.observation_space, self.action_space, shared)
        self.action_dist_cls = TorchDiagGaussian
        self.pi = PolicyNet(universe, hiddens, activation, shared)
        self.vf = ValueNet(universe, hiddens, activation, shared)

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {Columns.ACTION_DIST_INPUTS: self.pi(batch[Columns.OBS])}

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        return self.vf(batch[Columns.OBS])

    def get_non_inference_attributes(self) -> list[str]:
        return ["vf"]


class _ObsEncoder(nn.Module):
    """SAC's policy 'encoder': hands the observation to `pi` unchanged, so RLlib's SAC forward passes run as they
    are, with the whole policy in `pi` (the net the numpy export reads, as PPO's)."""

    def forward(self, batch: dict[str, Any]) -> dict[str, Any]:
        return {ENCODER_OUT: batch[Columns.OBS]}


class _QEncoder(nn.Module):
    """SAC's Q 'encoder': the whole QNet, its (B, 1) output then passed through an identity head (RLlib's SAC squeezes
    the last axis)."""

    def __init__(self, net: QNet) -> None:
        super().__init__()
        self.net = net

    def forward(self, batch: dict[str, Any]) -> dict[str, Any]:
        return {ENCODER_OUT: self.net(batch[Columns.OBS], batch[Columns.ACTIONS]).unsqueeze(-1)}


class PortfolioSACModule(DefaultSACTorchRLModule):
    """SAC's module for a universe of assets: RLlib's SAC module (its forward passes, target nets and the attribute
    names its learner's optimizers read) with the portfolio nets inside."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # No catalog (see PortfolioPPOModule): past DefaultSACTorchRLModule's ctor, which would supply SAC's.
        kwargs.pop("catalog_class", None)
        TorchRLModule.__init__(self, *args, **kwargs)

    def setup(self) -> None:
        shared, hiddens, activation = _settings(self.model_config)
        universe = universe_of(self.observation_space, self.action_space, shared)
        self.twin_q = self.model_config["twin_q"]
        self.action_dist_cls = TanhMeanSquashedGaussian
        self.pi_encoder = _ObsEncoder()
        self.pi = PolicyNet(universe, hiddens, activation, shared)
        if not self.inference_only:
            self.qf_encoder, self.qf = _QEncoder(QNet(universe, hiddens, activation, shared)), nn.Identity()
            if self.twin_q:
                self.qf_twin_encoder = _QEncoder(QNet(universe, hiddens, activation, shared))
                self.qf_twin = nn.Identity()


def with_portfolio_module(config: Any, module_class: type | None, model_config: dict[str, Any] | None,
                          rl_module: dict[str, Any]) -> Any:
    """`config` (an RLlib learner's built config) with the portfolio module that `model_config` picks
    (algos.networks.portfolio_model.pop_model_config), or unchanged for RLlib's default module (None).
    `module_class`: the learner's `portfolio_module()`, the class its numpy export matches, so what is trained is what
    is exported and served. `rl_module`: the experiment's rl_module section, kept in the module's model_config (its
    activation is the portfolio nets')."""
    if model_config is None:
        return config
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    if module_class is None:
        raise InputError(f"training.model: {model_config[MODEL_KEY]} needs a portfolio module, and this algorithm "
                         "has none (its learner's portfolio_module): use training.model: default")
    return config.rl_module(rl_module_spec=RLModuleSpec(module_class=module_class),
                            model_config={**rl_module, **model_config})
