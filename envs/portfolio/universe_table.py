"""A universe's wide table (`ASSET:field` columns, one row per bar time), read and checked as a bars file is.

A table is a CSV (as pandas writes one, its unnamed index first, or with a named time column) or a parquet (a
universe written by `experiments.data import --universe`, which records its timeframe, calendar and gap rule). Each
asset's columns go through the same checks as one imported bars file (envs.trading.bar_checks): late listings and
delistings left out, duplicates, broken cells under the gap rule, the calendar, gaps, high below low; so a defect
gets the same answer in both families. A table that records no timeframe gets the one its bars' spacing names.
What the checks did is said once per file (stderr) and returned for the importer to print.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from envs.datasets import read_bytes
from envs.errors import InputError
from envs.trading.bar_checks import check_bars, close_only_bars
from envs.trading.calendar import detect_calendar, timeframe_delta
from envs.trading.csv_import import numeric_column, parse_times
from envs.trading.data import (
    BAR_COLUMNS,
    GAP_POLICIES,
    check_spacing,
    infer_timeframe,
    is_parquet,
    say_once,
)

WIDE_SEPARATOR = ":"
FIELDS = set(BAR_COLUMNS)
TIMEFRAME_KEY = "environment.env_config.timeframe"
UNIVERSE_KIND = "universe"  # a parquet's `kind` metadata: a whole universe, as the importer wrote it
DEFAULT_GAPS = "ffill"      # the importer's default rule, for a table that records none
# Epoch numbers before this in the first column are row numbers (0, 1, 2, ...), not times: no exchange exported epoch
# stamps of 1970s bars (dates written as text may be as old as they like).
EARLIEST_EPOCH = pd.Timestamp("1980-01-01", tz="UTC")


@dataclass(frozen=True)
class CheckedTable:
    """Each asset's checked bars (OHLCV, or the close only), and what the checks found."""

    frames: dict[str, pd.DataFrame]
    close_only: bool
    timeframe: str
    calendar: str
    gaps: str
    notes: tuple[str, ...]  # one line per thing done to an asset (filled cells, late listing, ...)

    def wide(self) -> pd.DataFrame:
        """The assets' bars as one wide table on the union of their bar times (empty where an asset has no bar)."""
        columns = {f"{asset}{WIDE_SEPARATOR}{field}": frame[field]
                   for asset, frame in self.frames.items() for field in frame.columns}
        table = pd.DataFrame(columns)
        table.index.name = "timestamp"
        return table


def asset_field(column: str) -> tuple[str, str] | None:
    """`BTC:close` -> ("BTC", "close"); None for a column that is not an asset's bar field (pandas' `Unnamed: 0`)."""
    asset, separator, field = str(column).partition(WIDE_SEPARATOR)
    field = field.strip().lower()
    return (asset.strip(), field) if separator and asset.strip() and field in FIELDS else None


def read_table(path: str, text: str | None = None) -> pd.DataFrame:
    """The table as written, on a UTC time index (its first column when a CSV), its metadata in `attrs`. `text`: a
    CSV's lines parsed in place of the file's (a paper-trading session's header and rows not read yet)."""
    data = read_bytes(path, "wide table") if text is None else text.encode()
    if is_parquet(path):
        try:
            frame = pd.read_parquet(io.BytesIO(data))
        except Exception as exc:  # pyarrow raises several unrelated types for a corrupt file
            raise InputError(f"{path}: not a readable parquet file ({type(exc).__name__}): write it again") from None
        if isinstance(frame.index, pd.DatetimeIndex):
            return frame if frame.index.tz is not None else frame.tz_localize("UTC")
    else:
        try:
            frame = pd.read_csv(io.BytesIO(data))
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise InputError(f"{path}: cannot parse as CSV ({type(exc).__name__}): check the delimiter") from None
    if frame.empty or not len(frame.columns):
        raise InputError(f"{path}: the table has no rows: export it again")
    time_column = frame.columns[0]
    if asset_field(str(time_column)):
        raise InputError(f"{path}: a wide table needs its time as the first column; found {time_column!r} there: "
                         "put the bar times first (pandas' to_csv writes its index there)")
    times = frame.pop(time_column)
    try:  # ISO dates or epoch numbers, as imports; the header is free (pandas writes `Unnamed: 0` for its index)
        stamps = parse_times(times, path, str(time_column))
    except InputError as error:
        raise InputError(f"{error} (a wide table's first column is its bar times)") from None
    if pd.api.types.is_numeric_dtype(times) and len(stamps) and stamps.min() < EARLIEST_EPOCH:
        raise InputError(f"{path}: the first column {time_column!r} read as epoch times puts a bar at {stamps.min()}: "
                         "a row number, not a time: write the table with its bar times first (pandas: a "
                         "DatetimeIndex, then to_csv)")
    return frame.set_index(stamps.rename("timestamp"))


