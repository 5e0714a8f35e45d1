"""A joined Ray cluster that goes away mid-run ends the run in one line with exit 4 (docs/faults.md), instead of
Ray's driver retrying its GCS for 60 s and dying with exit 1 (or `ray.init` retrying a half-dead port for good).

The watch is tested here with a fake GCS request; tests/integration/test_joined_cluster_killed.py joins a real
`ray start` cluster from a subprocess and kills it."""
from __future__ import annotations

import threading
import time

import pytest

from experiments.plan.cluster import LOCAL, NoAnswer, RayTarget
from experiments.records.exits import ExitCode
from experiments.sweep.faults import ClusterWatch

ADDRESS = "127.0.0.1:6379"


class Gcs:
    """A fake GCS request: answered until `gone` is set, then NoAnswer."""

    def __init__(self) -> None:
        self.gone = threading.Event()
        self.asked = 0

    def __call__(self, address: str, timeout: float, token: bool) -> str:
        self.asked += 1
        if self.gone.is_set():
            raise NoAnswer("UNAVAILABLE: Connection refused")
        return "session_x"


class Ending:
    """What the watch ended with: the last words and the exit code."""

    def __init__(self) -> None:
        self.words: list[str] = []
        self.codes: list[int] = []
        self.done = threading.Event()

    def end(self, code: int) -> None:
        self.codes.append(code)
        self.done.set()


def watch_of(target: RayTarget, gcs: Gcs, ending: Ending) -> ClusterWatch:
    return ClusterWatch(target, ending.words.append, ask=gcs, every=0.02, lost_after=0.2, end=ending.end)


def test_a_cluster_that_goes_away_ends_the_run_in_one_line_with_exit_4():
    gcs, ending = Gcs(), Ending()
    watch = watch_of(RayTarget(ADDRESS), gcs, ending)
    watch.start()
    time.sleep(0.2)
    assert not ending.done.is_set()  # answered: nothing said
    gcs.gone.set()
    assert ending.done.wait(5)
    assert ending.codes == [ExitCode.FAULT]
    assert len(ending.words) == 1
    assert ending.words[0].startswith(f"the Ray cluster at {ADDRESS} went away mid-run (its GCS has not answered "
                                      "for 0 s: UNAVAILABLE: Connection refused): start it again")
    watch.thread.join(5)
    assert not watch.thread.is_alive()


def test_a_run_that_ended_first_is_not_ended_again():
    gcs, ending = Gcs(), Ending()
    watch = watch_of(RayTarget(ADDRESS), gcs, ending)
    watch.start()
    watch.stop()
    gcs.gone.set()
    watch.thread.join(5)
    assert (ending.words, ending.codes) == ([], [])


@pytest.mark.parametrize("target", [RayTarget(LOCAL), RayTarget(f"ray://{ADDRESS}")])
def test_a_local_ray_or_a_client_connection_is_not_watched(target):
    gcs, ending = Gcs(), Ending()
    watch = watch_of(target, gcs, ending)
    watch.start()
    watch.stop()
    assert not watch.thread.is_alive() and gcs.asked == 0


def test_the_resume_command_of_a_run_on_a_joined_cluster_names_the_cluster():
    """Printed after a fault: it used to leave --address out, so a resume ran on a new local Ray."""
    from pathlib import Path

    from experiments.api.options import RunOptions, RunRequest, rerun_command
    from experiments.config.files import parse_overrides
    from experiments.plan.run_clock import RunClock

    request = RunRequest(Path("conf/dqn_btc.yaml"), parse_overrides(["training.lr=0.001"]),
                         RunOptions(smoke_test=True, address=ADDRESS), RunClock())
    assert rerun_command(request, resume=True).endswith(
        f"--smoke-test --set training.lr=0.001 --address {ADDRESS} --resume")
