"""Load CI test histories into one normalized structure that only looks backwards.

Two public formats exist, and users will have one or the other:

* RETECS (Spieker et al., ISSTA 2017), `;`-delimited:
  `Id;Name;Duration;CalcPrio;LastRun;LastResults;Verdict;Cycle`. One row per test
  execution; `Verdict` 1 = failed; `LastResults` lists the test's previous verdicts,
  most recent first; `LastRun` is when it last ran; `Duration` is the test's duration
  as RETECS approximates it from previous executions. These three columns are
  pre-cycle information and are used as given (the same test name can occur several
  times in one cycle, so recomputing the history from the sequence would be ambiguous).
* "Enriched" (Bagherzadeh, Kahani and Briand, TSE 2021), `,`-delimited: one row per
  test class and cycle (`cycle_id` is a commit hash, cycles are in file order), with
  `current_failures` (> 0 = the class failed in this cycle), `time` (its duration in
  this cycle), `time_since` (time since it last ran) and code-complexity metrics.
  The verdict history and the duration estimate are recomputed here from the sequence
  of cycles: `failures_%` describes the current cycle (it would leak the verdict) and
  recomputing allows any history window, not just the four precomputed columns.

Whatever the format, `CIHistory` holds per-row arrays grouped by cycle in time order, and
everything a feature may use is known before the cycle runs; the verdicts and the actual
durations of a cycle are kept apart as outcomes (for rewards and metrics only).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from envs.agents.testprio.config import HISTORY_CAPACITY
from envs.errors import InputError

RETECS = "retecs"
ENRICHED = "enriched"
DELIMITERS = {RETECS: ";", ENRICHED: ","}
# The usual history windows of the two papers' experiments.
# Several histories pooled into one (`pooled_history`), possibly of both formats.
POOLED = "pooled"
DEFAULT_HISTORY_WINDOW = {RETECS: 10, ENRICHED: 4, POOLED: 10}

RETECS_HEADER = ("Id", "Name", "Duration", "CalcPrio", "LastRun", "LastResults", "Verdict", "Cycle")
RETECS_REQUIRED = ("Name", "Duration", "LastRun", "LastResults", "Verdict", "Cycle")
ENRICHED_REQUIRED = ("test_class_name", "cycle_id", "tests", "current_failures", "time", "time_since")
# Enriched columns that are outcomes of the cycle or history this module recomputes;
# every other numeric column (test count, complexity metrics) becomes a static feature.
ENRICHED_NOT_FEATURES = frozenset(
    {"test_class_name", "cycle_id", "current_failures", "failures_%", "time", "time_0", "time_since"}
    | {f"failures_{k}" for k in range(4)}
)
_NOT_RUN = -1
_HISTORY_LIST = re.compile(r"^\[\s*([01](\s*,\s*[01])*)?\s*\]$")
_SECONDS_PER_DAY = 86400.0


@dataclass(frozen=True)
class CIHistory:
    """A CI history: rows are test executions, grouped by cycle in time order.

    Rows of cycle `c` are `offsets[c]:offsets[c + 1]`. `verdicts` and `durations` are
    the cycle's outcomes; all other per-row arrays are known before the cycle runs.
    """

    source: str
    format: str
    cycle_ids: np.ndarray  # (C,) original cycle ids, in time order
    offsets: np.ndarray  # (C + 1,) int64
    test_ids: np.ndarray  # (N,) str
    verdicts: np.ndarray  # (N,) bool, True = failed (outcome)
    durations: np.ndarray  # (N,) float64, actual duration (outcome; the cost in NAPFD)
    duration_estimates: np.ndarray  # (N,) float64, NaN = unknown
    days_since_last_run: np.ndarray  # (N,) float64, NaN = never ran
    history: np.ndarray  # (N, HISTORY_CAPACITY) int8, most recent first: 1 failed, 0 passed, -1 no run
    prior_runs: np.ndarray  # (N,) int64, all earlier executions (not only the stored window)
    prior_failures: np.ndarray  # (N,) int64
    static_features: np.ndarray  # (N, K) float64, e.g. code-complexity metrics
    static_feature_names: tuple[str, ...]

    @property
    def n_cycles(self) -> int:
        return len(self.cycle_ids)

    @property
    def cycle_sizes(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def failure_rates(self) -> np.ndarray:
        """Failed runs / runs before each row (0 for a new test): the heuristic's second key and a feature, one
        definition for both, so the agent's prior reproduces the heuristic's order exactly."""
        return self.prior_failures / np.maximum(self.prior_runs, 1)

    @property
    def default_history_window(self) -> int:
        return DEFAULT_HISTORY_WINDOW[self.format]

    def rows(self, cycle: int) -> slice:
        """The rows of cycle number `cycle` (0-based position in time order)."""
        return slice(int(self.offsets[cycle]), int(self.offsets[cycle + 1]))

    def head(self, n_cycles: int) -> CIHistory:
        """The first `n_cycles` cycles (the history is causal, so nothing else changes)."""
        if n_cycles >= self.n_cycles:
            return self
        end = int(self.offsets[n_cycles])
        per_row = {
            name: getattr(self, name)[:end]
            for name in (
                "test_ids", "verdicts", "durations", "duration_estimates", "days_since_last_run",
                "history", "prior_runs", "prior_failures", "static_features",
            )
        }
        return CIHistory(
            source=self.source,
            format=self.format,
            cycle_ids=self.cycle_ids[:n_cycles],
            offsets=self.offsets[: n_cycles + 1],
            static_feature_names=self.static_feature_names,
            **per_row,
        )


def pooled_history(histories: list[CIHistory]) -> CIHistory:
    """Several histories as one, each history's cycles after the previous one's, cycle ids prefixed with their file's
    name. Static code metrics are dropped: only some formats have them, and not the same ones."""
    per_row = ("test_ids", "verdicts", "durations", "duration_estimates", "days_since_last_run", "history",
               "prior_runs", "prior_failures")
    starts = np.cumsum([0] + [h.offsets[-1] for h in histories[:-1]])
    offsets = np.concatenate([histories[0].offsets[:1]]
                             + [h.offsets[1:] + start
                                for h, start in zip(histories, starts, strict=True)]).astype(np.int64)
    cycle_ids = np.concatenate([np.asarray([f"{Path(h.source).stem}:{c}" for c in h.cycle_ids], dtype=object)
                                for h in histories])
    rows = {name: np.concatenate([getattr(h, name) for h in histories]) for name in per_row}
    return CIHistory(source=" + ".join(h.source for h in histories), format=POOLED, cycle_ids=cycle_ids,
                     offsets=offsets, static_features=np.zeros((int(offsets[-1]), 0)), static_feature_names=(),
                     **rows)


def load_history(path: str | Path) -> CIHistory:
    """Read a RETECS or enriched CSV (detected from its header) into a `CIHistory`."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file; set env_config.data_path to a RETECS or enriched CSV")
    with path.open(encoding="utf-8-sig") as handle:
        header = handle.readline().strip()
    fmt = _detect_format(path, header)
    try:
        frame = pd.read_csv(path, sep=DELIMITERS[fmt], dtype=str, keep_default_na=False, encoding="utf-8-sig")
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        message = " ".join(str(exc).split())
        raise InputError(f"{path}: cannot parse as {fmt} CSV ({message}); fix the malformed line") from exc
    return parse_retecs(frame, str(path)) if fmt == RETECS else parse_enriched(frame, str(path))


