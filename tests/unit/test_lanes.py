"""The lanes tell the truth about themselves (tests/lanes.py): a fast-lane test that starts Ray, a server or a training
subprocess fails at that call, unless it is a join test; `pytest` runs the fast lane, `-m slow` or a named file the
slow one; every join test named exists; no fast-lane file starts a server inside its own process."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.conftest import REPO
from tests.lanes import (
    INTEGRATION,
    JOIN_TESTS,
    StartedInFastLane,
    is_join,
    keeps,
    lane_of,
    named_paths,
    node_path,
    starts,
)

RAY_BIN = Path(sys.executable).with_name("ray")
MLFLOW_BIN = Path(sys.executable).with_name("mlflow")


@pytest.mark.parametrize("argv, started", [
    ([f"{sys.prefix}/lib/python3.11/site-packages/ray/core/src/ray/gcs/gcs_server", "--gcs_server_port=0"], "Ray"),
    ([str(RAY_BIN), "start", "--head"], "Ray"),
    ([str(MLFLOW_BIN), "server", "--host", "127.0.0.1"], "an MLflow server"),
    (["mlflow", "models", "serve", "-m", "models:/x/1"], "an MLflow server"),
    ([sys.executable, "-m", "experiments.serve", "models:/x/1"], "a server (python -m experiments.serve)"),
    ([sys.executable, "-m", "experiments.run", "conf/dqn_btc.yaml", "--smoke-test"],
     "a training subprocess (python -m experiments.run)"),
    ([sys.executable, "-m", "experiments.retrain", "conf/dqn_btc.yaml"],
     "a training subprocess (python -m experiments.retrain)"),
    ([sys.executable, "-m", "experiments.benchmark", "learner", "--quick"],
     "a training subprocess (python -m experiments.benchmark)"),
    ([sys.executable, "-m", "experiments.run", "conf/dqn_btc.yaml", "--dry-run"], None),
    ([sys.executable, "-m", "experiments.retrain", "--help"], None),
    ([sys.executable, "-m", "experiments.data", "import", "bars.csv"], None),
    ([str(MLFLOW_BIN), "--version"], None),
    (["git", "status", "--porcelain"], None),
])
def test_what_a_subprocess_starts(argv, started):
    assert starts(argv) == started


def test_a_fast_lane_test_cannot_start_ray_or_a_training_run_and_nothing_is_left_running():
    """The guard is on in this very test (a fast-lane test): Ray's first process and a smoke run are refused before
    they start."""
    import ray

    before = {child.pid for child in psutil.Process().children(recursive=True)}
    with pytest.raises(StartedInFastLane, match="test_lanes.py::.* is a fast-lane test and started Ray: move it"):
        ray.init(num_cpus=1, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    ray.shutdown()
    with pytest.raises(StartedInFastLane, match=r"started a training subprocess \(python -m experiments.run\)"):
        subprocess.Popen([sys.executable, "-m", "experiments.run", "conf/dqn_btc.yaml", "--smoke-test"], cwd=REPO)
    assert {child.pid for child in psutil.Process().children(recursive=True)} <= before


def test_a_dry_run_subprocess_is_allowed_in_the_fast_lane():
    result = subprocess.run([sys.executable, "-m", "experiments.run", "--help"], cwd=REPO, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0 and "--dry-run" in result.stdout


def test_the_lane_of_a_test_follows_its_folder_and_the_join_list():
    joined = JOIN_TESTS[0]
    assert lane_of(REPO / joined, f"{joined}::test_x[1]") == "join"
    assert lane_of(INTEGRATION / "test_faults.py", "tests/integration/test_faults.py::test_y") == "slow"
    assert lane_of(REPO / "tests/unit/test_config.py", "tests/unit/test_config.py::test_z") == "fast"
    assert is_join("tests/x.py::test_a[p]", ("tests/x.py::test_a",)) and not is_join("tests/x.py::test_b",
                                                                                       ("tests/x.py::test_a",))


def test_pytest_alone_runs_the_fast_lane_and_a_named_file_or_marks_run_the_slow_one():
    faults = INTEGRATION / "test_faults.py"
    nothing_named = named_paths([], REPO, REPO)
    assert nothing_named == [] and named_paths(["tests", "."], REPO, REPO) == []
    assert keeps(REPO / "tests/unit/test_config.py", slow=False, marks_asked=False, named=nothing_named)
    assert not keeps(faults, slow=True, marks_asked=False, named=nothing_named)
    assert keeps(faults, slow=True, marks_asked=True, named=nothing_named)  # -m slow (or any -m)
    for arg in ("tests/integration/test_faults.py", "tests/integration/test_faults.py::test_a_full_disk",
                "tests/integration", "integration"):
        invoked_from = REPO / "tests" if arg == "integration" else REPO
        assert keeps(faults, slow=True, marks_asked=False, named=named_paths([arg], invoked_from, REPO)), arg
    other = named_paths(["tests/integration/test_canaries.py"], REPO, REPO)
    assert not keeps(faults, slow=True, marks_asked=False, named=other)


def test_every_join_test_named_exists_and_the_list_is_short():
    assert 1 <= len(JOIN_TESTS) <= 5
    for entry in JOIN_TESTS:
        path = REPO / node_path(entry)
        assert path.is_file() and INTEGRATION in path.parents, entry
        if "::" in entry:
            names = {node.name for node in ast.parse(path.read_text()).body if isinstance(node, ast.FunctionDef)}
            assert entry.split("::", 1)[1].split("[", 1)[0] in names, entry


# What starts a server or a cluster inside the test's own process, where the guard (which watches subprocesses)
# cannot see it: moto's threaded S3 server, an HTTP server, Ray's multi-node test cluster, the test helpers for them.
IN_PROCESS_STARTS = {"s3_server", "ThreadedMotoServer", "HTTPServer", "make_server", "Cluster", "mlflow_server",
                     "MlflowServer", "served_model"}


def called_names(tree: ast.AST) -> set[str]:
    """The names of everything called in `tree` (`f(...)`, `module.f(...)`)."""
    calls = [node.func for node in ast.walk(tree) if isinstance(node, ast.Call)]
    return {f.id if isinstance(f, ast.Name) else f.attr for f in calls if isinstance(f, (ast.Name, ast.Attribute))}


def test_no_fast_lane_file_starts_a_server_or_cluster_in_its_own_process():
    found = {path.name: called_names(ast.parse(path.read_text())) & IN_PROCESS_STARTS
             for path in sorted((REPO / "tests" / "unit").glob("*.py"))}
    assert not {name: calls for name, calls in found.items() if calls}
    assert called_names(ast.parse("s3_server()\nray.cluster_utils.Cluster(initialize_head=True)")) >= {
        "s3_server", "Cluster"}  # the check sees both spellings
