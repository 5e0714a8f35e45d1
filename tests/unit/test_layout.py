"""The house's layout: the platform's modules import each other without circles (function-level and type-only
imports included), and `experiments/` keeps only the commands users run at its top, the rest in rooms."""
from __future__ import annotations

import ast
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
