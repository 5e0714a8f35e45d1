"""Append new bars to stored bars datasets (local or s3://) without rewriting their history: from a CSV export, a
bars parquet or an exchange. `python -m experiments.data update` and paper trading's --exchange both come here
(through the family's `UpdatesData.run_data`); envs.trading.bars_update plans each file's update, and the platform's
`DataFiles` keeps the old version and writes the new one whole. With several files (a universe), every file is
read and planned before any is written, so a refusal leaves them all as they were.
"""
from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from envs.ability_types import DataFiles
from envs.errors import InputError
from envs.trading.bars_update import BarsUpdate, NewBars, dataset_identity, plan_update, timeframe_mismatch
from envs.trading.calendar import ALL_WEEK
from envs.trading.csv_import import ImportReport, import_csv, read_csv_text
from envs.trading.data import TIMEFRAMES, load_bars, save_bars, timeframe_delta
from envs.trading.data_requests import UpdateBars
from envs.trading.symbols import canonical_symbol, check_symbol


@dataclass(frozen=True)
class PlannedFile:
    """One dataset's update, planned and not yet written."""

    path: str
    stored: pd.DataFrame
    update: BarsUpdate
    notes: list[str]


def update_datasets(request: UpdateBars, files: DataFiles) -> list[str]:
    """Append the request's new bars to each dataset (the old versions kept beside them); the lines that say what
    changed, under each file's name when there are several."""
    if request.universe is not None and request.source_file is not None and request.source_file.suffix == ".parquet":
        raise InputError(f"{request.source_file}: one asset's bars: --universe takes new bars from a table of the "
                         "universe's assets (ASSET:field columns) or from --fetch EXCHANGE")
    paths = list(request.paths) if request.universe is None else files.experiment_files(request.universe)
    # A CSV's text is read when the first file's plan needs it (after that file's own checks), once for all files.
    source_text = functools.cache(lambda: read_csv_text(request.source_file))
    planned = [_plan(request, path, files, source_text) for path in paths]
    reports = [_write(plan, files) for plan in planned]
    if len(reports) == 1:
        return reports[0]
    return [line for plan, report in zip(planned, reports, strict=True)
            for line in (f"{plan.path}:", *(f"  {line}" for line in report))]


def bars_file(env_config: dict[str, Any], source: str) -> str:
    """The bars file a one-asset env_config reads (data_path, else its symbol's file in data_dir)."""
    from envs.trading.env import TradingConfig
    from envs.trading.sources import bars_path

    cfg = TradingConfig.from_dict(env_config)
    if cfg.source == "synthetic":
        raise InputError(f"{source}: environment.env_config.source is synthetic: generated bars have no file to "
                         "update")
    return bars_path(cfg)


def _plan(request: UpdateBars, path: str, files: DataFiles, source_text: Callable[[], str]) -> PlannedFile:
    stored = load_bars(files.readable(path))
    symbol, timeframe = dataset_identity(stored, path)
    notes: list[str] = []
    if request.fetch:
        from envs.trading.fetch import fetch_bars

        # From one bar before the last stored one: fetch_bars needs two closed bars, and the overlap shows
        # whether the exchange still has the stored bars as they are.
        result = fetch_bars(symbol, timeframe, request.fetch, since=stored.index[-1] - timeframe_delta(timeframe),
                            gaps="drop")
        new = NewBars(result.bars, f"{result.exchange} {result.market}", symbol, timeframe)
    elif request.source_file is None:
        raise InputError(f"{path}: no new bars named: pass --from FILE or --fetch EXCHANGE")
    elif request.source_file.suffix == ".parquet":
        bars = load_bars(request.source_file)
        new = NewBars(bars, str(request.source_file), bars.attrs.get("symbol"), bars.attrs.get("timeframe"))
    else:
        new, notes = _csv_bars(request, source_text(), stored, symbol, timeframe, path)
    update = plan_update(stored, new, path, request.gaps or stored.attrs.get("gaps", "ffill"), request.force)
    return PlannedFile(path, stored, update, notes)


def _write(plan: PlannedFile, files: DataFiles) -> list[str]:
    if not plan.update.changed:
        return [plan.update.unchanged_line(plan.path)]
    stored = plan.stored
    with tempfile.TemporaryDirectory() as scratch:
        data = save_bars(plan.update.bars, Path(scratch) / "bars.parquet", plan.update.symbol, plan.update.timeframe,
                         gaps=stored.attrs.get("gaps", "ffill"),
                         calendar=stored.attrs.get("calendar", ALL_WEEK)).read_bytes()
    kept = files.replace(plan.path, data, stored.attrs["digest"])
    return [*plan.update.lines(), *plan.notes, f"previous version kept as {kept}", f"wrote {plan.path}"]


def _csv_bars(request: UpdateBars, text: str, stored: pd.DataFrame, symbol: str, timeframe: str, path: str
              ) -> tuple[NewBars, list[str]]:
    """A CSV export's bars (`text`: the file's, read once for all the datasets updated), holes kept (the update
    fills them from the last stored close), and the import's notes (without its gaps line: the update reports the
    gaps in what it appends). The bars are labelled with the market the file states, else --symbol, else the
    dataset's; a --symbol the file contradicts is refused."""
    source = request.source_file
    csv_symbol = canonical_symbol(request.symbol) if request.symbol else symbol

    def read(tf: str) -> tuple[pd.DataFrame, ImportReport]:
        return import_csv(source, tf, gaps="drop", symbol=csv_symbol, stamps=request.stamps,
                          allow_no_volume=not stored["volume"].any(), text=text)  # a dataset imported with --no-volume

    try:
        bars, report = read(timeframe)
    except InputError:  # bars of another timeframe? then say that, rather than how to import them
        actual = next((tf for tf in TIMEFRAMES if tf != timeframe and _reads_as(read, tf)), None)
        if actual is None:
            raise
        raise timeframe_mismatch(actual, timeframe, str(source), path) from None
    if request.symbol:
        check_declared(report, csv_symbol, source)
    notes = [line for line in report.lines() if not line.startswith("gaps:")]
    return NewBars(bars, str(source), report.symbol or csv_symbol, timeframe), notes


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
