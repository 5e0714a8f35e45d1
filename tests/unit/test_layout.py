"""The house's layout: the platform's modules import each other without circles (function-level and type-only
imports included), and `experiments/` keeps only the commands users run at its top, the rest in rooms."""
from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("envs", "algos", "experiments")
TOP_LEVEL_LIMIT = 12


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for package in PACKAGES for p in (REPO / package).rglob("*.py")
            if "__pycache__" not in p.parts}


def imports_of(path: Path, known: dict[str, Path]) -> set[str]:
    """Every project module `path` imports anywhere in it (top level, in functions, under TYPE_CHECKING)."""
    def owner(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            found.update(owner(name if name in known else node.module) for name in names)
        elif isinstance(node, ast.Import):
            found.update(owner(alias.name) for alias in node.names)
    return {name for name in found if name}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), each a circle of imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for node in graph:
        if node not in index:
            visit(node)
    return cycles


def test_no_module_imports_itself_back_through_others():
    known = modules()
    graph = {name: imports_of(path, known) - {name} for name, path in known.items()}
    # A package's __init__ importing its own modules is how a package exposes them, not a circle of meaning.
    graph = {name: {t for t in targets if not name.startswith(t + ".")} for name, targets in graph.items()}
    assert import_cycles(graph) == []


def test_the_cycle_finder_finds_a_circle():
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_experiments_keeps_its_commands_at_the_top_and_the_rest_in_rooms():
    top = sorted(p for p in (REPO / "experiments").glob("*.py"))
    assert len(top) <= TOP_LEVEL_LIMIT, [p.name for p in top]
    for path in top:
        if path.name in ("__init__.py", "shell.py"):  # the package, and what every command prints with
            continue
        assert 'if __name__ == "__main__":' in path.read_text(), f"{path.name} is not a command: move it into a room"


def test_no_two_test_modules_share_a_name():
    """tests/ has no packages: pytest imports each test module by its basename, and a second module of the same name
    stops the whole collection ('import file mismatch')."""
    names = [path.name for path in (REPO / "tests").rglob("test_*.py")]
    assert sorted({name for name in names if names.count(name) > 1}) == []


def room_of(module: str) -> str | None:
    """The room of a module under experiments/ (`experiments.sweep.tuner` -> `sweep`); None for the commands at the
    top (`experiments.run`) and a room's own command (`experiments.hardware.__main__`), which stand on the rooms and
    the API and are no room."""
    parts = module.split(".")
    if parts[0] != "experiments" or len(parts) < 2 or parts[-1] == "__main__":
        return None
    return parts[1] if (REPO / "experiments" / parts[1]).is_dir() else None


def room_graph(known: dict[str, Path]) -> dict[str, set[str]]:
    """Room -> the rooms its modules import (a room's own modules excluded)."""
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        room = room_of(name)
        if room is None:
            continue
        targets = {room_of(target) for target in imports_of(path, known)} - {None, room}
        graph.setdefault(room, set()).update(targets)
    return graph


def test_no_two_rooms_import_each_other():
    """experiments/'s rooms stack: api on results, sweep and plan; results and sweep on records; nothing imports
    back up. A circle between two rooms (results -> sweep.tuner while sweep -> results) is how a room stops having one
    job."""
    assert import_cycles(room_graph(modules())) == []


def test_the_room_check_finds_a_circle_between_rooms():
    graph = {"results": {"sweep", "records"}, "sweep": {"results"}, "records": set()}
    assert import_cycles(graph) == [["results", "sweep"]]


# Modules that start an `experiments.*` module as a process, each for a reason the API cannot serve in process.
CHILD_PROCESSES = {
    "experiments/api/child_process.py": "a side-by-side experiment in its own process (failure and memory isolation)",
    "experiments/run.py": "--cross-cpu restarts this same command with pinned kernels before numpy loads",
    "experiments/cross_cpu.py": "--cross-cpu restarts this same command with pinned kernels before numpy loads",
    "experiments/benchmark/cli_bench.py": "measures the command-line start of a dry run, as a user types it",
    "experiments/benchmark/operations_bench.py": "times each operations command as a user types it, and serves",
    "experiments/benchmark/jobs_bench.py": "times the main job and its SAC twin from the command line, as a new user "
                                           "runs them",
    "experiments/studies/portfolio_scale.py": "measures one universe size per fresh process (peak memory)",
}


def command_calls(path: Path) -> list[str]:
    """What in `path` runs another command rather than the API: importing a command's `main`, or a `-m experiments.`
    command line (an argv list that starts this interpreter, or a module name handed to a helper that does). A
    command printed for the user to type (`rerun_command`) starts nothing and is not one."""
    found = []
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("experiments"):
            found += [f"imports {node.module}.main" for alias in node.names if alias.name == "main"]
        if isinstance(node, ast.List) and any(ast.unparse(element) == "sys.executable" for element in node.elts):
            words = [element.value for element in node.elts if isinstance(element, ast.Constant)]
            if "-m" in words and any(str(word).startswith("experiments") for word in words):
                found.append(f"runs {' '.join(map(str, words))}")
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            first = node.args[0].value
            if isinstance(first, str) and re.fullmatch(r"experiments(\.\w+)+", first):
                found.append(f"starts {first}")
    return found


def test_commands_call_the_api_not_each_other():
    """A module under experiments/ imports no command's `main` and builds no `python -m experiments.…` command line:
    it calls `experiments.api` (side-by-side children and the measured exceptions above excepted)."""
    offenders = {}
    for path in sorted((REPO / "experiments").rglob("*.py")):
        relative = path.relative_to(REPO).as_posix()
        calls = command_calls(path)
        if calls and relative not in CHILD_PROCESSES:
            offenders[relative] = calls
    assert offenders == {}


def test_the_command_call_check_finds_one(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("from experiments.run import main\nimport sys\n"
                      "command = [sys.executable, '-m', 'experiments.transfer', 'x']\n")
    assert command_calls(sample) == ["imports experiments.run.main", "runs -m experiments.transfer x"]
    for relative in CHILD_PROCESSES:  # the exceptions still exist, and still need to be one
        assert command_calls(REPO / relative), f"{relative} no longer starts a command: drop it from the exceptions"
