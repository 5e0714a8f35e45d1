"""MLflow key hygiene: names MLflow accepts, only finite numbers as metrics, no secrets in params."""
from __future__ import annotations

import math

from experiments.tracking.runs import flatten, numeric_metrics, sanitize_key, without_secrets


def test_sanitize_key_removes_what_mlflow_rejects():
    assert sanitize_key("learners/default_policy/qf_loss") == "learners/default_policy/qf_loss"
    assert sanitize_key("a[0]=b,c@d") == "a_0__b_c_d"
    assert sanitize_key("env_runners//x") == "env_runners/x"


def test_numeric_metrics_flattens_and_keeps_finite_numbers():
    result = {"env_runners": {"episode_return_mean": 1.5, "hist": [1, 2], "name": "x"},
              "done": True, "nan": math.nan, "inf": math.inf, "training_iteration": 3}
    assert numeric_metrics(result) == {"env_runners/episode_return_mean": 1.5, "training_iteration": 3.0}


def test_secrets_never_reach_params():
    params = flatten({"environment": {"env_config": {"api_key": "k", "exchange_secret": "s", "symbol": "BTC-USD"}},
                      "tracking": {"password": "p"}})
    assert without_secrets(params) == {"environment.env_config.symbol": "BTC-USD"}