def check_table(path: str, assets: list[str] | None, timeframe: str | None, gaps: str | None = None,
                calendar: str | None = None, say: bool = True, text: str | None = None) -> CheckedTable:
    """Each of `assets` (None: all) checked as one bars file; see the module docstring. `gaps` and `calendar` (the
    importer's --gaps and --calendar) default to what the table records, else the importer's defaults. `say`: print
    what was done on stderr, once per file (a caller that prints the notes itself passes False). `text`: a CSV's
    lines to check in place of the file's (`read_table`). Each asset's bars record the calendar they were checked on,
    which a check of rows appended later is given (a few rows show none)."""
    table = read_table(path, text)
    fields: dict[str, dict[str, str]] = {}
    for column in table.columns:
        if parsed := asset_field(column):
            fields.setdefault(parsed[0], {})[parsed[1]] = column
    found = ", ".join(fields) or "none"
    wanted = assets or list(fields)
    missing = [asset for asset in wanted if asset not in fields]
    if missing:
        raise InputError(f"{path}: the wide table has no columns for {', '.join(missing)} (assets in it: {found}): "
                         "fix environment.env_config.assets, or add ASSET:close columns")
    index = table.index.sort_values().unique()
    timeframe = _timeframe(index, timeframe or table.attrs.get("timeframe"), path)
    gaps = gaps or table.attrs.get("gaps") or DEFAULT_GAPS
    calendar = calendar or table.attrs.get("calendar")
    if gaps not in GAP_POLICIES:
        raise InputError(f"{path}: unknown gap rule {gaps!r}: use one of {', '.join(GAP_POLICIES)}")
    close_only = not all(FIELDS <= set(fields[asset]) for asset in wanted)
    frames: dict[str, pd.DataFrame] = {}
    notes: list[str] = []
    for asset in wanted:
        if "close" not in fields[asset]:
            raise InputError(f"{path}: asset {asset} has no {asset}{WIDE_SEPARATOR}close column: add it")
        bars, checks = check_bars(_asset_bars(table, fields[asset], close_only, path), path, timeframe, gaps, asset,
                                  listing=True, calendar=calendar)
        notes += [line if asset in line else f"{asset}: {line}" for line in checks.lines()
                  if line != "gaps: no gaps" and not line.startswith("calendar:")]
        bars = bars[["close"]] if close_only else bars
        bars.attrs = {"timeframe": timeframe, "calendar": checks.calendar}
        frames[asset] = bars
    for note in notes if say else ():
        say_once(path, note)
    calendar = calendar or detect_calendar(index, timeframe)
    return CheckedTable(frames, close_only, timeframe, calendar, gaps, tuple(notes))


def _timeframe(index: pd.DatetimeIndex, given: str | None, path: str) -> str:
    """The given timeframe, held to the bars' spacing, or the one the spacing names."""
    if not given:
        return infer_timeframe(index, path, TIMEFRAME_KEY)
    timeframe_delta(given)
    check_spacing(index, given, f"{path} ({TIMEFRAME_KEY})")
    return given


def _asset_bars(table: pd.DataFrame, columns: dict[str, str], close_only: bool, path: str) -> pd.DataFrame:
    """One asset's columns as numbers (text in a cell refused, naming it), as bars the checks take."""
    numbers = {field: numeric_column(table[column], path, column) for field, column in columns.items()}
    if close_only:
        return close_only_bars(pd.Series(numbers["close"], index=table.index))
    return pd.DataFrame({field: numbers[field] for field in BAR_COLUMNS}, index=table.index)


def save_universe(checked: CheckedTable, out: str | Path) -> Path:
    """Write the checked universe as one parquet with its timeframe, calendar and gap rule in the metadata, which
    `table_path` reads back without guessing."""
    out = Path(out)
    table = checked.wide()
    table.attrs = {"kind": UNIVERSE_KIND, "timeframe": checked.timeframe, "calendar": checked.calendar,
                   "gaps": checked.gaps}
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    table.to_parquet(partial)
    partial.replace(out)  # nothing half-written under the name
    return out


def span_of(checked: CheckedTable) -> tuple[pd.Timestamp, pd.Timestamp, int]:
    """The first and last bar time over all assets, and the number of distinct bar times."""
    stamps = np.unique(np.concatenate([frame.index.as_unit("ns").asi8 for frame in checked.frames.values()]))
    first, last = (pd.Timestamp(value, tz="UTC") for value in (stamps[0], stamps[-1]))
    return first, last, len(stamps)
