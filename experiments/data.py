"""`python -m experiments.data import FILE --symbol BTC-USD --timeframe 1h`: CSV export -> validated parquet.

Reads CryptoDataDownload exports, header-less exchange kline dumps (Binance-style) and
generic OHLCV CSVs, reports gaps and how they were handled, and writes
`data/raw/<SYMBOL>_<TF>.parquet` (atomically) for `environment.env_config.data_path`.
`import TABLE --universe [--assets BTC,ETH] [--timeframe 1d]` writes a whole wide table (`ASSET:field` columns) as one
universe parquet for trading/Portfolio-v0's `table_path`, each asset checked as one bars file is, the timeframe,
calendar and gap rule in its metadata.
`show FILE` prints a parquet's range, bar count, gaps and calendar (bars a year); `resample FILE --timeframe 1h` writes
coarser bars;
`features [NAME]` lists what a feature list may name (every TA-Lib function, allowed or refused with why).
`fetch SYMBOL... --timeframe 1h [--exchange binance] [--since 2023-01-01]` downloads bars with ccxt (needs network)
into the same parquet layout (see envs.trading.fetch).

`update PATH --from FILE` (a CSV export or a bars parquet) or `update PATH --fetch EXCHANGE` appends new bars
to a dataset (local or s3://) without rewriting its history: other symbol or timeframe, a hole at the seam, or
overlapping bars that differ from the stored ones (unless --force) are refused and nothing is written; the
previous version is kept beside it as `<stem>.<UTC time>.parquet` (envs.trading.bars_update,
experiments.storage.dataset_versions). For example `update data/raw/BTC-USD_1h.parquet --from latest.csv` prints:
    appended 700 1h bars 2019-09-18 06:00 .. 2019-10-17 09:00 from latest.csv
    overlap: 24 bars already stored and identical, skipped
    gaps in the new bars: no gaps
    now 20111 1h bars of BTC-USD 2017-07-01 11:00 .. 2019-10-17 09:00
    previous version kept as data/raw/BTC-USD_1h.20261126T004204Z.parquet
    wrote data/raw/BTC-USD_1h.parquet
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from envs.errors import InputError
from envs.trading.calendar import ALL_WEEK, bars_per_year, detect_calendar
from envs.trading.csv_import import STAMPS, import_csv
from envs.trading.data import (
    GAP_POLICIES,
    TIMEFRAMES,
    check_coarser,
    find_gaps,
    load_bars,
    resample_bars,
    save_bars,
)
from envs.trading.symbols import canonical_symbol
from experiments.shell import exit_code
from experiments.storage.dataset_update import BarsSource, check_declared, update_dataset

DEFAULT_DIR = Path("data") / "raw"


def _import(args: argparse.Namespace) -> int:
    if args.universe:
        return _import_universe(args)
    if args.assets:
        raise InputError(f"{args.file}: --assets picks a universe's assets: use it with --universe")
    if args.timeframe is None:
        raise InputError(f"{args.file}: --timeframe is needed to import one asset's bars (e.g. --timeframe 1h)")
    symbol = canonical_symbol(args.symbol)
    out = args.out or DEFAULT_DIR / f"{symbol}_{args.timeframe}.parquet"
    bars, report = import_csv(args.file, args.timeframe, gaps=args.gaps, symbol=symbol, stamps=args.stamps,
                              allow_no_volume=args.no_volume, calendar=args.calendar)
    check_declared(report, symbol, args.file)
    if out.exists() and not args.force:
        raise InputError(f"{out}: exists: pass --force to replace it, or --out another file")
    save_bars(bars, out, symbol, args.timeframe, gaps=args.gaps, calendar=report.calendar)
    print(f"{args.file}: {len(bars)} {args.timeframe} bars of {symbol} {bars.index[0]} .. {bars.index[-1]}")
    for line in report.lines():
        print(f"  {line}")
    print(f"wrote {out}" + (" (replaced)" if args.force else ""))
    return 0


def _import_universe(args: argparse.Namespace) -> int:
    """The whole wide table as one universe parquet, each asset checked as one bars file is (one code path:
    envs.trading.bar_checks), with the timeframe (given, or what the bars' spacing names), calendar and gap rule
    in its metadata for `environment.env_config.table_path`."""
    from envs.portfolio.universe_table import check_table, save_universe, span_of

    out = args.out or DEFAULT_DIR / f"{args.file.stem}_universe.parquet"
    if out.exists() and not args.force:
        raise InputError(f"{out}: exists: pass --force to replace it, or --out another file")
    if out.suffix != ".parquet":
        raise InputError(f"{out}: --out must end in .parquet (a universe is written as one parquet file)")
    assets = [asset.strip() for asset in args.assets.split(",")] if args.assets else None
    checked = check_table(str(args.file), assets, args.timeframe, args.gaps, args.calendar, say=False)
    first, last, rows = span_of(checked)
    kind = "closes" if checked.close_only else "OHLCV bars"
    print(f"{args.file}: a universe of {len(checked.frames)} assets ({', '.join(checked.frames)}), {checked.timeframe} "
          f"{kind}, {rows} bar times {first} .. {last}")
    print(f"  timeframe: {checked.timeframe}" + ("" if args.timeframe else " (the bars' spacing)"))
    print(f"  calendar: {checked.calendar}")
    for line in checked.notes or ("every asset: no gaps, nothing filled or left out",):
        print(f"  {line}")
    save_universe(checked, out)
    print(f"wrote {out}" + (" (replaced)" if args.force else "") + ": use it as environment.env_config.table_path")
    return 0


def _show(args: argparse.Namespace) -> int:
    bars = load_bars(args.file, args.timeframe)
    timeframe = args.timeframe or bars.attrs.get("timeframe")
    print(f"{args.file}: symbol {bars.attrs.get('symbol', '?')}, {len(bars)} {timeframe or '?'} bars, "
          f"{bars.index[0]} .. {bars.index[-1]}")
    if timeframe:
        calendar = bars.attrs.get("calendar") or detect_calendar(bars.index, timeframe)  # as the env reads it
        kept = " (kept on purpose: imported with --gaps drop)" if bars.attrs.get("gaps") == "drop" else ""
        print(f"gaps: {find_gaps(bars.index, timeframe, calendar).describe()}{kept}")
        print(f"calendar: {calendar}, {bars_per_year(bars.index, timeframe, calendar):.0f} bars a year")
    print(bars.describe().loc[["min", "max", "mean"]].to_string())
    return 0


def _resample(args: argparse.Namespace) -> int:
    bars = load_bars(args.file)
    base = bars.attrs.get("timeframe")
    if base is None:
        raise InputError(f"{args.file}: no timeframe in the file's metadata: re-import it with --timeframe")
    check_coarser(args.timeframe, base, f"{args.file}: --timeframe")
    symbol = bars.attrs.get("symbol", "?")
    out = args.out or Path(args.file).with_name(f"{symbol}_{args.timeframe}.parquet")
    if out.exists() and not args.force:
        raise InputError(f"{out}: exists: pass --force to replace it, or --out another file")
    higher = resample_bars(bars, args.timeframe, base)
    save_bars(higher, out, symbol, args.timeframe, gaps=bars.attrs.get("gaps", "ffill"),
              calendar=bars.attrs.get("calendar", ALL_WEEK))
    print(f"{args.file}: {len(bars)} {base} bars -> {len(higher)} {args.timeframe} bars of {symbol} "
          f"{higher.index[0]} .. {higher.index[-1]} (partial first/last periods dropped)")
    print(f"wrote {out}" + (" (replaced)" if args.force else ""))
    return 0


def _features(args: argparse.Namespace) -> int:
    from envs.trading.features.catalog import describe_function, list_functions

    print("\n".join(describe_function(args.name) if args.name else list_functions()))
    return 0


def _fetch(args: argparse.Namespace) -> int:
    from envs.trading.fetch import fetch_to_cache

    for symbol in args.symbols:
        path, result = fetch_to_cache(symbol, args.timeframe, args.data_dir, args.exchange, since=args.since,
                                      until=args.until, max_bars=args.max_bars, gaps=args.gaps)
        print(f"{symbol}: {result.describe()}")
        print(f"wrote {path}")
    return 0


def _update(args: argparse.Namespace) -> int:
    for line in update_dataset(BarsSource(args.source_file, args.fetch, args.symbol, args.stamps), args.path,
                               args.gaps, args.force):
        print(line)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.data", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    imp = commands.add_parser("import", help="convert a CSV export into the project's parquet")
    imp.add_argument("file", type=Path)
    what = imp.add_mutually_exclusive_group(required=True)
    what.add_argument("--symbol", help="BASE-QUOTE in capitals, e.g. BTC-USD; in a table of several "
                      "assets (BTC:open, ETH:open, ...) it picks the columns of BTC")
    what.add_argument("--universe", action="store_true",
                      help="import a whole wide table (ASSET:field columns) as one universe parquet for "
                           "trading/Portfolio-v0's table_path, each asset checked as a bars file is")
    imp.add_argument("--assets", help="with --universe: which of the table's assets, comma-separated (default all)")
    imp.add_argument("--timeframe", choices=list(TIMEFRAMES),
                     help="the bars' interval (needed for --symbol; with --universe, default: what the spacing names)")
    imp.add_argument("--gaps", default="ffill", choices=GAP_POLICIES,
                     help="missing bars: ffill = flat bars at the last close (default), drop, or error")
    imp.add_argument("--calendar", help="the days bars open on, recorded in the parquet: 24/7, weekdays or an "
                     "exchange code such as XNYS (its weekends and holidays closed, never filled; a bar on one is "
                     "refused); default: the one the bars show")
    imp.add_argument("--stamps", default="open", choices=STAMPS,
                     help="what the file's times are: bar open times (default) or close times, shifted to opens")
    imp.add_argument("--no-volume", action="store_true",
                     help="accept a file without a volume column (volume 0: the volume feature is constant)")
    imp.add_argument("--force", action="store_true", help="replace an existing output file")
    imp.add_argument("--out", type=Path, help=f"output parquet (default {DEFAULT_DIR}/<SYMBOL>_<TF>.parquet)")
    imp.set_defaults(handler=_import)
    show = commands.add_parser("show", help="summarize a bars parquet")
    show.add_argument("file", type=Path)
    show.add_argument("--timeframe", choices=list(TIMEFRAMES))
    show.set_defaults(handler=_show)
    resample = commands.add_parser("resample", help="coarser bars from a bars parquet (e.g. 30m -> 1h)")
    resample.add_argument("file", type=Path)
    resample.add_argument("--timeframe", required=True, choices=list(TIMEFRAMES))
    resample.add_argument("--out", type=Path, help="output parquet (default: <SYMBOL>_<TF>.parquet beside the input)")
    resample.add_argument("--force", action="store_true", help="replace an existing output file")
    resample.set_defaults(handler=_resample)
    features = commands.add_parser("features", help="the feature transforms and TA-Lib functions a feature list "
                                                    "may name; with NAME, one of them in full")
    features.add_argument("name", nargs="?", help="a TA-Lib function (e.g. MACD) or a transform (e.g. trend)")
    features.set_defaults(handler=_features)
    fetch = commands.add_parser("fetch", help="download bars from an exchange with ccxt (needs network)")
    fetch.add_argument("symbols", nargs="+", metavar="SYMBOL", help="e.g. SOL-USD (mapped to SOL/USD or SOL/USDT)")
    fetch.add_argument("--timeframe", required=True, choices=list(TIMEFRAMES))
    fetch.add_argument("--exchange", default="binance", help="a ccxt exchange id (default binance; e.g. coinbase)")
    fetch.add_argument("--since", help="first bar, e.g. 2023-01-01 (default: --max-bars bars before now)")
    fetch.add_argument("--until", help="last bar (default: now; the bar still forming is dropped)")
    fetch.add_argument("--max-bars", type=int, default=20_000, help="history length when --since is not given")
    fetch.add_argument("--gaps", default="ffill", choices=GAP_POLICIES,
                       help="missing bars: ffill = flat bars at the last close (default), drop, or error")
    fetch.add_argument("--data-dir", type=Path, default=DEFAULT_DIR,
                       help=f"where <SYMBOL>_<TF>.parquet is written (default {DEFAULT_DIR})")
    fetch.set_defaults(handler=_fetch)
    update = commands.add_parser("update", help="append new bars to a dataset (local or s3://), keeping the old "
                                                "version beside it")
    update.add_argument("path", metavar="PATH", help="the dataset: a parquet written by import/fetch, or s3://...")
    new_bars = update.add_mutually_exclusive_group(required=True)
    new_bars.add_argument("--from", dest="source_file", type=Path, metavar="FILE",
                          help="a CSV export or a bars .parquet holding the new bars")
    new_bars.add_argument("--fetch", metavar="EXCHANGE", help="fetch the bars after the last stored one with ccxt "
                                                              "(a ccxt exchange id, e.g. binance; needs network)")
    update.add_argument("--symbol", help="the CSV's symbol (default: the dataset's); picks a multi-asset table's "
                                         "columns")
    update.add_argument("--force", action="store_true",
                        help="replace stored bars that the new bars contradict (history rewritten by the source)")
    update.add_argument("--gaps", choices=GAP_POLICIES, help="holes in the new bars (default: the dataset's policy)")
    update.add_argument("--stamps", default="open", choices=STAMPS, help="what the CSV's times are (as for import)")
    update.set_defaults(handler=_update)
    return exit_code(lambda: _handle(parser.parse_args(argv)))


def _handle(args: argparse.Namespace) -> int:
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
