"""Storage URIs: which setting wins, endpoints made explicit, credentials kept out; local files written whole."""
from __future__ import annotations

from pathlib import Path

import pytest

from envs.errors import InputError
from experiments.storage.filesystem import (
    explicit_endpoints,
    keep_credentials_out_of_ray,
    parse_s3,
    resolve_storage,
)


def test_precedence_cli_then_file_then_environment_then_output(tmp_path):
    env = {"RLPLATFORM_STORAGE": "s3://from-env/p"}
    assert resolve_storage("s3://cli/p", "s3://file/p", tmp_path, "f.yaml", env).source == "--storage"
    assert resolve_storage(None, "s3://file/p", tmp_path, "f.yaml", env).uri == "s3://file/p"
    assert resolve_storage(None, None, tmp_path, "f.yaml", env).source == "RLPLATFORM_STORAGE"
    local = resolve_storage(None, None, tmp_path / "runs", "f.yaml", {})
    assert local.is_local and local.uri == str((tmp_path / "runs").resolve()) and local.source == "--output"


def test_the_environment_endpoint_is_written_into_the_uri():
    env = {"AWS_ENDPOINT_URL": "http://generic:1", "AWS_ENDPOINT_URL_S3": "http://s3-only:2"}
    assert parse_s3("s3://b/p/", "x", env).uri == "s3://b/p?endpoint_override=http://s3-only:2"
    assert parse_s3("s3://b/p?endpoint_override=http://mine:3", "x", env).uri == "s3://b/p?endpoint_override=http://mine:3"
    assert parse_s3("s3://b/p", "x", {}).uri == "s3://b/p"
    env_config = {"data_path": "s3://b/raw/BTC-USD_1h.parquet", "symbol": "BTC-USD", "data_dir": "/local"}
    explicit_endpoints(env_config, "f.yaml: environment.env_config", {"AWS_ENDPOINT_URL_S3": "http://s3-only:2"})
    assert env_config == {"data_path": "s3://b/raw/BTC-USD_1h.parquet?endpoint_override=http://s3-only:2",
                          "symbol": "BTC-USD", "data_dir": "/local"}


@pytest.mark.parametrize("uri, words", [
    ("s3://AKIAX:topsecret@bucket/p", "credentials do not belong"),
    ("s3://bucket/p?secret_key=topsecret", "credentials do not belong"),
    ("s3://bucket/p?region=eu-west-1&colour=red", "unknown option 'colour'"),
    ("s3:///p", "names no bucket"),
    ("gs://bucket/p", "gs:// storage is not supported"),
])
def test_bad_uris_are_one_line_without_the_secret(tmp_path, uri, words):
    with pytest.raises(InputError) as error:
        resolve_storage(uri, None, tmp_path, "f.yaml", {})
    assert words in str(error.value) and "topsecret" not in str(error.value)


def test_local_files_are_replaced_whole_and_missing_ones_read_as_none(tmp_path):
    storage = resolve_storage(None, None, tmp_path, "f.yaml", {})
    path = storage.path("exp", "latest_sweep.json")
    assert storage.read_text(path) is None
    storage.write_text(path, "one")
    storage.write_text(path, "two")
    assert storage.read_text(path) == "two"
    assert [p.name for p in Path(tmp_path, "exp").iterdir()] == ["latest_sweep.json"]  # no temp file left
    assert storage.local_copy(path, tmp_path / "cache") == Path(path)  # a local storage is read in place


def test_credentials_are_not_copied_into_trials_runtime_environments():
    """Tune would copy them into every trial's runtime env, which Ray logs in plain text."""
    from ray.tune.execution import class_cache

    said: list[str] = []
    keep_credentials_out_of_ray({"AWS_PROFILE": "team"}, joins_cluster=True, say=said.append)
    assert said == [] and not {"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} & class_cache.ENV_VARS_TO_PROPAGATE
    keep_credentials_out_of_ray({"AWS_SECRET_ACCESS_KEY": "topsecret"}, joins_cluster=False, say=said.append)
    assert said == []  # a local Ray's workers inherit the driver's environment
    keep_credentials_out_of_ray({"AWS_SECRET_ACCESS_KEY": "topsecret"}, joins_cluster=True, say=said.append)
    assert len(said) == 1 and "AWS_SECRET_ACCESS_KEY" in said[0] and "topsecret" not in said[0]


def test_a_tracking_uri_with_credentials_is_refused_without_echoing_them(monkeypatch):
    from experiments.config.load import load_experiment
    from tests.conftest import REPO

    exp = load_experiment(REPO / "conf" / "dqn_btc.yaml")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://alice:topsecret@127.0.0.1:5000")
    with pytest.raises(InputError) as error:
        exp.tracking_uri()
    assert "MLFLOW_TRACKING_USERNAME" in str(error.value) and "topsecret" not in str(error.value)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    assert exp.tracking_uri() == "http://127.0.0.1:5000"
