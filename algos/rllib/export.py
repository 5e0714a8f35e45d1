"""RLlib's default RLModules (an MLP encoder and MLP heads) as the nets the numpy policy runs: the export half of
`RLlibLearner.export_nets`. Ray and torch are imported inside: exporting needs them, serving does not."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from algos.export.mlp_numpy import CLIP_LOG_STD
from algos.export.numpy_policy import BOUNDS
from algos.export.torch_layers import export_layers, not_exportable


def action_structure(space: Any, box: bool, arrays: dict[str, np.ndarray]) -> dict[str, int]:
    """The action keys of a default module's structure: a 1-d Box's size, its bounds added to `arrays` (BOUNDS), when
    the module acts in a Box (RLlib's Gaussians spread their mean over a flat vector); else a discrete space's action
    count, the width of the head whose argmax is the action."""
    if box:
        if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
            raise not_exportable(f"action space {space} (this policy acts in a 1-d Box)")
        for key, bound in zip(BOUNDS, (space.low, space.high), strict=True):
            arrays[key] = np.asarray(bound, dtype=np.float32).copy()
        return {"action_size": int(space.shape[0])}
    if not isinstance(space, gym.spaces.Discrete):
        raise not_exportable(f"action space {space} (only discrete actions have an argmax here)")
    return {"num_actions": int(space.n)}


def export_mlp(encoder: Any, heads: dict[str, Any], actions: dict[str, int],
               arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """An MLP encoder and its MLP heads (as the module's forward_inference runs them) added to `arrays`; the
    structure that runs them, with the module's `actions` keys."""
    nets = {"encoder": _export_encoder(encoder, arrays)}
    nets.update({name: _export_head(name, head, arrays) for name, head in heads.items()})
    return {"observation_size": _first_linear_in(nets["encoder"], arrays), **actions, "nets": nets}


def _export_encoder(encoder: Any, arrays: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """The layers of an MLP encoder; any other encoder (CNN, LSTM, GRU, multi-stream) is refused by name."""
    from ray.rllib.core.models.torch.encoder import TorchMLPEncoder

    if type(encoder) is not TorchMLPEncoder:
        raise not_exportable(f"encoder {type(encoder).__name__}")
    return export_layers("encoder", encoder.net.mlp, arrays)


def _export_head(name: str, head: Any, arrays: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """The layers of an MLP head, and a Gaussian head's clip of its log-stds (the second half of its outputs) as the
    op `clip_log_std`; a free-log-std head is refused."""
    from ray.rllib.core.models.torch.heads import TorchMLPHead

    if type(head) is not TorchMLPHead:
        raise not_exportable(f"{name} head {type(head).__name__}")
    ops = export_layers(name, head.net.mlp, arrays)
    if head.clip_log_std:
        ops.append({"op": CLIP_LOG_STD, "bound": float(head.log_std_clip_param_const.item())})
    return ops


def _first_linear_in(ops: list[dict[str, Any]], arrays: Mapping[str, np.ndarray]) -> int:
    """The observation size: the input width of the encoder's first Linear."""
    for op in ops:
        if op["op"] == "linear":
            return int(arrays[op["weight"]].shape[1])
    raise not_exportable("an encoder without a Linear layer")
