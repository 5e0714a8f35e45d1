"""A trained torch net's layers as the ops the numpy forward pass runs (algos/export/mlp_numpy.py), and the one-line
refusal of what it cannot run. torch is imported inside: exporting needs it, serving does not."""
from __future__ import annotations

from typing import Any

import numpy as np

from envs.errors import InputError


def not_exportable(what: str) -> InputError:
    """The one-line refusal of a module the numpy forward pass does not cover: the caller then scores the policy with
    torch, but cannot register it."""
    return InputError(f"{what} is not supported by the numpy policy (algos/export/numpy_policy.py); "
                      "the policy can still be scored with torch (experiments.results.policy.load_module_policy)")


def export_layers(net: str, layers: Any, arrays: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """A torch Sequential (RLlib's TorchMLP, or a portfolio net's) as ops, its parameters added to `arrays` under
    "<net>.<index>.<param>"."""
    import torch

    def store(index: int, param: str, tensor: Any) -> str | None:
        if tensor is None:
            return None
        if tensor.dtype != torch.float32:
            raise not_exportable(f"{net} layer {index} {param} of dtype {tensor.dtype} (float32 only)")
        key = f"{net}.{index}.{param}"
        arrays[key] = tensor.detach().cpu().numpy().copy()
        return key

    activations = {torch.nn.ReLU: "relu", torch.nn.Tanh: "tanh", torch.nn.SiLU: "silu"}
    ops: list[dict[str, Any]] = []
    for index, layer in enumerate(layers):
        kind = type(layer)
        if kind is torch.nn.Linear:
            ops.append({"op": "linear", "weight": store(index, "weight", layer.weight),
                        "bias": store(index, "bias", layer.bias)})
        elif kind is torch.nn.LayerNorm and len(layer.normalized_shape) == 1:
            weight, bias = store(index, "weight", layer.weight), store(index, "bias", layer.bias)
            ops.append({"op": "layernorm", "eps": float(layer.eps), "weight": weight, "bias": bias})
        elif kind in activations:
            ops.append({"op": activations[kind]})
        elif kind is torch.nn.ELU:
            ops.append({"op": "elu", "alpha": float(layer.alpha)})
        else:
            raise not_exportable(f"{net} layer {index} ({kind.__name__})")
    return ops
