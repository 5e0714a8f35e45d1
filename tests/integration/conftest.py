"""Fixtures shared by the integration tests."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def ray_session():
    """A small local Ray for one test module (2 CPUs, no dashboard), with one torch thread in the driver."""
    import ray
    import torch

    torch.set_num_threads(1)
    ray.shutdown()  # another test module may have left a session behind
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    yield
    ray.shutdown()
