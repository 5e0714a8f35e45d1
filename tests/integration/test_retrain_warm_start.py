"""An incremental retrain's trials start from the champion's learner state, read from a local folder or from S3
(moto's server, loopback), as every node of a cluster reads it: the learner's module (target network included) and
the env runner's copy are the champion's, bit for bit, before the first update."""
from __future__ import annotations

import pickle

import pyarrow.fs as pafs
import pytest
import torch

from tests.conftest import REPO
from tests.servers import TEST_CREDENTIALS, s3_server


@pytest.fixture
def s3(monkeypatch):
    for name, value in TEST_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    with s3_server() as server:
        server.create_bucket("team")
        yield server


def test_trials_start_from_the_champions_weights_from_a_folder_or_s3(operations_loop, s3, ray_session):
    from experiments.api.options import RunOptions
    from experiments.api.preflight import preflight
    from experiments.sweep.rllib_config import build_config

    checkpoint = operations_loop.root / "runs" / "dqn_btc" / "retrain" / "champion-v1" / "best_checkpoint"
    assert checkpoint.exists()  # the incremental retrain of the loop downloaded it there
    bucket = pafs.S3FileSystem(endpoint_override=s3.endpoint, access_key=TEST_CREDENTIALS["AWS_ACCESS_KEY_ID"],
                               secret_key=TEST_CREDENTIALS["AWS_SECRET_ACCESS_KEY"], region="us-east-1")
    pafs.copy_files(str(checkpoint), "team/runs/dqn_btc/retrain/champion-v1", destination_filesystem=bucket)
    # The learner's saved module state, target network included (RLlib's own checkpoint file)
    module_state = checkpoint / "learner_group" / "learner" / "rl_module" / "default_policy" / "module_state.pkl"
    with open(module_state, "rb") as f:
        expected = {key: torch.as_tensor(value) for key, value in pickle.load(f).items()}
    assert any(key.startswith("_target_") for key in expected)
    for source in (str(checkpoint), f"s3://team/runs/dqn_btc/retrain/champion-v1?endpoint_override={s3.endpoint}"):
        checked = preflight(REPO / "conf" / "dqn_btc.yaml", [
            f"environment.env_config.data_path={operations_loop.data}", f"warm_start={source}",
            "tune.checkpoint.select.after_exploration=false"],
            RunOptions(smoke_test=True, output=operations_loop.root / "warm"))
        algorithm = build_config(checked.exp, checked.plan, seed=7).build_algo()  # another seed than the champion's
        try:
            learner = algorithm.learner_group._learner.module["default_policy"].state_dict()
            runner = algorithm.env_runner.module.state_dict()
            assert set(learner) == set(expected) and all(torch.equal(learner[k], expected[k]) for k in expected)
            assert all(torch.equal(runner[k], expected[k]) for k in runner)
        finally:
            algorithm.stop()
