"""The "took X, estimated Y" line says when the machine was busier than its cores during the run (it said `took 41.4
min, estimated 3.2 min` on a loaded machine without saying why)."""
from __future__ import annotations

import os

import pytest

from experiments.plan.run_clock import RunClock

pytestmark = pytest.mark.skipif(not hasattr(os, "getloadavg"), reason="no load average on this platform")


def test_a_load_above_the_cores_is_said_with_its_mean_and_peak():
    clock = RunClock(interval_s=3600, cores=2)
    clock.samples = [6.0, 12.0, 9.0]
    assert clock.busy_note() == ("; the machine was busy: load average 9.0 on average (peak 12.0) on 2 cores, more "
                                 "runnable processes than cores (this run's own included), so it had less CPU than "
                                 "the estimate assumes")


def test_a_machine_no_busier_than_its_cores_adds_nothing():
    clock = RunClock(interval_s=3600, cores=4)
    clock.samples = [1.0, 4.0, 3.5]
    assert clock.busy_note() == ""


def test_the_load_is_sampled_during_the_run_not_only_at_its_end():
    clock = RunClock(interval_s=0.01, cores=1)
    for _ in range(200):
        if len(clock.samples) >= 3:
            break
        clock._stop.wait(0.01)
    assert len(clock.samples) >= 3 and clock.elapsed() > 0
    clock.busy_note()  # stops the sampler (a sample already under way may still land)
    clock._stop.wait(0.05)
    counted = len(clock.samples)
    clock._stop.wait(0.1)
    assert len(clock.samples) == counted
