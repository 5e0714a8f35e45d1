"""Append new bars to a stored dataset (local or s3://) without rewriting its history: from a CSV export, a bars
parquet or an exchange. `python -m experiments.data update` and paper trading's `--exchange` both call
`update_dataset`; envs.trading.bars_update plans the update, experiments.storage.dataset_versions keeps the old
version and writes the new one atomically.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from envs.errors import InputError
from envs.trading.bars_update import NewBars, dataset_identity, plan_update, timeframe_mismatch
from envs.trading.calendar import ALL_WEEK
from envs.trading.csv_import import ImportReport, import_csv
from envs.trading.data import TIMEFRAMES, load_bars, timeframe_delta
from envs.trading.symbols import canonical_symbol, check_symbol


@dataclass(frozen=True)
class BarsSource:
    """Where an update's new bars come from: a CSV or parquet file, or an exchange (ccxt id) to fetch from."""

    source_file: Path | None = None
    fetch: str | None = None
    symbol: str | None = None  # the CSV's symbol, when it is not the dataset's
    stamps: str = "open"


def update_dataset(source: BarsSource, path: str, gaps: str | None = None, force: bool = False) -> list[str]:
    """Append `source`'s new bars to the dataset at `path` (the old version kept beside it); the lines that say what
    changed. `python -m experiments.data update` and paper trading's fetch both call this."""
    from experiments.storage.dataset_versions import open_dataset, replace_dataset

    dataset, stored = open_dataset(path)
    symbol, timeframe = dataset_identity(stored, path)
    notes: list[str] = []
    if source.fetch:
        from envs.trading.fetch import fetch_bars

        # From one bar before the last stored one: fetch_bars needs two closed bars, and the overlap shows
        # whether the exchange still has the stored bars as they are.
        result = fetch_bars(symbol, timeframe, source.fetch, since=stored.index[-1] - timeframe_delta(timeframe),
                            gaps="drop")
        new = NewBars(result.bars, f"{result.exchange} {result.market}", symbol, timeframe)
    elif source.source_file.suffix == ".parquet":
        bars = load_bars(source.source_file)
        new = NewBars(bars, str(source.source_file), bars.attrs.get("symbol"), bars.attrs.get("timeframe"))
    else:
        new, notes = _csv_bars(source, stored, symbol, timeframe, path)
    update = plan_update(stored, new, path, gaps or stored.attrs.get("gaps", "ffill"), force)
    if not update.changed:
        return [update.unchanged_line(path)]
    kept = replace_dataset(dataset, update.bars, stored.attrs["digest"], symbol, timeframe,
                           stored.attrs.get("gaps", "ffill"), stored.attrs.get("calendar", ALL_WEEK))
    return [*update.lines(), *notes, f"previous version kept as {kept}", f"wrote {path}"]


def _csv_bars(args: BarsSource, stored: pd.DataFrame, symbol: str, timeframe: str, path: str
              ) -> tuple[NewBars, list[str]]:
    """A CSV export's bars, holes kept (the update fills them from the last stored close), and the import's notes
    (without its gaps line: the update reports the gaps in what it appends). The bars are labelled with the
    market the file states, else --symbol, else the dataset's; a --symbol the file contradicts is refused."""
    csv_symbol = canonical_symbol(args.symbol) if args.symbol else symbol

    def read(tf: str) -> tuple[pd.DataFrame, ImportReport]:
        return import_csv(args.source_file, tf, gaps="drop", symbol=csv_symbol, stamps=args.stamps,
                          allow_no_volume=not stored["volume"].any())  # a dataset imported with --no-volume

    try:
        bars, report = read(timeframe)
    except InputError:  # bars of another timeframe? then say that, rather than how to import them
        actual = next((tf for tf in TIMEFRAMES if tf != timeframe and _reads_as(read, tf)), None)
        if actual is None:
            raise
        raise timeframe_mismatch(actual, timeframe, str(args.source_file), path) from None
    if args.symbol:
        check_declared(report, csv_symbol, args.source_file)
    notes = [line for line in report.lines() if not line.startswith("gaps:")]
    return NewBars(bars, str(args.source_file), report.symbol or csv_symbol, timeframe), notes


def _reads_as(read: Callable[[str], object], timeframe: str) -> bool:
    try:
        read(timeframe)
    except InputError:
        return False
    return True


def check_declared(report: ImportReport, symbol: str, source: Path) -> None:
    """--symbol names the file's bars; a file that states another market (its Symbol or `Volume ETH` column) is
    refused rather than written or appended under the wrong name."""
    check_symbol(report.symbol, symbol, str(source), "--symbol is",
                 f"pass --symbol with the file's market (BASE-QUOTE), or use an export of {symbol}")
