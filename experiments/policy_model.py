"""The MLflow pyfunc model of a registered policy (logged as code, not as a pickled object).

MLflow copies this file next to the RLModule checkpoint; `mlflow.pyfunc.load_model(uri)
.predict(observations)` returns greedy actions for a batch of observations.
"""
from __future__ import annotations

import mlflow
import numpy as np
import pandas as pd
from mlflow.pyfunc import PythonModel


class GreedyPolicyModel(PythonModel):
    """An RLlib RLModule as an MLflow model: observations (n, obs_dim) -> actions (n,)."""

    def load_context(self, context):
        import torch
        from ray.rllib.core.rl_module.rl_module import RLModule

        self._torch = torch
        self._module = RLModule.from_checkpoint(context.artifacts["rl_module"])
        self._module.eval()

    # No type hints on predict: MLflow would try to derive a signature from them; ours is logged explicitly.
    def predict(self, context, model_input, params=None):
        observations = model_input.to_numpy() if isinstance(model_input, pd.DataFrame) else np.asarray(model_input)
        with self._torch.no_grad():
            out = self._module.forward_inference({"obs": self._torch.as_tensor(observations, dtype=self._torch.float32)})
        return out["actions"].cpu().numpy().astype(np.int64)


mlflow.models.set_model(GreedyPolicyModel())
