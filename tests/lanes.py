"""The two lanes of the test suite, as a pytest plugin (loaded by tests/conftest.py). tests/README.md explains them.

- The fast lane is what `pytest` runs with no arguments: tests/unit (no Ray cluster, no server, no training), plus the
  join tests named in JOIN_TESTS, which prove the main pieces fit: the main job's smoke run through MLflow and the
  registry, and one decision served over HTTP.
- The slow lane is every other test under tests/integration: real Ray, Tune, MLflow and servers on loopback.
  `pytest -m slow` runs it; naming a slow test's file or folder runs it too (`pytest tests/integration/test_faults.py`).
  `.ci/run` runs the fast lane first, so a broken basic fails in minutes.

A fast-lane test that starts Ray, a server or a training subprocess fails at that call (the guard below), unless it is
a join test; tests/unit/test_lanes.py holds the guard and the list to that.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
INTEGRATION = TESTS / "integration"

# The join tests: fast-lane tests that start Ray, MLflow and a served model, because together they show the main pieces
# fit. A whole file is named by its path, a test by its node id. Keep it short: each costs the fast lane a smoke run.
JOIN_TESTS = (
    "tests/integration/test_smoke_sweep.py",
)

SLOW = "slow"
JOIN = "join"
# The commands a fast-lane test may not start (python -m ...): they train or serve. With one of these flags they do
# neither.
TRAINING_MODULES = ("experiments.run", "experiments.retrain", "experiments.transfer", "experiments.benchmark",
                    "experiments.studies")
SERVING_MODULES = ("experiments.serve", "http.server")
HARMLESS_FLAGS = ("--dry-run", "--help", "-h")


class StartedInFastLane(RuntimeError):
    """A fast-lane test started Ray, a server or a training subprocess: it belongs in the slow lane."""


def node_path(nodeid: str) -> str:
    """The file part of a node id ("tests/x.py::test_y[a]" -> "tests/x.py")."""
    return nodeid.split("::", 1)[0]


def is_join(nodeid: str, joins: Iterable[str] = JOIN_TESTS) -> bool:
    """Whether the node id is a join test: its file or itself (any parametrization) is listed."""
    bare = nodeid.split("[", 1)[0]
    return any(entry in (node_path(nodeid), bare, nodeid) for entry in joins)


def lane_of(path: Path, nodeid: str) -> str:
    """"slow" for a test under tests/integration that is not a join test, "join" for a join test, else "fast"."""
    if is_join(nodeid):
        return JOIN
    return SLOW if INTEGRATION in path.parents else "fast"


def named_paths(args: Sequence[str], invoked_from: Path, root: Path) -> list[Path]:
    """The paths the command line names more narrowly than the whole suite: files, folders or node ids below
    tests/ (so `pytest` and `pytest tests` name none, `pytest tests/integration/test_faults.py::x` names its file)."""
    named = []
    for arg in args:
        path = (invoked_from / node_path(arg)).resolve()
        if path.exists() and path not in (root, root / "tests"):
            named.append(path)
    return named


def keeps(path: Path, slow: bool, marks_asked: bool, named: Sequence[Path]) -> bool:
    """Whether the default selection keeps a test: fast-lane tests always; slow ones when -m chose the lanes or the
    command line named their file or a folder above it."""
    if not slow or marks_asked:
        return True
    return any(path == place or place in path.parents for place in named)


def starts(argv: Sequence[str]) -> str | None:
    """What a subprocess with this argv starts that the fast lane may not (a phrase), or None."""
    words = [str(word) for word in argv]
    text = " ".join(words)
    names = [Path(word).name for word in words]
    if "/ray/core/src/ray/" in text or (names[:1] == ["ray"] and words[1:2] == ["start"]):
        return "Ray"
    if names[:1] == ["mlflow"] and ({"server", "ui"} & set(words[1:3]) or words[1:3] == ["models", "serve"]):
        return "an MLflow server"
    if names[:1] == ["chromedriver"]:
        return "a browser"
    if "-m" in words:
        module = words[words.index("-m") + 1] if words.index("-m") + 1 < len(words) else ""
        harmless = any(flag in words for flag in HARMLESS_FLAGS)
        if module.startswith(SERVING_MODULES) and not harmless:
            return f"a server (python -m {module})"
        if module.startswith(TRAINING_MODULES) and not harmless:
            return f"a training subprocess (python -m {module})"
    return None


class LaneGuard:
    """Refuses, while a fast-lane test that is not a join test runs, every subprocess `starts` names (Ray's own
    processes included, which is how an in-process `ray.init` is caught). An audit hook cannot be removed, so it
    stays installed and checks `current`, the running test's node id, or None between tests."""

    def __init__(self) -> None:
        self.current: str | None = None

    def __call__(self, event: str, args: tuple) -> None:
        if self.current is None or event != "subprocess.Popen":
            return
        executable, argv = args[0], args[1]
        words = [argv] if isinstance(argv, (str, bytes)) else list(argv or [])
        if executable and not words:
            words = [executable]
        what = starts([os.fsdecode(w) for w in words])
        if what:
            raise StartedInFastLane(
                f"{self.current} is a fast-lane test and started {what}: move it to tests/integration (the slow "
                "lane), or, if it proves the main pieces fit, name it in JOIN_TESTS (tests/lanes.py)")


GUARD = LaneGuard()
sys.addaudithook(GUARD)
DROPPED = pytest.StashKey[int]()  # how many slow-lane tests the default selection left out, for the summary


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{SLOW}: the slow lane (tests/integration but the join tests): "
                                       "`pytest -m slow` runs it")
    config.addinivalue_line("markers", f"{JOIN}: a join test of the fast lane (tests/lanes.py JOIN_TESTS)")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its lane (before -m selects), then, when neither -m nor a path chose, keep the fast lane."""
    for item in items:
        lane = lane_of(item.path, item.nodeid)
        if lane != "fast":
            item.add_marker(lane)
    named = named_paths(config.args, config.invocation_params.dir, config.rootpath)
    marks_asked = bool(config.option.markexpr)
    kept, dropped = [], []
    for item in items:
        slow = item.get_closest_marker(SLOW) is not None
        (kept if keeps(item.path, slow, marks_asked, named) else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        config.stash[DROPPED] = len(dropped)
    # Join tests last: the unit tests fail a broken basic first, and a smoke run's cost comes after them.
    items[:] = sorted(kept, key=lambda item: item.get_closest_marker(JOIN) is not None)



@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """The guard is on for the whole protocol of a fast-lane test (fixture setup and teardown included)."""
    GUARD.current = None if item.get_closest_marker(SLOW) or item.get_closest_marker(JOIN) else item.nodeid
    try:
        yield
    finally:
        GUARD.current = None


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    dropped = config.stash.get(DROPPED, 0)
    if dropped:
        terminalreporter.write_line(f"fast lane: {dropped} slow-lane test(s) left out; `pytest -m slow` runs "
                                    "them, as does naming their file (tests/README.md)")
