"""The command table (experiments/__main__.py): every command users run is one row, and every row's command ends
through the one exit-code wrapper, so bad input is one line and exit 2 whichever command got it."""
from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys

from experiments.__main__ import COMMANDS
from tests.conftest import REPO


def module_path(module: str):
    spec = importlib.util.find_spec(module)
    path = spec.origin
    return REPO / path if not path.startswith("/") else path


def main_of(module: str) -> ast.FunctionDef | None:
    """The `main` function of a command's module (a package's: its `__main__`'s, or the module it imports main
    from)."""
    spec = importlib.util.find_spec(module)
    if spec.submodule_search_locations:  # a package: python -m runs its __main__
        spec = importlib.util.find_spec(f"{module}.__main__")
    tree = ast.parse(open(spec.origin).read())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "main":
            return node
        if isinstance(node, ast.ImportFrom) and any(alias.name == "main" for alias in node.names):
            return main_of(node.module)
    return None


def ends_through_the_wrapper(main: ast.FunctionDef) -> bool:
    """`main` returns `exit_code(...)`."""
    return any(isinstance(node, ast.Return) and isinstance(node.value, ast.Call)
               and ast.unparse(node.value.func) == "exit_code" for node in ast.walk(main))


def test_every_command_is_in_the_table():
    commands = {command.module for command in COMMANDS}
    top = {f"experiments.{path.stem}" for path in (REPO / "experiments").glob("*.py")
           if path.stem not in ("__init__", "__main__", "shell")}
    studies = {f"experiments.studies.{path.stem}" for path in (REPO / "experiments/studies").glob("*.py")
               if path.stem != "__init__"}
    rooms = {f"experiments.{path.parent.name}" for path in (REPO / "experiments").glob("*/__main__.py")}
    assert top | studies | rooms <= commands, sorted(top | studies | rooms - commands)
    assert len({command.name for command in COMMANDS}) == len(COMMANDS)


def test_every_command_ends_through_the_exit_code_wrapper():
    unwrapped = [command.module for command in COMMANDS
                 if (main := main_of(command.module)) is None or not ends_through_the_wrapper(main)]
    assert unwrapped == []


def test_the_wrapper_check_can_fail():
    bare = ast.parse("def main(argv=None):\n    return run(argv)\n").body[0]
    wrapped = ast.parse("def main(argv=None):\n    return exit_code(lambda: run(argv))\n").body[0]
    assert not ends_through_the_wrapper(bare) and ends_through_the_wrapper(wrapped)


def test_python_m_experiments_lists_every_command():
    done = subprocess.run([sys.executable, "-m", "experiments"], cwd=REPO, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    for command in COMMANDS:
        assert f"-m {command.module}" in done.stdout and command.help in done.stdout
