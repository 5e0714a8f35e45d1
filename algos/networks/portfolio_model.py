"""Which RLModule a `training` section picks (`training.model`), without importing Ray or torch.

An env over a universe of assets observes one row per asset, (N, D), and scores cash and the N assets, (N+1,). N
differs between universes, so RLlib's default module (one MLP over a flat observation, which cannot even take a
2-d Box) is not the model for it: `shared_assets` runs one small network on every asset's row, so its parameters do
not depend on N and a model trained on one universe scores another (algos/networks/portfolio_module.py); `flat` is
one MLP over the whole flattened universe, for comparison. The section keys live here, apart from the torch modules,
because reading an experiment file validates its `training` section and must stay free of Ray.
"""
from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import Field, PositiveInt, model_validator

from envs.errors import InputError
from envs.validation import StrictModel

ModelName = Literal["default", "shared_assets", "flat"]
MODELS: tuple[str, ...] = get_args(ModelName)
DEFAULT_HIDDENS = (64, 64)  # per asset: each net sees one asset's row, so small layers suffice
# A row's last two columns: the asset's current weight, then whether it can trade at the next fill (1.0 or 0.0).
WEIGHT_COLUMN = -2
TRADABLE_COLUMN = -1
TRADABLE_ABOVE = 0.5  # a flag above this is 1.0
# What an untradable asset's Gaussian is, whatever the nets say (algos/networks/portfolio_module.py says why); the
# torch module and its numpy twin (algos/networks/portfolio_numpy.py) read them here.
UNTRADABLE_MEAN = 0.0
UNTRADABLE_LOG_STD = 0.0
# The keys of RLlib's model_config that carry the choice to the module (RLlib passes model_config to its ctor).
MODEL_KEY = "portfolio_model"
HIDDENS_KEY = "portfolio_hiddens"


class ModelChoice(StrictModel):
    """The `training` keys that choose the RLModule: RLlib's default, or a portfolio model (module docstring)."""

    model: ModelName = Field(
        default="default",
        description="The RLModule: default (RLlib's, one MLP over the observation), shared_assets (one small net per "
                    "asset's row: the same model scores any number of assets) or flat (one MLP over the flattened "
                    "universe).")
    model_hiddens: list[PositiveInt] | None = Field(
        default=None, min_length=1,
        description="Hidden sizes of a portfolio model's nets (shared_assets: each per-asset net; flat: the MLP over "
                    "the universe). None: [64, 64]. The default model's sizes are rl_module.fcnet_hiddens.")

    @model_validator(mode="after")
    def _hiddens_need_a_portfolio_model(self) -> ModelChoice:
        """A size that would be silently ignored is refused: the default model takes rl_module.fcnet_hiddens."""
        if self.model == "default" and self.model_hiddens is not None:
            raise ValueError("training.model_hiddens sizes a portfolio model (training.model: shared_assets or "
                             "flat); RLlib's default model takes rl_module.fcnet_hiddens")
        return self


def pop_model_config(training: dict[str, Any]) -> dict[str, Any] | None:
    """Take the model keys out of a `training` section dict (RLlib's `.training()` has none of them): the
    model_config entries of the portfolio model it picks, or None for RLlib's default module. The model decides the
    RLModule class, which a Tune search cannot change per trial: a searched `training.model` is refused."""
    model = training.pop("model")
    hiddens = training.pop("model_hiddens")
    if model not in MODELS:
        raise InputError("tune.search_space: training.model cannot be searched (it picks the RLModule class once "
                         "per experiment): write one experiment per model")
    if model == "default":
        return None
    # A searched model_hiddens is a search sentinel here, which Tune finds in the model_config and replaces.
    return {MODEL_KEY: model, HIDDENS_KEY: list(DEFAULT_HIDDENS) if hiddens is None else hiddens}
