"""How long a run took, and how busy the machine was meanwhile: a run on a machine whose load average is above its
core count takes longer than the plan's estimate for that reason, and the "took X, estimated Y" line says so."""
from __future__ import annotations

import os
import threading
import time


class RunClock:
    """Started with the command; samples the 1-minute load average every `interval_s` on a daemon thread (an
    `os.getloadavg` call: microseconds), so the busy note covers the whole run, not the last minutes of it."""

    def __init__(self, interval_s: float = 15.0, cores: int | None = None) -> None:
        self.started = time.monotonic()
        self.cores = cores or os.cpu_count() or 1
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._interval_s = interval_s
        self.laps: dict[str, float] = {}  # phase -> seconds it took, in order (plan, train, score)
        self._lap_start = self.started
        if hasattr(os, "getloadavg"):  # not on Windows: no note there
            self.sample()
            threading.Thread(target=self._sample_until_stopped, name="run-clock", daemon=True).start()

    def sample(self) -> None:
        self.samples.append(os.getloadavg()[0])

    def _sample_until_stopped(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.sample()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def lap(self, phase: str) -> None:
        """Close `phase`: the seconds since the previous lap (or the start) are recorded under its name."""
        now = time.monotonic()
        self.laps[phase] = now - self._lap_start
        self._lap_start = now

    def timings(self) -> dict[str, float]:
        return {**self.laps, "total": self.elapsed()}

    def stop(self) -> None:
        """Stop sampling the load (a run in a notebook or a study outlives its clock)."""
        self._stop.set()

    def busy_note(self) -> str:
        """Why the run may have taken longer than estimated ("" when the machine was not busier than its cores):
        the mean and peak of the load averages sampled during the run, against the core count."""
        self._stop.set()
        if not self.samples:
            return ""
        mean = sum(self.samples) / len(self.samples)
        if mean <= self.cores:
            return ""
        return (f"; the machine was busy: load average {mean:.1f} on average (peak {max(self.samples):.1f}) on "
                f"{self.cores} cores, more runnable processes than cores (this run's own included), so it had less "
                "CPU than the estimate assumes")
