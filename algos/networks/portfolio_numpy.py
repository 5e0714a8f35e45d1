"""The portfolio policy net (algos/networks/portfolio_module.py, `PolicyNet`) on the numpy side: its export from torch
and its forward pass in numpy, which `NumpyPolicy` runs for an export of the layout "portfolio" (no torch, no Ray).

The export is the policy net `pi`, which the shared model runs on every asset's row as its own row here (so a model
trained on N assets runs on any N: observations (n, N, D) of any N), plus cash's learned (mean, log-std); the flat
model runs `pi` on the flattened universe (its N only). Its outputs are the Gaussian's inputs (n, 2(N+1)), an
untradable asset's set as the module sets them; the greedy actions are the scores (n, N+1), cash first, that the env
maps to weights: the mean in [-1, 1] (PPO), tanh of the mean (SAC). They equal the torch module's within float32
rounding (torch multiplies the rows in one batched product; tests/unit/test_portfolio_module.py: 1e-6).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from algos.export.torch_layers import export_layers
from algos.networks.portfolio_model import TRADABLE_ABOVE, TRADABLE_COLUMN, UNTRADABLE_LOG_STD, UNTRADABLE_MEAN
from envs.errors import InputError

PORTFOLIO = "portfolio"  # the export's layout
PORTFOLIO_NETS = ("pi",)
CASH_KEY = "cash"  # the array of cash's (mean, log-std), shared model only
# A portfolio's scores are in [-1, 1] whatever N (portfolio_module.universe_of refuses other bounds): the Box its
# greedy rule puts them in, its bounds broadcast over the N+1 scores.
SCORES = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)


def export_portfolio(pi: Any, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """A portfolio module's policy net (`PolicyNet`): its layers, and cash's (mean, log-std) when shared, added to
    `arrays`; the structure that runs it (the flat net's N, the shared one's on any N)."""
    structure = {"layout": PORTFOLIO, "shared": bool(pi.shared), "row_size": int(pi.universe.row_size),
                 "nets": {"pi": export_layers("pi", pi.net, arrays)}}
    if pi.shared:
        arrays[CASH_KEY] = pi.cash.detach().cpu().numpy().copy()
    else:
        structure["num_assets"] = int(pi.universe.num_assets)
    return structure


def portfolio_sizes(structure: dict[str, Any]) -> tuple[str, ...]:
    """The size keys a portfolio structure must hold as positive integers: its row width, and N when flat (a shared
    net runs on any N); InputError when `shared` is not a boolean."""
    if not isinstance(structure.get("shared"), bool):
        raise InputError(f"numpy policy shared {structure.get('shared')!r} is not true or false")
    return ("row_size",) if structure["shared"] else ("row_size", "num_assets")


def portfolio_outputs(rows: Callable[[np.ndarray], np.ndarray], observations: np.ndarray, row_size: int,
                      num_assets: int | None, cash: np.ndarray | None) -> np.ndarray:
    """`PolicyNet.forward` on (n, N, row_size) observations, with `rows` running `pi` on a (rows, width) batch: every
    asset's row through the one net with cash's (mean, log-std) in front (shared), or the flattened universe through
    it (flat, `num_assets` fixed); an untradable asset's mean and log-std as the module sets them."""
    batch = np.asarray(observations, dtype=np.float32)
    assets = "N" if num_assets is None else num_assets
    if batch.ndim != 3 or batch.shape[1] < 1 or batch.shape[2] != row_size or (
            num_assets is not None and batch.shape[1] != num_assets):
        raise ValueError(f"observations must have shape (n, {assets}, {row_size}); got {batch.shape}")
    n, count = batch.shape[:2]
    if cash is not None:  # every asset's row through the one net, as a row of its own
        heads = rows(batch.reshape(n * count, row_size)).reshape(n, count, 2)
        cash_pair = np.broadcast_to(cash, (n, 2))
        means = np.concatenate([cash_pair[:, :1], heads[..., 0]], axis=1)
        log_stds = np.concatenate([cash_pair[:, 1:], heads[..., 1]], axis=1)
    else:
        means, log_stds = np.split(rows(batch.reshape(n, count * row_size)), 2, axis=1)
    scored = np.concatenate([np.ones((n, 1), bool), batch[..., TRADABLE_COLUMN] > TRADABLE_ABOVE], axis=1)
    means = np.where(scored, means, np.float32(UNTRADABLE_MEAN))
    log_stds = np.where(scored, log_stds, np.float32(UNTRADABLE_LOG_STD))
    return np.concatenate([means, log_stds], axis=1)
