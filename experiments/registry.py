"""Register the best trial's policy in the MLflow Model Registry as a pyfunc model.

`mlflow.pyfunc.load_model("models:/<name>/<version>").predict(observations)` returns the
greedy actions for a batch of observations, with no Ray cluster: only the RLModule
checkpoint is packaged (with `experiments/policy_model.py` as the model's code).
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path

import mlflow
import numpy as np
from mlflow.models import infer_signature

from experiments.policy import MODULE_SUBPATH, load_module_policy

MODEL_CODE = Path(__file__).with_name("policy_model.py")


def _requirements() -> list[str]:
    import ray
    import torch

    torch_version = torch.__version__.split("+")[0]  # no local label such as +cpu: pip could not resolve it
    return [f"torch>={torch_version}", f"ray[rllib]=={ray.__version__}", "numpy", "pandas"]


def register_policy(tracking_uri: str, run_id: str, checkpoint_dir: Path, model_name: str,
                    example_observations: np.ndarray) -> str:
    """Log the policy as a model of `run_id` and register it; returns 'models:/name/version'."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    mlflow.set_tracking_uri(tracking_uri)
    module_dir = Path(checkpoint_dir) / MODULE_SUBPATH
    actions = load_module_policy(module_dir)(example_observations)
    with mlflow.start_run(run_id=run_id), warnings.catch_warnings():
        # Our signature is explicit; MLflow's advice to derive one from type hints does not apply.
        warnings.filterwarnings("ignore", message="Add type hints to the `predict` method")
        info = mlflow.pyfunc.log_model(
            name="policy",
            python_model=str(MODEL_CODE),
            artifacts={"rl_module": str(module_dir)},
            signature=infer_signature(example_observations, actions),
            input_example=example_observations[:2],
            pip_requirements=_requirements(),
            registered_model_name=model_name,
        )
    return f"models:/{model_name}/{info.registered_model_version}"
