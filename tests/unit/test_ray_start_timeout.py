"""A local Ray that does not start in time (Ray 2.60 gives its raylet 30 s; measured under load 15-30 on 2 cores)
ends the run in one line and exit 4, not in Ray's traceback (docs/faults.md).

Ray's start is replaced by one that raises Ray's own exception: making a real raylet miss its 30 s needs a machine
busier than a test may make it. That `main`'s code is the process's exit code is tests/unit/test_config.py's
(`test_a_refused_file_exits_2_from_the_command_line_with_one_line`).
"""
from __future__ import annotations

import os
from unittest import mock

from tests.conftest import REPO

RAYS_OWN = ("The current node timed out during startup. This could happen because some of the raylet failed to "
            "startup or the GCS has become overloaded.")

def test_a_local_ray_that_times_out_is_one_line_and_exit_4(tmp_path, monkeypatch, capsys):
    """`experiments.run.main`, as `python -m experiments.run` calls it, in this process; what a local start sets in
    the environment is put back afterwards."""
    import ray
    import ray._private.ray_constants as ray_constants

    from experiments.run import main

    def init(*args, **kwargs):
        raise Exception(RAYS_OWN)

    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", ray_constants.ENABLE_RAY_CLUSTER)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with mock.patch.dict(os.environ):
        code = main([str(REPO / "conf" / "dqn_btc.yaml"), "--smoke-test", "--output", str(tmp_path / "out"),
                     "--set", f"tracking.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}"])
    out, err = capsys.readouterr()
    text = out + err
    assert code == 4, text[-3000:]
    assert "Traceback" not in text
    lines = [line for line in text.splitlines() if "did not start within Ray's 30 s" in line]
    assert len(lines) == 1, text[-3000:]
    assert "load average" in lines[0] and "--address" in lines[0]
    assert "--resume" not in text  # nothing started, so nothing to resume


def test_other_start_errors_keep_their_own_exception():
    from experiments.plan.local_ray import is_startup_timeout

    assert is_startup_timeout(Exception(RAYS_OWN))
    assert not is_startup_timeout(RuntimeError("Failed to connect to GCS"))
