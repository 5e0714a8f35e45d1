"""The MLflow pyfunc model of a registered policy (logged as code, not as a pickled object).

MLflow copies this file, the `envs` and `algos` packages (its code paths) and two artifacts into the model: the
policy's numpy forward pass (`algos.export.numpy_policy`; an ensemble's, `algos.export.ensemble_policy`, is one
file too) and, for families that have one, the reader of its raw inputs (`envs.abilities.ServesRawInputs`; for trading,
`envs.trading.bar_reader.BarReader`: features, window and the fold's train-row normalization). So serving needs
neither torch nor Ray, and `predict` takes either

- raw inputs, e.g. a DataFrame of the last N OHLCV bars (N is in the model's description), and returns the
  decision: action, target position, the bar it was decided on and the open it fills at; or
- observations, one or a batch (a numpy array, a list or a DataFrame with one row per observation, any real
  dtype that converts to float32), and returns greedy actions (int64 indices for a discrete action space, float32
  vectors for a Box, e.g. a target exposure): for advanced use.

Anything else is refused with one line as an MlflowException, so `mlflow models serve` answers 400 with a message
that ends with that line (the registry logs no input schema, so MLflow's enforcement, which dumps the whole input,
does not run).
"""
from __future__ import annotations

import mlflow
import numpy as np
import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE
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
    """A trained policy as an MLflow model: raw inputs -> a decision, or observations -> greedy actions."""

    def load_context(self, context) -> None:
        from algos.export.ensemble_policy import load_policy

        self._policy = load_policy(context.artifacts["policy"])
        self._observation_shape = tuple(context.model_config["observation_shape"])
        reader = reader_class(context.model_config)
        self._inputs = reader.load(context.artifacts["inputs"]) if reader is not None else None

    @property
    def policy(self):
        """The numpy forward pass (algos.export.numpy_policy.NumpyPolicy, or an ensemble of them:
        algos.export.ensemble_policy.EnsemblePolicy): observations -> greedy actions."""
        return self._policy

    @property
    def inputs(self):
        """The reader of the family's raw inputs (envs.abilities.ServesRawInputs), or None: observations only."""
        return self._inputs

    # Annotated with np.ndarray: MLflow then neither derives a schema from the hint nor warns that
    # there is none; the input is checked here instead.
    def predict(self, context, model_input: np.ndarray, params=None) -> np.ndarray | pd.DataFrame:
        from envs.errors import InputError

        try:
            if self._inputs is not None and self._inputs.accepts(model_input):
                return self._inputs.decide(model_input, self._policy)
            return self._policy(as_observation_batch(model_input, self._observation_shape))
        except (InputError, ValueError) as error:
            raise MlflowException(str(error), error_code=INVALID_PARAMETER_VALUE) from None


mlflow.models.set_model(GreedyPolicyModel())


def reader_class(model_config: dict) -> type | None:
    """The class that reads a registered model's raw inputs, or None: observations only. A model names its env
    (`env`), whose family serves raw inputs (envs.abilities.ServesRawInputs). A model registered before families were
    objects names the reader's class path instead (`input_reader`): it is matched against the families' readers, so
    those models keep serving, and no path is imported."""
    import envs
    from envs.abilities import ServesRawInputs

    if env_id := model_config.get("env"):
        return envs.family(env_id).reader_class()
    if legacy := model_config.get("input_reader"):
        readers = [family.reader_class() for family in envs.FAMILIES if isinstance(family, ServesRawInputs)]
        found = next((cls for cls in readers if f"{cls.__module__}:{cls.__qualname__}" == legacy), None)
        if found is None:
            from envs.errors import InputError

            raise InputError(f"the model's input reader {legacy!r} is no family's reader: register the model again "
                             "with this version of the platform")
        return found
    return None
