"""OHLCV bars: import common CSV exports, validate, store and load as parquet.

A bar table has a UTC `DatetimeIndex` named `timestamp` and float columns
open/high/low/close/volume (a file indexed in another zone is converted to UTC on load, and says so).
Everything that reads market data goes through `validate_bars`, so a NaN, a negative price, a duplicated
timestamp or a gap is reported with the file name and the fix instead of silently skewing a backtest.
"""
from __future__ import annotations

import hashlib
import io
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from envs.datasets import digest_of, is_uri, read_bytes
from envs.errors import InputError
from envs.trading.calendar import (
    ALL_WEEK,
    TIMEFRAMES,
    check_open_days,
    closed_bars,
    closed_bars_between,
    timeframe_delta,
)

PRICE_COLUMNS = ("open", "high", "low", "close")
BAR_COLUMNS = (*PRICE_COLUMNS, "volume")
GAP_POLICIES = ("error", "ffill", "drop")
_SAID: set[tuple[str, str]] = set()  # (file, note) already printed by this process
GAPS_KEPT = "drop"  # the policy that keeps holes: the file records it, and every reader steps over them


@dataclass(frozen=True)
class GapReport:
    """Missing bars found in a series: how many, and the longest hole."""

    missing_bars: int
    longest_gap: pd.Timedelta
    longest_gap_start: pd.Timestamp | None

    def describe(self) -> str:
        if not self.missing_bars:
            return "no gaps"
        return (f"{self.missing_bars} missing bars, longest gap {self.longest_gap} "
                f"after {self.longest_gap_start}")


def bar_spacing(index: pd.DatetimeIndex) -> pd.Timedelta:
    """The most common distance between consecutive bars: the data's own timeframe, gaps or not."""
    deltas = pd.Series(index[1:] - index[:-1])
    return deltas.mode().min() if len(deltas) else pd.Timedelta(0)


def infer_timeframe(index: pd.DatetimeIndex, source: str, key: str) -> str:
    """The timeframe the bars' spacing names (a file that records none, e.g. a CSV table): the most common distance
    between consecutive bars, when it is a known timeframe and at least half of the distances are it (weekends and
    holes are longer); otherwise an InputError saying what was found and that `key` sets it."""
    deltas = pd.Series(index[1:] - index[:-1])
    spacing = bar_spacing(index)
    share = float((deltas == spacing).mean()) if len(deltas) else 0.0
    name = next((name for name, delta in TIMEFRAMES.items() if delta == spacing), None)
    if name is None or share < 0.5:
        found = f"{_duration(spacing)} apart for {share:.0%} of them" if len(deltas) else "a single bar"
        raise InputError(f"{source}: cannot tell the timeframe from the bars' spacing (the most common: {found}): "
                         f"set {key} (one of {', '.join(TIMEFRAMES)})")
    return name


def _duration(delta: pd.Timedelta) -> str:
    seconds = int(delta.total_seconds())
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def check_spacing(index: pd.DatetimeIndex, timeframe: str, source: str) -> None:
    """A declared timeframe must be the bars' spacing: annualization and every Sharpe depend on it.

    Bars closer together than the timeframe always contradict it. Bars further apart do only when most
    of them are (a few long deltas are gaps, reported as such)."""
    if len(index) < 2:
        return
    step = timeframe_delta(timeframe)
    deltas = index[1:] - index[:-1]
    spacing = bar_spacing(index)
    coarser = spacing > step and len(deltas) >= 2 and (deltas == spacing).mean() > 0.5
    if spacing < step or coarser:
        actual = next((name for name, delta in TIMEFRAMES.items() if delta == spacing), _duration(spacing))
        raise InputError(f"{source}: timeframe {timeframe!r} contradicts the data, whose bars are {actual} apart: "
                         f"use timeframe {actual}")