def _detect_format(path: Path, header: str) -> str:
    columns = [c.strip() for c in re.split(r"[;,\t]", header)]
    overlap = {fmt: len(set(required) & set(columns)) for fmt, required in
               ((RETECS, RETECS_REQUIRED), (ENRICHED, ENRICHED_REQUIRED))}
    fmt = max(overlap, key=overlap.get)
    if overlap[fmt] < 2:
        raise InputError(
            f"{path}: unrecognized header {header[:80]!r}; expected the RETECS header "
            f"{';'.join(RETECS_HEADER)!r} or an enriched header starting 'test_class_name,cycle_id,...'"
        )
    delimiter = DELIMITERS[fmt]
    if delimiter not in header:
        found = next((d for d in ";,\t" if d in header), None)
        raise InputError(
            f"{path}: the header looks like the {fmt} format but is delimited by {found!r}, not "
            f"{delimiter!r}; re-save the file with {delimiter!r} as the separator"
        )
    return fmt


def parse_retecs(frame: pd.DataFrame, source: str) -> CIHistory:
    """Normalize a RETECS table (one row per test execution) read from `source`."""
    _require_columns(frame, RETECS_REQUIRED, RETECS, source)
    _require_rows(frame, source)
    cycles = _integers(frame, "Cycle", source)
    durations = _numbers(frame, "Duration", source, non_negative=True)
    verdicts = _integers(frame, "Verdict", source)
    bad = np.flatnonzero((verdicts != 0) & (verdicts != 1))
    if bad.size:
        raise InputError(
            f"{source}: column Verdict, row {_line(bad[0])}: {frame['Verdict'].iloc[bad[0]]!r} is not 0 "
            f"(passed) or 1 (failed); fix the verdict"
        )
    last_run = pd.to_datetime(frame["LastRun"], format="ISO8601", errors="coerce")
    bad = np.flatnonzero(last_run.isna().to_numpy())
    if bad.size:
        raise InputError(
            f"{source}: column LastRun, row {_line(bad[0])}: {frame['LastRun'].iloc[bad[0]]!r} is not a "
            f"timestamp; write it like 2016-10-25 16:20:00"
        )
    past = _parse_last_results(frame["LastResults"], source)

    order = np.argsort(cycles, kind="stable")
    cycle_ids, starts = np.unique(cycles[order], return_index=True)
    offsets = np.append(starts, len(order)).astype(np.int64)
    last_run_s = last_run.to_numpy()[order].astype("datetime64[s]").astype(np.float64)
    cycle_time = np.maximum.reduceat(last_run_s, starts)
    days_since = (np.repeat(cycle_time, np.diff(offsets)) - last_run_s) / _SECONDS_PER_DAY

    history = np.full((len(order), HISTORY_CAPACITY), _NOT_RUN, dtype=np.int8)
    prior_runs = np.zeros(len(order), dtype=np.int64)
    prior_failures = np.zeros(len(order), dtype=np.int64)
    for row, original in enumerate(order):
        runs = past[original]
        kept = runs[:HISTORY_CAPACITY]
        history[row, : len(kept)] = kept
        prior_runs[row] = len(runs)
        prior_failures[row] = sum(runs)
    days_since[prior_runs == 0] = np.nan
    duration = durations[order]
    return CIHistory(
        source=source,
        format=RETECS,
        cycle_ids=cycle_ids,
        offsets=offsets,
        test_ids=frame["Name"].astype(str).to_numpy(dtype=object)[order],
        verdicts=verdicts[order].astype(bool),
        durations=duration,
        duration_estimates=duration.copy(),
        days_since_last_run=days_since,
        history=history,
        prior_runs=prior_runs,
        prior_failures=prior_failures,
        static_features=np.zeros((len(order), 0)),
        static_feature_names=(),
    )


