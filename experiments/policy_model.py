"""The MLflow pyfunc model of a registered policy (logged as code, not as a pickled object).

MLflow copies this file next to the RLModule checkpoint; `mlflow.pyfunc.load_model(uri)
.predict(observations)` returns greedy actions. It takes one observation or a batch, as a numpy array,
a list or a DataFrame (one row per observation), in any real dtype that converts to float32 without
overflow; anything else gets a short error naming the expected and the given shape or dtype (the
registry logs no input schema, so MLflow's enforcement, which dumps the whole array, does not run).
"""
from __future__ import annotations

import mlflow
import numpy as np
import pandas as pd
from mlflow.pyfunc import PythonModel


def as_observation_batch(model_input: object, observation_shape: tuple[int, ...]) -> np.ndarray:
    """`model_input` as a float32 batch of shape (n, *observation_shape); ValueError in one short line."""
    values = model_input.to_numpy() if isinstance(model_input, (pd.DataFrame, pd.Series)) else model_input
    try:
        batch = np.asarray(values)
    except ValueError:  # ragged nested lists
        raise ValueError(f"observations must be an array of shape {observation_shape} or "
                         f"(n, {', '.join(map(str, observation_shape))}); got rows of different lengths") from None
    if batch.dtype.kind not in "biuf":
        raise ValueError(f"observations must be numbers (float32 or a type that converts to it); got dtype "
                         f"{batch.dtype}")
    if batch.shape == observation_shape:
        batch = batch[None]  # one observation
    if batch.ndim == 0 or batch.shape[1:] != observation_shape:
        raise ValueError(f"observations must have shape {observation_shape} (one) or "
                         f"(n, {', '.join(map(str, observation_shape))}) (a batch); got shape {batch.shape}")
    with np.errstate(over="ignore"):
        batch = batch.astype(np.float32)
    if not np.isfinite(batch).all():
        raise ValueError("observations must be finite float32 values; got NaN, inf or a value beyond "
                         "float32's range")
    return batch


class GreedyPolicyModel(PythonModel):
    """An RLlib RLModule as an MLflow model: observations -> greedy actions (int64, one per observation)."""

    def load_context(self, context) -> None:
        import torch
        from ray.rllib.core.rl_module.rl_module import RLModule

        self._torch = torch
        self._module = RLModule.from_checkpoint(context.artifacts["rl_module"])
        self._module.eval()
        self._observation_shape = tuple(context.model_config["observation_shape"])
        # The algorithm's greedy rule (algos.spec.GreedyRule) as data: this file must load without the platform.
        self._greedy_output = context.model_config.get("greedy_output", "actions")
        self._argmax = bool(context.model_config.get("greedy_argmax", False))

    # Annotated with np.ndarray: MLflow then neither derives a schema from the hint nor warns that
    # there is none; the input is checked here instead.
    def predict(self, context, model_input: np.ndarray, params=None) -> np.ndarray:
        batch = as_observation_batch(model_input, self._observation_shape)
        with self._torch.no_grad():
            out = self._module.forward_inference({"obs": self._torch.from_numpy(batch)})[self._greedy_output]
        return (out.argmax(-1) if self._argmax else out).cpu().numpy().astype(np.int64)


mlflow.models.set_model(GreedyPolicyModel())
