"""A measured figure has one source: its row in docs/benchmarks.md (a benchmark figure) or in the README's measured
table (a wall time). Every other mention of it in the README and docs/ must say the same number; an earlier version
kept 0.107 s for featurization in two places after the benchmark row said 2.49 s."""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from tests.conftest import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def table_rows(path: Path, header: str) -> list[list[str]]:
    """The cells of every row of the first table in `path` whose header line starts with `header`."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


BENCHMARKS = table_rows(REPO / "docs" / "benchmarks.md", "| benchmark | what |")
WALL_TIMES = table_rows(REPO / "README.md", "| command | wall time |")


def benchmark(name: str, what_starts: str, column: int = 2) -> Callable[[], str]:
    """A cell of the benchmark row of `name` whose 'what' starts with `what_starts` (2 platform, 3 peer, 4 ratio)."""
    def value() -> str:
        matches = [row for row in BENCHMARKS if row[0] == f"`{name}`" and row[1].startswith(what_starts)]
        assert len(matches) == 1, f"docs/benchmarks.md: {len(matches)} `{name}` rows start with {what_starts!r}"
        return re.sub(r"[*\s]|s$", "", matches[0][column])
    return value


def wall_time(command_starts: str) -> Callable[[], str]:
    def value() -> str:
        matches = [row for row in WALL_TIMES if row[0].startswith(command_starts)]
        assert len(matches) == 1, f"README.md's measured table: {len(matches)} rows start with {command_starts!r}"
        return re.match(r"(\d+ min \d+ s|[\d.]+ s)", matches[0][1]).group(1)
    return value


@dataclass(frozen=True)
class Figure:
    name: str
    source: Callable[[], str]
    mentions: tuple[str, ...]  # regexes over the README and docs/*.md; group 1 is the figure as written there


FIGURES = (
    Figure("featurizing 30 TA-Lib indicators", benchmark("features", "featurize 20,111 BTC-USD bars"), (
        r"featurized in ([\d.]+) s",
        r"Featurizing 20,111 bars with 30 TA-Lib indicators takes\s+([\d.]+) s",
        r"\| featurize 20,111 bars with 30 TA-Lib indicators \(37 columns\), first call[^|]*\| ([\d.]+) s",
    )),
    Figure("the same, unstable periods known", benchmark("features", "same, unstable periods already known"), (
        r"\| the same, unstable periods known \| ([\d.]+) s",
    )),
    Figure("a feature-store hit", benchmark("features", "a feature-store hit"), (
        r"a feature-store hit takes ([\d.]+) s", r"a cache\s+hit ([\d.]+) s",
        r"\| a feature-store hit \(37 columns\) vs loading the bars' parquet \| ([\d.]+) s",
    )),
    Figure("loading the bars' parquet", benchmark("features", "a feature-store hit", column=3), (
        r"a feature-store hit takes [\d.]+ s against ([\d.]+) s", r"a cache\s+hit [\d.]+ s, against ([\d.]+) s",
        r"\| a feature-store hit \(37 columns\) vs loading the bars' parquet \| [\d.]+ s \| ([\d.]+) s",
    )),
    Figure("FastDQN's env steps/s against SB3's", benchmark("train", "DQN training on trading/Spot-v0", column=4), (
        r"\*\*([\d.]+x) SB3's env steps/s\*\*",
    )),
    Figure("a refused file's dry run", benchmark("cli", "same, a refused file"), (
        r"file answers in ([\d.]+) s", r"\(a refused file: ([\d.]+) s\)",
    )),
    Figure("the three families' smoke sweeps side by side",
           wall_time("`experiments.run conf/agents.yaml --smoke-test`"), (
        r"conf/agents.yaml --smoke-test\s+# what CI runs: (\d+ min \d+ s)",
    )),
)


def mentions(figure: Figure) -> list[tuple[str, str]]:
    """(where, the figure as written) for every mention of `figure` in the README and docs/."""
    found = []
    for path in DOCS:
        text = path.read_text()
        for pattern in figure.mentions:
            found += [(f"{path.relative_to(REPO)}: {m.group(0)[:80]!r}", m.group(1))
                      for m in re.finditer(pattern, text)]
    return found


@pytest.mark.parametrize("figure", FIGURES, ids=[f.name for f in FIGURES])
def test_every_mention_of_a_figure_says_what_its_source_row_says(figure):
    source = figure.source()
    assert source, f"{figure.name}: its source row is empty"
    found = mentions(figure)
    assert len(found) >= len(figure.mentions), f"{figure.name}: a mention this test knows is gone: {found}"
    differing = [where for where, value in found if value != source]
    assert not differing, f"{figure.name} is {source} in its source row, but: {differing}"


def test_the_checker_finds_a_stale_copy(tmp_path, monkeypatch):
    """The check can fail: a copy of the README with the old featurization figure is caught."""
    stale = tmp_path / "README.md"
    stale.write_text((REPO / "README.md").read_text().replace("featurized in 1.27 s", "featurized in 0.11 s"))
    module = sys.modules[__name__]
    monkeypatch.setattr(module, "DOCS", [stale])
    monkeypatch.setattr(module, "REPO", tmp_path)
    found = mentions(FIGURES[0])
    assert ("0.11" in {value for _, value in found}) and FIGURES[0].source() == "1.27"