def parse_enriched(frame: pd.DataFrame, source: str) -> CIHistory:
    """Normalize an enriched table (one row per test class and cycle, cycles in file order)."""
    _require_columns(frame, ENRICHED_REQUIRED, ENRICHED, source)
    _require_rows(frame, source)
    for column in ("test_class_name", "cycle_id"):
        blank = np.flatnonzero(_blank(frame[column]))
        if blank.size:
            raise InputError(
                f"{source}: column {column}, row {_line(blank[0])} is empty; every row must name its test "
                f"class and CI cycle (fill it in or drop the row)"
            )
    names = frame["test_class_name"].astype(str).str.strip()
    cycle_keys = frame["cycle_id"].astype(str).str.strip()
    duplicated = np.flatnonzero(pd.DataFrame({"n": names, "c": cycle_keys}).duplicated().to_numpy())
    if duplicated.size:
        row = duplicated[0]
        raise InputError(
            f"{source}: row {_line(row)}: test class {names.iloc[row]!r} appears twice in cycle "
            f"{cycle_keys.iloc[row]!r}; keep one row per test class and cycle"
        )
    failures = _numbers(frame, "current_failures", source, non_negative=True)
    durations = _numbers(frame, "time", source, non_negative=True)
    time_since = _numbers(frame, "time_since", source, non_negative=True)
    static_names = tuple(c for c in frame.columns if c not in ENRICHED_NOT_FEATURES)
    static = np.column_stack([_numbers(frame, c, source) for c in static_names]) if static_names else (
        np.zeros((len(frame), 0)))

    codes, cycle_ids = pd.factorize(cycle_keys, sort=False)
    order = np.argsort(codes, kind="stable")
    offsets = np.append(np.searchsorted(codes[order], np.arange(len(cycle_ids))), len(order)).astype(np.int64)
    ordered = pd.DataFrame(
        {"name": names.to_numpy()[order], "failed": failures[order] > 0, "time": durations[order]}
    )
    by_test = ordered.groupby("name", sort=False)
    prior_runs = by_test.cumcount().to_numpy(dtype=np.int64)
    failed = ordered["failed"].to_numpy()
    prior_failures = by_test["failed"].cumsum().to_numpy(dtype=np.int64) - failed
    history = np.full((len(order), HISTORY_CAPACITY), _NOT_RUN, dtype=np.int8)
    failed_as_float = ordered["failed"].astype(float)
    for lag in range(HISTORY_CAPACITY):
        past = failed_as_float.groupby(ordered["name"], sort=False).shift(lag + 1).to_numpy()
        if np.isnan(past).all():
            break
        history[~np.isnan(past), lag] = past[~np.isnan(past)]
    days_since = time_since[order].copy()
    days_since[prior_runs == 0] = np.nan
    return CIHistory(
        source=source,
        format=ENRICHED,
        cycle_ids=np.asarray(cycle_ids, dtype=object),
        offsets=offsets,
        test_ids=ordered["name"].to_numpy(dtype=object),
        verdicts=failed,
        durations=durations[order],
        duration_estimates=by_test["time"].shift(1).to_numpy(dtype=np.float64),
        days_since_last_run=days_since,
        history=history,
        prior_runs=prior_runs,
        prior_failures=prior_failures,
        static_features=static[order],
        static_feature_names=static_names,
    )


