"""How a paper-trading session asks its model for a decision: the registered model loaded in this process, or the
same model served over HTTP (`api.serve`). Both take the request the family's market builds (the last bars, the held
position) and answer the served model's table, so a session decides alike either way; what does not fit the model
is refused in one line (InputError), never a traceback.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from envs.errors import InputError
from experiments.api.serving import invocation_body

Ask = Callable[[pd.DataFrame], pd.DataFrame]


def local_asker(model: Any, model_uri: str, label: str) -> Ask:
    """Ask the loaded pyfunc `model`; its one line on what does not fit it names the model and the bars (`label`)."""
    from mlflow.exceptions import MlflowException

    def ask(request: pd.DataFrame) -> pd.DataFrame:
        try:
            return model.predict(request)
        except MlflowException as error:
            raise InputError(f"{model_uri} on {label}: {error.message}") from None
    return ask


def http_asker(url: str, model_uri: str) -> Ask:
    """POST each request to the served model at `url` (its /invocations endpoint, added when left out)."""
    import requests

    endpoint = url.rstrip("/") + ("" if url.rstrip("/").endswith("/invocations") else "/invocations")

    def ask(request: pd.DataFrame) -> pd.DataFrame:
        try:
            response = requests.post(endpoint, json=invocation_body(request), timeout=30)
        except requests.RequestException as error:
            raise InputError(f"--serve-url {url}: no answer ({type(error).__name__}): start the model's server with "
                             f"python -m experiments.serve {model_uri}, or leave --serve-url out") from None
        if response.status_code != 200:
            raise InputError(f"{endpoint}: {response.status_code}: "
                             f"{response.json().get('message', response.text).splitlines()[-1]}")
        return pd.DataFrame(response.json()["predictions"])
    return ask
