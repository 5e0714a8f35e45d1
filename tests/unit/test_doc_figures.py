"""A measured figure has one source: its row in docs/benchmarks.md (a benchmark figure) or in the README's measured
table (a wall time). Every other mention of it in the README and docs/ must say the same number; an earlier version
kept 0.107 s for featurization in two places after the benchmark row said 2.49 s.

A wall time in the README's measured tables gives the day it was measured and that day's reference speed
(`python -m experiments.benchmark reference`), because this machine ran ~2x faster on some days than on others; the
reference a row gives for a day is the one docs/benchmarks.md's "Reference speed" table holds for that day."""
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
        r"file answers in ([\d.]+) s", r"[(;] ?a refused file: ([\d.]+) s\)",
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


# The README's tables of measured times: (header line start, the column that holds the measured time).
MEASURED_TABLES = (("| command | wall time |", 1), ("| lane | command | what it runs | measured", 3))
DAY = r"\d{4}-\d{2}-\d{2}"
# "(2026-11-26; ref 5.33 ms)", "~5.4 ms" (estimated from another figure of the day), "9.3–10.2 ms" (two measurements
# that day), or "ref not measured ..." where no figure of that day exists (CI's runner).
DATED = re.compile(rf"({DAY}); ref (~?[\d.]+(?:–[\d.]+)? ms|not measured)")
LINK_TARGET = re.compile(r"\]\([^)]*\)")  # a link's target can hold a date (an anchor): not a figure's
REFERENCE_DAYS = table_rows(REPO / "docs" / "benchmarks.md", "| day | reference |")


def measured_cells(path: Path = REPO / "README.md") -> list[tuple[str, str]]:
    """(row's first cell, its measured-time cell) for every row of the README's tables of measured times."""
    return [(row[0], row[column]) for header, column in MEASURED_TABLES for row in table_rows(path, header)]


def undated_figures(cell: str) -> list[str]:
    """What is wrong with a measured-time cell: a day no reference follows, or no day at all."""
    text = LINK_TARGET.sub("]", cell)
    days, dated = re.findall(DAY, text), DATED.findall(text)
    if not dated:
        return ["no '(YYYY-MM-DD; ref R ms)'"]
    problems = [f"{day} without '; ref R ms'" for day in days if day not in {d for d, _ in dated}]
    if not problems and len(days) != len(dated):
        problems.append(f"{len(days)} days but {len(dated)} references")
    return problems


def bounds(reference: str) -> tuple[float, float]:
    """'5.33 ms', '~5.4 ms' or '9.3–10.2 ms' as (low, high) in ms."""
    values = [float(v) for v in reference.strip("~").removesuffix(" ms").split("–")]
    return min(values), max(values)


def day_references() -> dict[str, tuple[float, float]]:
    """docs/benchmarks.md's reference of each day, as (low, high) in ms."""
    return {row[0]: bounds(row[1]) for row in REFERENCE_DAYS}


def misquoted_references(cells: list[tuple[str, str]]) -> list[str]:
    """README references outside the range docs/benchmarks.md gives for their day, or for a day it does not list."""
    days, wrong = day_references(), []
    for command, cell in cells:
        for day, reference in DATED.findall(LINK_TARGET.sub("]", cell)):
            if reference == "not measured":
                continue
            low, high = bounds(reference)
            if day not in days or not days[day][0] <= low <= high <= days[day][1]:
                wrong.append(f"{command}: {day} ref {reference} (docs/benchmarks.md: {days.get(day, 'no row')})")
    return wrong


@pytest.mark.parametrize("command,cell", measured_cells(), ids=[c for c, _ in measured_cells()])
def test_every_measured_time_gives_its_day_and_that_days_reference(command, cell):
    assert not undated_figures(cell), f"README.md, {command}: {undated_figures(cell)}"


def test_each_reference_in_the_readme_is_the_one_measured_that_day():
    assert len(REFERENCE_DAYS) >= 5, "docs/benchmarks.md's 'Reference speed' table is gone"
    assert not misquoted_references(measured_cells())


@pytest.mark.parametrize("cell,problem", [
    ("3 min 01 s", "no '(YYYY-MM-DD; ref R ms)'"),
    ("3 min 01 s (2026-11-26)", "no '(YYYY-MM-DD; ref R ms)'"),
    ("3 min 01 s (2026-11-26; ref 5.33 ms); 6.3 min (2026-11-28)", "2026-11-28 without '; ref R ms'"),
    ("41 s (2026-12-05; ref 5.3 ms; [why](docs/verdicts.md#size-2026-12-05)) and 53 s on 2026-11-23",
     "2026-11-23 without '; ref R ms'"),
])
def test_the_check_finds_a_time_without_its_day_or_reference(cell, problem):
    assert undated_figures(cell) == [problem]


@pytest.mark.parametrize("cell", [
    "3 min 01 s (2026-11-26; ref 5.33 ms); 6.3 min (2026-11-28; ref 10.7 ms)",
    "7 min 29 s (2026-11-25; ref ~5.4 ms)", "1 min 53 s (2026-11-27; ref 9.3–10.2 ms)",
    "1,333 s (2026-12-05; ref not measured on CI's runner)",
    "41 s (2026-12-05; ref 5.3 ms; [why](docs/verdicts.md#size-2026-12-05))",
])
def test_the_check_passes_a_dated_time(cell):
    assert undated_figures(cell) == []


def test_the_check_finds_a_reference_another_day_measured():
    """A README row that gives 2026-11-28's reference for 2026-11-26 (or a day the docs' table lacks) is caught."""
    days = day_references()
    assert "2026-11-26" in days and "2026-11-28" in days
    slow = f"{days['2026-11-28'][1]} ms"
    assert len(misquoted_references([("x", f"3 min 01 s (2026-11-26; ref {slow})"),
                                     ("y", "3 min (1999-01-01; ref 5.0 ms)")])) == 2