def _parse_last_results(column: pd.Series, source: str) -> list[list[int]]:
    """Parse `[0, 1, 0]` lists; identical strings are parsed once (they repeat a lot)."""
    parsed: dict[str, list[int]] = {}
    out: list[list[int]] = []
    for row, text in enumerate(column.astype(str)):
        runs = parsed.get(text)
        if runs is None:
            if not _HISTORY_LIST.match(text.strip()):
                raise InputError(
                    f"{source}: column LastResults, row {_line(row)}: {text!r} is not a list of previous "
                    f"verdicts; write it like [0, 1, 0] (0 passed, 1 failed, most recent first; [] if none)"
                )
            inner = text.strip()[1:-1]
            runs = [int(v) for v in inner.split(",")] if inner.strip() else []
            parsed[text] = runs
        out.append(runs)
    return out


def _require_columns(frame: pd.DataFrame, required: tuple[str, ...], fmt: str, source: str) -> None:
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise InputError(
            f"{source}: missing column(s) {', '.join(missing)} for the {fmt} format; add them to the header "
            f"(required: {DELIMITERS[fmt].join(required)})"
        )


def _require_rows(frame: pd.DataFrame, source: str) -> None:
    if frame.empty:
        raise InputError(
            f"{source}: the file has a header but no test verdicts; it needs at least one CI cycle"
        )


def _blank(values: pd.Series) -> np.ndarray:
    return (values.isna() | (values.astype(str).str.strip() == "")).to_numpy()


def _numbers(frame: pd.DataFrame, column: str, source: str, *, non_negative: bool = False) -> np.ndarray:
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(values) | ((values < 0) if non_negative else False))
    if bad.size:
        row = bad[0]
        raw = frame[column].iloc[row]
        if _blank(frame[column].iloc[[row]])[0] and column in ("Cycle", "cycle_id"):
            raise InputError(
                f"{source}: column {column}, row {_line(row)} is empty; every verdict must belong to a CI "
                f"cycle (fill in the cycle or drop the row)"
            )
        kind = "a non-negative number" if non_negative else "a number"
        raise InputError(f"{source}: column {column}, row {_line(row)}: {raw!r} is not {kind}; fix the value")
    return values


def _integers(frame: pd.DataFrame, column: str, source: str) -> np.ndarray:
    values = _numbers(frame, column, source)
    bad = np.flatnonzero(values != np.round(values))
    if bad.size:
        raise InputError(
            f"{source}: column {column}, row {_line(bad[0])}: {frame[column].iloc[bad[0]]!r} is not an "
            f"integer; fix the value"
        )
    return values.astype(np.int64)


def _line(row: int) -> int:
    """The 1-based file line of a data row (the header is line 1)."""
    return int(row) + 2
