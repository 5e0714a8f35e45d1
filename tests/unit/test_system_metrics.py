"""A trial's system metrics (algos/rllib/system_metrics.py): MLflow's names, samples at start, interval and end, the
reason when there are no GPU metrics, and a thread that stops."""
from __future__ import annotations

import gc
import sys
import time

import pytest

from algos.rllib import system_metrics
from algos.rllib.system_metrics import NOTE_KEY, RESULT_KEY, SystemSampler, attach_samples, start_sampling

MLFLOW_NAMES = {"cpu_utilization_percentage", "system_memory_usage_megabytes", "system_memory_usage_percentage",
                "disk_usage_percentage", "disk_usage_megabytes", "disk_available_megabytes",
                "network_receive_megabytes", "network_transmit_megabytes"}


class Algorithm:
    """What the callbacks touch of an RLlib Algorithm: attributes."""


def _cpu_samples(sampler: SystemSampler) -> int:
    return len(sampler.monitors[0].metrics["cpu_utilization_percentage"])


def test_a_sample_at_start_one_per_interval_and_one_at_each_result():
    sampler = SystemSampler(interval_s=0.05)
    try:
        assert _cpu_samples(sampler) >= 1  # the trial's start
        deadline = time.monotonic() + 10
        while _cpu_samples(sampler) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _cpu_samples(sampler) >= 3  # the interval thread
        values = sampler.drain()
        assert MLFLOW_NAMES <= set(values) and 0 <= values["cpu_utilization_percentage"] <= 100
        assert 0 < values["system_memory_usage_percentage"] < 100
    finally:
        sampler.stop()
    sampler._thread.join(timeout=5)
    assert not sampler._thread.is_alive()
    assert _cpu_samples(sampler) == 0 and set(sampler.drain()) >= MLFLOW_NAMES  # drain samples the end itself


def test_each_result_carries_the_samples_and_the_note_only_once(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # nvidia-ml-py not installed
    algorithm = Algorithm()
    start_sampling(60.0, algorithm=algorithm)
    first, second = {}, {}
    attach_samples(algorithm=algorithm, result=first)
    attach_samples(algorithm=algorithm, result=second)
    assert MLFLOW_NAMES <= set(first[RESULT_KEY]) and MLFLOW_NAMES <= set(second[RESULT_KEY])
    assert "nvidia-ml-py is not installed" in first[NOTE_KEY] and NOTE_KEY not in second
    thread = algorithm._system_sampler._thread
    del algorithm
    gc.collect()
    thread.join(timeout=5)
    assert not thread.is_alive()  # the sampler stops with its algorithm


def test_without_a_driver_the_note_says_what_nvml_answered(monkeypatch):
    class FakeNvml:  # nvidia-ml-py present, no NVIDIA driver: what NVML raises on a CPU machine
        class NVMLError(Exception):
            pass

        @staticmethod
        def nvmlInit():
            raise FakeNvml.NVMLError("Driver Not Loaded")

    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml)
    from mlflow.system_metrics.metrics import gpu_monitor

    monkeypatch.setattr(gpu_monitor, "pynvml", FakeNvml, raising=False)
    monitors, note = system_metrics.gpu_monitors()
    assert monitors == [] and "Driver Not Loaded" in note


def test_an_algorithm_without_a_sampler_gets_nothing():
    result = {}
    attach_samples(algorithm=Algorithm(), result=result)
    assert result == {}


@pytest.mark.parametrize("value", ["0", "-1", "7200"])
def test_the_interval_is_checked_before_anything_runs(value, tmp_path):
    from envs.errors import InputError
    from experiments.config.load import load_experiment
    from tests.conftest import REPO

    with pytest.raises(InputError, match="tracking.system_metrics_interval_s"):
        load_experiment(REPO / "conf/dqn_btc.yaml", [f"tracking.system_metrics_interval_s={value}"])