def find_gaps(index: pd.DatetimeIndex, timeframe: str, calendar: str = ALL_WEEK) -> GapReport:
    """Bars missing between consecutive bars, beyond those the calendar closes (a weekdays file's weekends; an
    exchange's weekends and holidays)."""
    step = timeframe_delta(timeframe)
    if len(index) < 2:
        return GapReport(0, pd.Timedelta(0), None)
    step64 = np.timedelta64(step)
    open_time = (index[1:] - index[:-1]).to_numpy() - closed_bars_between(index, timeframe, calendar) * step64
    missing = ((open_time // step64) - 1).clip(min=0)
    if not missing.any():
        return GapReport(0, pd.Timedelta(0), None)
    worst = int(np.argmax(open_time))
    return GapReport(int(missing.sum()), pd.Timedelta(open_time[worst]) - step, index[worst])


def drop_exact_duplicates(bars: pd.DataFrame, path: Path) -> tuple[pd.DataFrame, int]:
    """Keep one of rows repeated to the letter (and count them); two different bars at one timestamp are
    an error."""
    duplicated_time = bars.index.duplicated(keep="first")
    if not duplicated_time.any():
        return bars, 0
    exact = bars.reset_index().duplicated(keep="first").to_numpy()
    if (duplicated_time & ~exact).any():
        stamp = bars.index[np.flatnonzero(duplicated_time & ~exact)[0]]
        raise InputError(f"{path}: two different bars share the timestamp {stamp}: "
                         "remove one of them from the export")
    return bars[~duplicated_time], int(duplicated_time.sum())


def off_grid_bars(index: pd.DatetimeIndex, timeframe: str) -> np.ndarray:
    """Which stamps are not bar opening times: a 1h bar opens at :00, a 4h bar at 00, 04, ... UTC, a daily
    bar at midnight UTC (exchanges align them so; a stamp at 10:30 is another timeframe or a close time)."""
    epoch = pd.Timestamp("1970-01-01", tz="UTC")
    return np.asarray((index - epoch) % timeframe_delta(timeframe) != pd.Timedelta(0))


def regularize(bars: pd.DataFrame, timeframe: str, gaps: str, report: GapReport, path: Path,
               calendar: str = ALL_WEEK) -> pd.DataFrame:
    """Check the timeframe grid and apply the gap policy (shared by the CSV importer and the fetcher); `report` is
    find_gaps' under `calendar`, whose closed days (a weekdays file's weekends; an exchange's weekends and holidays)
    get no flat bars."""
    off_grid = off_grid_bars(bars.index, timeframe)
    if off_grid.any():
        raise InputError(f"{path}: bar at {bars.index[np.argmax(off_grid)]} is not on the {timeframe} grid "
                         f"(bars open at multiples of {timeframe} from 00:00 UTC): check --timeframe")
    check_spacing(bars.index, timeframe, f"{path} (--timeframe)")
    if not report.missing_bars or gaps == "drop":
        return bars
    if gaps == "error":
        raise InputError(f"{path}: {report.describe()}: re-import with --gaps ffill (flat bars) or --gaps drop")
    full = pd.date_range(bars.index[0], bars.index[-1], freq=timeframe_delta(timeframe), name="timestamp")
    full = full[~closed_bars(full, timeframe, calendar)]
    filled = bars.reindex(full)
    close = filled["close"].ffill()
    for column in ("open", "high", "low"):
        filled[column] = filled[column].fillna(close)
    filled["close"] = close
    filled["volume"] = filled["volume"].fillna(0.0)
    return filled


def check_coarser(timeframe: str, base_timeframe: str, where: str) -> None:
    """Bars of `timeframe` can be made from bars of `base_timeframe` only if it is a whole multiple of it."""
    step, base = timeframe_delta(timeframe), timeframe_delta(base_timeframe)
    if step <= base or step % base:
        coarser = [name for name, delta in TIMEFRAMES.items() if delta > base and not delta % base]
        raise InputError(f"{where}: {timeframe} is not a multiple of the bars' {base_timeframe}: use one of "
                         f"{', '.join(coarser) or 'none'}")


def resample_bars(frame: pd.DataFrame, timeframe: str, base_timeframe: str) -> pd.DataFrame:
    """OHLCV bars of `timeframe` (on its UTC grid, stamped at their open) from finer bars; empty periods (holes in
    data imported with --gaps drop) are left out, and a first or last period the data covers only partly is
    dropped (it was not a whole bar)."""
    step = timeframe_delta(timeframe)
    per_bar = int(step // timeframe_delta(base_timeframe))
    grouped = frame.resample(step, origin="epoch", label="left", closed="left")
    higher = pd.DataFrame({"open": grouped["open"].first(), "high": grouped["high"].max(),
                           "low": grouped["low"].min(), "close": grouped["close"].last(),
                           "volume": grouped["volume"].sum()})
    counts = grouped["close"].count()
    whole = counts > 0
    if whole.any():
        occupied = np.flatnonzero(whole.to_numpy())
        for edge in (occupied[0], occupied[-1]):
            if counts.iloc[edge] < per_bar:
                whole.iloc[edge] = False
    higher = higher[whole.to_numpy()]
    higher.index.name = frame.index.name
    return higher


def zone_note(index: pd.DatetimeIndex) -> str:
    """The note that stamps in another zone than UTC are converted to UTC ('' for UTC or naive stamps, read as
    UTC): bars open on the UTC grid and daily blocks start at 00:00 UTC, so New York stamps kept as such would
    shift every daily row by five hours."""
    if index.tz is None or str(index.tz) == "UTC":
        return ""
    return f"timestamps in {index.tz} converted to UTC"


def say_once(source: str, note: str) -> None:
    """Print a load-time note on stderr, once per file per process: bars have no other channel for notes, and
    every env copy of a run validates the same file."""
    if (source, note) not in _SAID:
        _SAID.add((source, note))
        print(f"{source}: {note}", file=sys.stderr)


def validate_bars(bars: pd.DataFrame, source: str, timeframe: str | None = None,
                  allow_gaps: bool = False, calendar: str = ALL_WEEK) -> pd.DataFrame:
    """Check the invariants every consumer relies on; return the bars as float64 columns, indexed in UTC (stamps
    of another zone are converted, and that is said once per `source`). Under the `calendar` recorded by the import
    (weekdays, or an exchange code such as XNYS) the days it closes are not gaps, and a bar on one contradicts it."""
    missing = [c for c in BAR_COLUMNS if c not in bars.columns]
    if missing:
        raise InputError(f"{source}: missing column(s) {', '.join(missing)}: re-import with "
                         "python -m experiments.data import")
    if not isinstance(bars.index, pd.DatetimeIndex):
        raise InputError(f"{source}: the index must be UTC timestamps: "
                         "re-import with python -m experiments.data import")
    if bars.index.tz is None:  # naive stamps are read as UTC, as everywhere else (CSV exports, outside series)
        bars = bars.tz_localize("UTC")
    if note := zone_note(bars.index):  # the same instants, on the UTC grid every block and stamp check assumes
        say_once(source, note)
        bars = bars.tz_convert("UTC")
    if len(bars) < 2:
        raise InputError(f"{source}: only {len(bars)} bar(s): the environment needs a price history")
    if not bars.index.is_monotonic_increasing or bars.index.has_duplicates:
        raise InputError(f"{source}: timestamps are not strictly increasing: sort and de-duplicate the bars")
    values = bars[list(BAR_COLUMNS)].to_numpy(dtype=np.float64)
    problems = {
        "NaN or infinite values": ~np.isfinite(values).all(axis=1),
        "non-positive prices": (values[:, :4] <= 0).any(axis=1),
        "negative volume": values[:, 4] < 0,
        "high below open/close/low": values[:, 1] < values[:, [0, 2, 3]].max(axis=1) - 1e-9,
        "low above open/close": values[:, 2] > values[:, [0, 3]].min(axis=1) + 1e-9,
    }
    for what, rows in problems.items():
        if rows.any():
            first = int(np.flatnonzero(rows)[0])
            raise InputError(f"{source}: {what} in {int(rows.sum())} bar(s), first at {bars.index[first]}: "
                             "fix or drop those rows in the source export and re-import")
    # An unknown timeframe gets the intraday rule (every UTC day a session touches is open), the looser one.
    check_open_days(bars.index, timeframe or "1h", calendar, source, "the calendar in its metadata",
                    "re-import the whole history with python -m experiments.data import (it records the calendar its "
                    "bars show, or --calendar)")
    if timeframe is not None:
        check_spacing(bars.index, timeframe, source)
    if timeframe is not None and not allow_gaps:
        report = find_gaps(bars.index, timeframe, calendar)
        if report.missing_bars:
            raise InputError(f"{source}: {report.describe()}: re-import with --gaps ffill (flat bars) or "
                             "--gaps drop (keep the holes; the file then records that they are deliberate)")
    return bars[list(BAR_COLUMNS)].astype(np.float64)


def save_bars(bars: pd.DataFrame, path: str | Path, symbol: str, timeframe: str, gaps: str = "ffill",
              calendar: str = ALL_WEEK) -> Path:
    """Write bars as parquet with the symbol, timeframe, gap policy and calendar in the file's metadata. A file
    imported with `gaps="drop"` keeps its holes on purpose: `load_bars` accepts them (the env then steps
    over a hole as from one bar to the next, as over an exchange outage); one of the weekdays `calendar` (or an
    exchange's, such as XNYS) has no bar on a day it closes, and `load_bars` does not count those days as holes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    frame = bars.copy()
    frame.attrs = {"symbol": symbol, "timeframe": timeframe, "gaps": gaps, "calendar": calendar}
    frame.to_parquet(tmp)
    tmp.replace(path)  # never leave a half-written parquet behind
    return path


def is_parquet(path: str | Path) -> bool:
    """Whether a path or URI names a parquet file (an s3:// URI may carry ?endpoint_override=...); else a CSV."""
    return str(path).split("?")[0].endswith(".parquet")


def values_digest(bars: pd.DataFrame, rows: list[tuple[int, int]]) -> str:
    """The digest of what a verdict judges: the bars' values on the row ranges [start, stop) of `rows` (every test
    window), as timestamps in int64 nanoseconds since the epoch (UTC) and the OHLCV columns as little-endian float64,
    in BAR_COLUMNS order. A file's bytes change when the same bars are saved again (another writer, compression or
    metadata) or when bars outside the windows are added or dropped; these values do not, so the trials ledger, keyed
    on them, cannot be escaped that way."""
    picked = np.concatenate([np.arange(start, stop) for start, stop in rows]) if rows else np.arange(0)
    stamps = pd.DatetimeIndex(bars.index[picked]).tz_convert("UTC").as_unit("ns").asi8.astype("<i8")
    values = np.ascontiguousarray(bars.loc[:, list(BAR_COLUMNS)].to_numpy(dtype=np.float64)[picked], dtype="<f8")
    digest = hashlib.sha256(b"timestamp_ns,open,high,low,close,volume\n")
    digest.update(stamps.tobytes())
    digest.update(values.tobytes())
    return digest.hexdigest()


def load_bars(path: str | Path, timeframe: str | None = None) -> pd.DataFrame:
    """Load and validate a bars parquet written by `save_bars` (or any OHLCV parquet), from a local path
    or an s3:// URI. The bytes' digest is kept in `attrs["digest"]`: caches and the trials ledger are keyed
    by content, not by name."""
    hint = "import it with python -m experiments.data import YOUR.csv --symbol SYMBOL --timeframe TF"
    try:
        data = read_bytes(path, "data file")
    except InputError as error:
        raise InputError(f"{error}: {hint}" + (", then upload it there" if is_uri(path) else "")) from None
    try:
        bars = pd.read_parquet(io.BytesIO(data))
    except Exception as exc:  # pyarrow raises several unrelated types for a corrupt file
        raise InputError(f"{path}: not a readable parquet file ({type(exc).__name__}): re-import it") from None
    if "timestamp" in bars.columns:
        stamps = bars.pop("timestamp")  # a zone-aware column keeps its zone, for validate_bars to convert and say
        bars = bars.set_index(pd.DatetimeIndex(stamps if isinstance(stamps.dtype, pd.DatetimeTZDtype)
                                               else pd.to_datetime(stamps, utc=True)))
    declared = bars.attrs.get("timeframe")
    if timeframe and declared and timeframe != declared:
        raise InputError(f"{path}: holds {declared} bars (file metadata) but timeframe {timeframe!r} was asked for: "
                         f"set environment.env_config.timeframe: {declared}, or leave it out")
    valid = validate_bars(bars, source=str(path), timeframe=timeframe or declared,
                          allow_gaps=bars.attrs.get("gaps") == GAPS_KEPT, calendar=bars.attrs.get("calendar", ALL_WEEK))
    valid.attrs = {**bars.attrs, "digest": digest_of(data)}
    return valid
