"""Outside series: any timestamped values (a daily index, a funding rate, an on-chain metric) from CSV or parquet.

A series is validated on load like bars are: a time column (or a parquet's time index) of dates or epoch
numbers (seconds, milliseconds, microseconds or nanoseconds, told apart by their size), UTC (naive stamps
are read as UTC; a parquet's stamps in another zone are converted, and the note says so), sorted oldest
first (a newest-first export is turned around), no two values at one time (exact repeats are dropped and
counted), finite numbers, and a declared NaN policy (`nan: error | drop | ffill`). The value comes back as a
one-column frame named `close`, so transforms and TA-Lib functions of one price apply to it.
"""
from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import pandas as pd

from envs.datasets import read_bytes
from envs.errors import InputError
from envs.trading.csv_import import parse_times
from envs.trading.data import is_parquet, zone_note

TIME_COLUMNS = ("timestamp", "time", "date", "datetime", "Date", "Timestamp", "Time", "Datetime")


@dataclass(frozen=True)
class Series:
    frame: pd.DataFrame  # index: UTC timestamps, one column `close`
    column: str
    note: str            # what loading did that the user should know (repeats dropped, order turned around)


def _read_frame(data: bytes, source: str) -> pd.DataFrame:
    try:
        if is_parquet(source):
            frame = pd.read_parquet(io.BytesIO(data))
            if isinstance(frame.index, pd.DatetimeIndex):
                frame = frame.reset_index()
            return frame
        return pd.read_csv(io.BytesIO(data))
    except Exception as exc:  # pandas and pyarrow raise several unrelated types for a malformed file
        raise InputError(f"{source}: not a readable CSV or parquet file ({type(exc).__name__}): fix the file") from None


def load_series(source: str, column: str | None, nan: str, where: str) -> Series:
    """The series in `source` (a path or s3:// URI), checked; InputError naming the file and the fix."""
    frame = _read_frame(read_bytes(source, "series"), source)
    if frame.empty:
        raise InputError(f"{source}: no rows: an outside series needs values")
    time_column = next((c for c in TIME_COLUMNS if c in frame.columns), None)
    if time_column is None:
        raise InputError(f"{source}: no timestamps: the series needs a time column named one of "
                         f"{', '.join(TIME_COLUMNS[:4])} (dates or epoch numbers)")
    numeric = [c for c in frame.columns if c != time_column and pd.api.types.is_numeric_dtype(frame[c])]
    if column is None:
        if len(numeric) != 1:
            raise InputError(f"{where}: column: {source} has {len(numeric)} numeric columns "
                             f"({', '.join(map(str, numeric)) or 'none'}): name the one to use, e.g. column: "
                             f"{numeric[0] if numeric else 'value'}")
        column = str(numeric[0])
    if column not in frame.columns:
        from envs.validation import did_you_mean

        raise InputError(f"{where}: column: {source} has no column "
                         f"{column!r}{did_you_mean(column, map(str, frame.columns))}")
    values = pd.to_numeric(frame[column], errors="coerce")
    if values.isna().all():
        raise InputError(f"{source}: column {column!r} holds no numbers")
    stamps = frame[time_column]
    index = parse_times(stamps, source, time_column)  # the same instants in UTC, whatever zone a parquet has
    zone = zone_note(pd.DatetimeIndex(stamps)) if isinstance(stamps.dtype, pd.DatetimeTZDtype) else ""
    series = pd.Series(values.to_numpy(dtype=np.float64), index=index, name="close")
    notes = [zone] if zone else []
    if len(series) > 1 and index.is_monotonic_decreasing and not index.is_monotonic_increasing:
        series = series.iloc[::-1]
        notes.append("newest first in the file: turned around")
    if not series.index.is_monotonic_increasing:
        first = int(np.flatnonzero(np.diff(series.index.asi8) < 0)[0]) + 1
        raise InputError(f"{source}: timestamps are not in order (row {first + 1}: {series.index[first]}): "
                         "sort the series by time")
    frame = series.to_frame()
    repeated = frame.index.duplicated(keep="first")
    if repeated.any():
        exact = frame.reset_index().duplicated(keep="first").to_numpy()
        if (repeated & ~exact).any():
            stamp = frame.index[np.flatnonzero(repeated & ~exact)[0]]
            raise InputError(f"{source}: two different values at {stamp}: keep one of them")
        frame = frame[~repeated]
        notes.append(f"{int(repeated.sum())} repeated row(s) dropped")
    frame = _apply_nan_policy(frame, nan, source, where)
    if not np.isfinite(frame["close"].to_numpy()).all():
        raise InputError(f"{source}: infinite values in {column!r}: fix the export")
    return Series(frame, column, "; ".join(notes))


def _apply_nan_policy(frame: pd.DataFrame, nan: str, source: str, where: str) -> pd.DataFrame:
    missing = frame["close"].isna()
    if not missing.any():
        return frame
    if nan == "error":
        raise InputError(f"{source}: {int(missing.sum())} empty or non-numeric value(s), first at "
                         f"{frame.index[np.argmax(missing.to_numpy())]}: fix them, or set nan: drop or nan: ffill "
                         f"in {where}")
    if nan == "drop":
        return frame[~missing]
    return frame.ffill().dropna()
