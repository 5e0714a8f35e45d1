"""What the trading families' data subcommands do (their requests: envs.trading.data_requests): each takes a typed
request and returns the lines that say what it read and wrote; none prints. `update` is envs.trading.dataset_update,
since it writes through the platform's versioned files."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from envs.ability_types import DataFiles
from envs.errors import InputError
from envs.trading.calendar import ALL_WEEK, bars_per_year, detect_calendar
from envs.trading.csv_import import import_csv
from envs.trading.data import check_coarser, find_gaps, load_bars, resample_bars, save_bars
from envs.trading.data_requests import (
    DescribeFeatures,
    FetchBars,
    ImportBars,
    ImportUniverse,
    ResampleBars,
    ShowBars,
    UpdateBars,
)
from envs.trading.dataset_update import check_declared, update_datasets
from envs.trading.fetch import DEFAULT_DATA_DIR
from envs.trading.symbols import canonical_symbol


def run_request(request: Any, files: DataFiles) -> list[str]:
    """Do one request of the trading families' data subcommands; an update writes through `files`."""
    if isinstance(request, UpdateBars):
        return update_datasets(request, files)
    tasks: dict[type, Callable[[Any], list[str]]] = {
        ImportBars: import_bars, ImportUniverse: import_universe, ShowBars: show_bars, ResampleBars: resample,
        DescribeFeatures: describe_features, FetchBars: fetch}
    if type(request) not in tasks:
        raise TypeError(f"{type(request).__name__} is no request of the bars files' data commands")
    return tasks[type(request)](request)


def refuse_existing(out: Path, force: bool) -> None:
    if out.exists() and not force:
        raise InputError(f"{out}: exists: pass --force to replace it, or --out another file")


def import_bars(request: ImportBars) -> list[str]:
    symbol = canonical_symbol(request.symbol)
    out = request.out or DEFAULT_DATA_DIR / f"{symbol}_{request.timeframe}.parquet"
    bars, report = import_csv(request.file, request.timeframe, gaps=request.gaps, symbol=symbol,
                              stamps=request.stamps, allow_no_volume=request.no_volume, calendar=request.calendar)
    check_declared(report, symbol, request.file)
    refuse_existing(out, request.force)
    save_bars(bars, out, symbol, request.timeframe, gaps=request.gaps, calendar=report.calendar)
    return [f"{request.file}: {len(bars)} {request.timeframe} bars of {symbol} {bars.index[0]} .. {bars.index[-1]}",
            *(f"  {line}" for line in report.lines()), f"wrote {out}" + (" (replaced)" if request.force else "")]


def import_universe(request: ImportUniverse) -> list[str]:
    """The whole wide table as one universe parquet, each asset checked as one bars file is (one code path:
    envs.trading.bar_checks), with the timeframe (given, or what the bars' spacing names), calendar and gap rule
    in its metadata for a portfolio's `table_path`."""
    from envs.portfolio.universe_table import check_table, save_universe, span_of

    out = request.out or DEFAULT_DATA_DIR / f"{request.file.stem}_universe.parquet"
    refuse_existing(out, request.force)
    if out.suffix != ".parquet":
        raise InputError(f"{out}: --out must end in .parquet (a universe is written as one parquet file)")
    assets = list(request.assets) if request.assets else None
    checked = check_table(str(request.file), assets, request.timeframe, request.gaps, request.calendar, say=False)
    first, last, rows = span_of(checked)
    kind = "closes" if checked.close_only else "OHLCV bars"
    lines = [f"{request.file}: a universe of {len(checked.frames)} assets ({', '.join(checked.frames)}), "
             f"{checked.timeframe} {kind}, {rows} bar times {first} .. {last}",
             f"  timeframe: {checked.timeframe}" + ("" if request.timeframe else " (the bars' spacing)"),
             f"  calendar: {checked.calendar}",
             *(f"  {line}" for line in checked.notes or ("every asset: no gaps, nothing filled or left out",))]
    save_universe(checked, out)
    return [*lines, f"wrote {out}" + (" (replaced)" if request.force else "")
            + ": use it as environment.env_config.table_path"]


def show_bars(request: ShowBars) -> list[str]:
    bars = load_bars(request.file, request.timeframe)
    timeframe = request.timeframe or bars.attrs.get("timeframe")
    lines = [f"{request.file}: symbol {bars.attrs.get('symbol', '?')}, {len(bars)} {timeframe or '?'} bars, "
             f"{bars.index[0]} .. {bars.index[-1]}"]
    if timeframe:
        calendar = bars.attrs.get("calendar") or detect_calendar(bars.index, timeframe)  # as the env reads it
        kept = " (kept on purpose: imported with --gaps drop)" if bars.attrs.get("gaps") == "drop" else ""
        lines += [f"gaps: {find_gaps(bars.index, timeframe, calendar).describe()}{kept}",
                  f"calendar: {calendar}, {bars_per_year(bars.index, timeframe, calendar):.0f} bars a year"]
    return [*lines, *bars.describe().loc[["min", "max", "mean"]].to_string().splitlines()]


def resample(request: ResampleBars) -> list[str]:
    bars = load_bars(request.file)
    base = bars.attrs.get("timeframe")
    if base is None:
        raise InputError(f"{request.file}: no timeframe in the file's metadata: re-import it with --timeframe")
    check_coarser(request.timeframe, base, f"{request.file}: --timeframe")
    symbol = bars.attrs.get("symbol", "?")
    out = request.out or Path(request.file).with_name(f"{symbol}_{request.timeframe}.parquet")
    refuse_existing(out, request.force)
    higher = resample_bars(bars, request.timeframe, base)
    save_bars(higher, out, symbol, request.timeframe, gaps=bars.attrs.get("gaps", "ffill"),
              calendar=bars.attrs.get("calendar", ALL_WEEK))
    return [f"{request.file}: {len(bars)} {base} bars -> {len(higher)} {request.timeframe} bars of {symbol} "
            f"{higher.index[0]} .. {higher.index[-1]} (partial first/last periods dropped)",
            f"wrote {out}" + (" (replaced)" if request.force else "")]


def describe_features(request: DescribeFeatures) -> list[str]:
    from envs.trading.features.catalog import describe_function, list_functions

    return list(describe_function(request.name) if request.name else list_functions())


def fetch(request: FetchBars) -> list[str]:
    """Every symbol fetched before any file is written: a symbol the exchange refuses leaves the folder as it was."""
    from envs.trading.fetch import cache_path, fetch_bars

    results = [fetch_bars(symbol, request.timeframe, request.exchange, since=request.since, until=request.until,
                          max_bars=request.max_bars, gaps=request.gaps) for symbol in request.symbols]
    lines: list[str] = []
    for symbol, result in zip(request.symbols, results, strict=True):
        path = save_bars(result.bars, cache_path(symbol, request.timeframe, request.data_dir), symbol,
                         request.timeframe, gaps=request.gaps)
        lines += [f"{symbol}: {result.describe()}", f"wrote {path}"]
    return lines
