"""System metrics of a trial, sampled in the process that trains it.

Our MLflow runs are created by the driver, so MLflow's own monitor (which samples the host it runs on, for runs
started with `mlflow.start_run`) would measure the driver's machine, not the trial's. Instead the trial samples
itself with MLflow's metric collectors (CPU and memory, disk, network; every GPU through NVML when
`nvidia-ml-py` is installed and a driver answers): once when it starts, every `interval_s` seconds on a daemon
thread, and at the end of every training iteration. Each result carries the mean of the samples since the last
one under `system/...`, MLflow's names (`system/cpu_utilization_percentage`, `system/gpu_0_utilization_percentage`,
...), so the driver logs them into the trial's run at that iteration's step, and a one-iteration trial has a
start and an end sample. What is not recorded (no GPU metrics, and why) goes in the first result, once.

MLflow's collectors are imported when a sampler starts, in the trial's process: every RLlib config the platform
builds names this module's callbacks, and `--dry-run` builds one without sampling anything (MLflow's import is about
15% of the dry run).
"""
from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any

import psutil

if TYPE_CHECKING:
    from mlflow.system_metrics.metrics.base_metrics_monitor import BaseMetricsMonitor

RESULT_KEY = "system"  # result["system"][name]: logged as system/<name>, as MLflow's own monitor names them
NOTE_KEY = "system_metrics_note"  # result[NOTE_KEY]: what is not recorded, in the trial's first result only
# psutil measures CPU use between two calls. This one runs when a trial's process unpickles its config (which
# imports this module), so the sample taken when the algorithm is built covers the trial's setup, without waiting.
psutil.cpu_percent()


def gpu_monitors() -> tuple[list[BaseMetricsMonitor], str]:
    """MLflow's NVML monitor of every GPU on this host, or none and the reason."""
    try:
        import pynvml  # noqa: F401 - nvidia-ml-py; MLflow's GPUMonitor needs it imported first
    except ImportError:
        return [], "no GPU metrics: nvidia-ml-py is not installed (pip install -e '.[gpu]' on a machine with GPUs)"
    from mlflow.system_metrics.metrics.gpu_monitor import GPUMonitor

    try:
        return [GPUMonitor()], ""
    except (ImportError, RuntimeError) as error:  # NVML found no driver or no GPU
        return [], f"no GPU metrics: {error}"


class SystemSampler:
    """Samples on a daemon thread until `stop()` (or until its owner is collected); `drain()` gives the mean of the
    samples so far, sampling once more first, and starts a new window."""

    def __init__(self, interval_s: float) -> None:
        from mlflow.system_metrics.metrics.cpu_monitor import CPUMonitor
        from mlflow.system_metrics.metrics.disk_monitor import DiskMonitor
        from mlflow.system_metrics.metrics.network_monitor import NetworkMonitor

        gpus, self.note = gpu_monitors()
        self.monitors: list[BaseMetricsMonitor] = [CPUMonitor(), DiskMonitor(), NetworkMonitor(), *gpus]
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self.sample()  # the trial's start
        self._thread = threading.Thread(target=self._run, name="system-metrics", daemon=True)
        self._thread.start()

    def sample(self) -> None:
        with self._lock:
            for monitor in self.monitors:
                monitor.collect_metrics()

    def _run(self) -> None:
        while not self._stopped.wait(self.interval_s):
            self.sample()

    def drain(self) -> dict[str, float]:
        self.sample()
        with self._lock:
            values: dict[str, float] = {}
            for monitor in self.monitors:
                values.update({name: float(value) for name, value in monitor.aggregate_metrics().items()})
                monitor.clear_metrics()
        return values

    def stop(self) -> None:
        self._stopped.set()


def start_sampling(interval_s: float, *, algorithm: Any, **_: Any) -> None:
    """RLlib `on_algorithm_init` callback: start sampling for this trial's algorithm."""
    sampler = SystemSampler(interval_s)
    weakref.finalize(algorithm, sampler.stop)  # a reused or stopped trial actor does not keep a thread per trial
    algorithm._system_sampler = sampler


def attach_samples(*, algorithm: Any, result: dict[str, Any], **_: Any) -> None:
    """RLlib `on_train_result` callback: the iteration's mean samples under result["system"], and the note once."""
    sampler: SystemSampler | None = getattr(algorithm, "_system_sampler", None)
    if sampler is None:
        return
    result[RESULT_KEY] = sampler.drain()
    if sampler.note:
        result[NOTE_KEY], sampler.note = sampler.note, ""
