"""Every integration test that starts a real server or process is marked `slow`, so `pytest -m "not slow"` is the
quick suite it claims to be (two files of real S3 servers were not marked)."""
from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

INTEGRATION = REPO / "tests" / "integration"
# What starts a server or a process: moto's S3 server, an MLflow server, a Ray cluster, a subprocess
SERVERS = ("s3_server", "mlflow_server", "Cluster(", "subprocess.", "ray.init", ".module(", "Popen")


def functions(tree: ast.Module) -> list[ast.FunctionDef]:
    return [node for node in tree.body if isinstance(node, ast.FunctionDef)]


def starts_something(node: ast.FunctionDef, fixtures: set[str]) -> bool:
    """Its body starts a server or a process, or it takes a fixture that does."""
    return any(word in ast.unparse(node) for word in SERVERS) or any(a.arg in fixtures for a in node.args.args)


def server_fixtures(paths: list[Path]) -> set[str]:
    found: set[str] = set()
    for path in paths:
        for node in functions(ast.parse(path.read_text())):
            if any("fixture" in ast.unparse(d) for d in node.decorator_list) and starts_something(node, found):
                found.add(node.name)
    return found


def marked(node: ast.AST) -> bool:
    return "slow" in ast.unparse(node)


def test_integration_tests_that_start_servers_or_processes_are_marked_slow():
    shared = server_fixtures([INTEGRATION / "conftest.py"])
    unmarked = []
    for path in sorted(INTEGRATION.glob("test_*.py")):
        tree = ast.parse(path.read_text())
        if any(isinstance(node, ast.Assign) and "pytestmark" in ast.unparse(node) and marked(node.value)
               for node in tree.body):
            continue
        fixtures = shared | server_fixtures([path])
        unmarked += [f"{path.name}::{node.name}" for node in functions(tree) if node.name.startswith("test_")
                     and starts_something(node, fixtures) and not any(marked(d) for d in node.decorator_list)]
    assert not unmarked, f"not marked slow: {unmarked}"
