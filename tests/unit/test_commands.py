"""The command table (experiments/__main__.py): every command users run is one row, every row's command ends
through the one exit-code wrapper, so bad input is one line and exit 2 whichever command got it, and every row but
the studies is a thin shell over `experiments.api`."""
from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

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


# --- Every command is a thin shell over experiments.api (docs/DESIGN.md; the study-* rows stay scripts)

# What a command's module may import from the project: the API, how commands print and end (experiments.shell), the
# exit codes and the one-line error. Everything else (MLflow, the registry, Ray, a family's modules) it reaches
# through the API. Besides: its own package (a package command's docstring and names), and the kernel pinning a
# command does to its own process before numpy loads (it restarts itself: no API call can do that for it).
THIN_IMPORTS = ("experiments.api", "experiments.shell", "experiments.records.exits", "envs.errors")
PROCESS_SETUP = {"experiments.plan.numerics": {"requested", "restart_pinned"}}
HEAVY_LIBRARIES = ("mlflow", "ray", "torch")
VIEWS = "experiments.api.console_view"
# A command whose room stands above the API is thin over its room's one entry instead: the benchmarks measure the API
# by calling it, so the API cannot run them (tests/unit/test_layout.py: no two rooms import each other).
ABOVE_THE_API = {"experiments.benchmark.__main__": "experiments.benchmark.runner"}
LINE_BUDGET = 120  # flags, the options object, the call and what it prints; more is logic that belongs in the API
THIN_ROWS = [command for command in COMMANDS if not command.name.startswith("study-")]


def command_module(module: str) -> tuple[str, Path]:
    """The module that holds a command's `main`, and its file: the module itself, a package's `__main__`, or the
    module that one imports `main` from."""
    spec = importlib.util.find_spec(module)
    if spec.submodule_search_locations:
        return command_module(f"{module}.__main__")
    for node in ast.parse(Path(spec.origin).read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module and any(alias.name == "main" for alias in node.names):
            return command_module(node.module)
    return module, Path(spec.origin)


def api_actions_called(tree: ast.Module, api: str = "experiments.api") -> set[str]:
    """The actions of `api` (a package or module) the module calls (`api.run(...)`, or one imported from `api` or
    its modules), by their defining module. An action is a function `api` exports (its `__all__`); the options,
    results and events a command builds are classes, the API's console views (experiments/api/console_view.py) are
    the command's printing, and its other helpers (e.g. the families' subcommands for a parser) do no work: none of
    these counts."""
    served = importlib.import_module(api)
    exported = {id(getattr(served, name)) for name in served.__all__}
    parent, _, leaf = api.rpartition(".")
    packages, imported = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == parent:
            packages.update(alias.asname or alias.name for alias in node.names if alias.name == leaf)
        elif isinstance(node, ast.ImportFrom) and node.module and (node.module == api
                                                                   or node.module.startswith(f"{api}.")):
            imported.update({alias.asname or alias.name: (node.module, alias.name) for alias in node.names})
    called = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
                and node.func.value.id in packages:
            target = getattr(served, node.func.attr)
        elif isinstance(node.func, ast.Name) and node.func.id in imported:
            module, name = imported[node.func.id]
            target = getattr(importlib.import_module(module), name)
        else:
            continue
        if inspect.isfunction(target) and id(target) in exported and target.__module__ != VIEWS:
            called.add(f"{target.__module__}.{target.__name__}")
    return called


def modes(tree: ast.Module) -> int:
    """How many actions the command may call: one per subcommand (`add_parser` calls), at least one, and one more
    for a `--dry-run` flag (`api.plan` checks what the other one would run)."""
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)]
    parsers = sum(node.func.attr == "add_parser" for node in calls)
    dry_run = any(node.func.attr == "add_argument" and node.args and isinstance(node.args[0], ast.Constant)
                  and node.args[0].value == "--dry-run" for node in calls)
    return max(1, parsers) + dry_run


def imports_of(tree: ast.Module) -> list[tuple[str, str | None]]:
    """Every absolute import anywhere in the module (inside functions too): `import a.b` is ("a.b", None), `from a
    import b` is ("a", "b")."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [(node.module, alias.name) for alias in node.names]
    return found


def thinness_faults(module: str, source: str) -> list[str]:
    """Why `module` (a command's, with this source) is not a thin shell over the API; [] when it is: it calls one
    API action (one per subcommand, `api.plan` besides for a --dry-run), imports nothing of the platform but
    `THIN_IMPORTS` and its own package, no MLflow, Ray or torch, and fits `LINE_BUDGET` lines."""
    tree = ast.parse(source)
    package = module.rpartition(".")[0]
    own = package if package != "experiments" else None  # a package command's own package (benchmark, hardware)
    faults = []
    api = ABOVE_THE_API.get(module, "experiments.api")
    calls = api_actions_called(tree, api)
    if not 1 <= len(calls) <= modes(tree):
        faults.append(f"calls {len(calls)} {api} actions {sorted(calls)}, not one (per subcommand)")
    for imported, name in imports_of(tree):
        full = f"{imported}.{name}" if name else imported
        allowed = (any(full == thin or full.startswith(f"{thin}.") for thin in (*THIN_IMPORTS, api))
                   or imported == own or name in PROCESS_SETUP.get(imported, ()))
        root = imported.split(".")[0]
        if (root in ("experiments", "envs", "algos") and not allowed) or root in HEAVY_LIBRARIES:
            faults.append(f"imports {full}")
    if len(source.splitlines()) > LINE_BUDGET:
        faults.append(f"{len(source.splitlines())} lines (budget {LINE_BUDGET})")
    return faults


@pytest.mark.parametrize("command", THIN_ROWS, ids=[command.name for command in THIN_ROWS])
def test_every_command_is_a_thin_shell_over_the_api(command):
    """A command parses its flags into a typed options object, calls one action of `experiments.api` (one per
    subcommand; a --dry-run may call `api.plan` besides), and prints what it returns: its module (the one with
    `main`) calls exactly that, imports nothing of the platform beyond the API, how commands print and end, and its
    own package, and fits in 120 lines. The benchmark, above the API, is thin over its room's entry instead
    (`ABOVE_THE_API`). The rows still being converted fail here until they land."""
    module, path = command_module(command.module)
    assert thinness_faults(module, path.read_text()) == [], f"{path.relative_to(REPO)}"


def test_the_thinness_check_can_fail():
    thick = ("from experiments import api\nfrom experiments.tracking.runs import make_client\n"
             "def main(argv=None):\n    api.plan('a.yaml')\n    return api.retrain('a.yaml', [], None, None)\n")
    assert thinness_faults("experiments.thick", thick) == [
        "calls 2 experiments.api actions ['experiments.api.retraining.retrain', 'experiments.api.runs.plan'], "
        "not one (per subcommand)", "imports experiments.tracking.runs.make_client"]
    thin = ("from experiments.api.transfers import transfer\nfrom experiments.shell import exit_code\n"
            "def main(argv=None):\n    return exit_code(lambda: transfer('m', []))\n")
    assert thinness_faults("experiments.thin", thin) == []
    assert thinness_faults("experiments.long", thin + "\n" * LINE_BUDGET) == [f"{LINE_BUDGET + 4} lines (budget "
                                                                              f"{LINE_BUDGET})"]
