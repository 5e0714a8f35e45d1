"""The trading families' subcommands of `python -m experiments.data`: each one's flags and the typed request they
make (envs.trading.data_tasks does each; the family's `UpdatesData` ability hands them to the command).

`import FILE --symbol BTC-USD --timeframe 1h` turns a CSV export (CryptoDataDownload, header-less exchange kline
dumps, generic OHLCV) into a validated `data/raw/<SYMBOL>_<TF>.parquet` for `environment.env_config.data_path`;
`import TABLE --universe` writes a wide table (`ASSET:field` columns) as one universe parquet for a portfolio's
`table_path`; `show`, `resample`, `features` and `fetch` inspect, coarsen, list and download bars; `update` appends
new bars to a dataset without rewriting its history (envs.trading.dataset_update).
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from envs.ability_types import DataCommand
from envs.errors import InputError
from envs.trading.csv_import import STAMPS
from envs.trading.data import GAP_POLICIES, TIMEFRAMES
from envs.trading.fetch import DEFAULT_DATA_DIR, DEFAULT_MAX_BARS

GAPS_HELP = "missing bars: ffill = flat bars at the last close (default), drop, or error"


@dataclass(frozen=True)
class ImportBars:
    """`import FILE --symbol S --timeframe TF`: one asset's CSV export as a bars parquet."""

    file: Path
    symbol: str
    timeframe: str
    gaps: str = "ffill"
    calendar: str | None = None
    stamps: str = "open"
    no_volume: bool = False
    force: bool = False
    out: Path | None = None


@dataclass(frozen=True)
class ImportUniverse:
    """`import TABLE --universe`: a wide table (`ASSET:field` columns) as one universe parquet."""

    file: Path
    assets: tuple[str, ...] | None = None
    timeframe: str | None = None  # None: what the bars' spacing names
    gaps: str = "ffill"
    calendar: str | None = None
    force: bool = False
    out: Path | None = None


@dataclass(frozen=True)
class ShowBars:
    """`show FILE`: a bars parquet's range, bar count, gaps and calendar."""

    file: Path
    timeframe: str | None = None


@dataclass(frozen=True)
class ResampleBars:
    """`resample FILE --timeframe TF`: coarser bars beside the input."""

    file: Path
    timeframe: str
    out: Path | None = None
    force: bool = False


@dataclass(frozen=True)
class DescribeFeatures:
    """`features [NAME]`: what a feature list may name (every TA-Lib function, allowed or refused with why)."""

    name: str | None = None


@dataclass(frozen=True)
class FetchBars:
    """`fetch SYMBOL... --timeframe TF`: bars downloaded with ccxt into `<data_dir>/<SYMBOL>_<TF>.parquet`."""

    symbols: tuple[str, ...]
    timeframe: str
    exchange: str = "binance"
    since: str | None = None
    until: str | None = None
    max_bars: int = DEFAULT_MAX_BARS
    gaps: str = "ffill"
    data_dir: Path = DEFAULT_DATA_DIR


@dataclass(frozen=True)
class UpdateBars:
    """`update PATH --from FILE | --fetch EXCHANGE` (or `--universe CONF`: every bars file CONF's env reads):
    new bars appended to each dataset (local or s3://) without rewriting its history. Another symbol or timeframe,
    a hole at the seam, or overlapping bars that differ from the stored ones (unless --force) are refused, and with
    several files none is written unless every one can be. The previous version is kept beside each as
    `<stem>.<UTC time>.parquet`. For example `update data/raw/BTC-USD_1h.parquet --from latest.csv` prints:
        appended 700 1h bars 2019-09-18 06:00 .. 2019-10-17 09:00 from latest.csv
        overlap: 24 bars already stored and identical, skipped
        gaps in the new bars: no gaps
        now 20111 1h bars of BTC-USD 2017-07-01 11:00 .. 2019-10-17 09:00
        previous version kept as data/raw/BTC-USD_1h.20261126T004204Z.parquet
        wrote data/raw/BTC-USD_1h.parquet
    """

    paths: tuple[str, ...] = ()
    universe: Path | None = None  # the experiment file whose bars files are updated, instead of `paths`
    source_file: Path | None = None
    fetch: str | None = None
    symbol: str | None = None  # the CSV's symbol, when it is not the dataset's
    force: bool = False
    gaps: str | None = None  # None: each dataset's own policy
    stamps: str = "open"


def _import_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path)
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--symbol", help="BASE-QUOTE in capitals, e.g. BTC-USD; in a table of several "
                      "assets (BTC:open, ETH:open, ...) it picks the columns of BTC")
    what.add_argument("--universe", action="store_true",
                      help="import a whole wide table (ASSET:field columns) as one universe parquet for a "
                           "portfolio's table_path, each asset checked as a bars file is")
    parser.add_argument("--assets", help="with --universe: which of the table's assets, comma-separated (default all)")
    parser.add_argument("--timeframe", choices=list(TIMEFRAMES),
                        help="the bars' interval (needed for --symbol; with --universe, default: what the spacing "
                             "names)")
    parser.add_argument("--gaps", default="ffill", choices=GAP_POLICIES, help=GAPS_HELP)
    parser.add_argument("--calendar", help="the days bars open on, recorded in the parquet: 24/7, weekdays or an "
                        "exchange code such as XNYS (its weekends and holidays closed, never filled; a bar on one is "
                        "refused); default: the one the bars show")
    parser.add_argument("--stamps", default="open", choices=STAMPS,
                        help="what the file's times are: bar open times (default) or close times, shifted to opens")
    parser.add_argument("--no-volume", action="store_true",
                        help="accept a file without a volume column (volume 0: the volume feature is constant)")
    parser.add_argument("--force", action="store_true", help="replace an existing output file")
    parser.add_argument("--out", type=Path, help=f"output parquet (default {DEFAULT_DATA_DIR}/<SYMBOL>_<TF>.parquet)")


def _import_request(args: argparse.Namespace) -> ImportBars | ImportUniverse:
    if args.universe:
        assets = tuple(asset.strip() for asset in args.assets.split(",")) if args.assets else None
        return ImportUniverse(args.file, assets, args.timeframe, args.gaps, args.calendar, args.force, args.out)
    if args.assets:
        raise InputError(f"{args.file}: --assets picks a universe's assets: use it with --universe")
    if args.timeframe is None:
        raise InputError(f"{args.file}: --timeframe is needed to import one asset's bars (e.g. --timeframe 1h)")
    return ImportBars(args.file, args.symbol, args.timeframe, args.gaps, args.calendar, args.stamps, args.no_volume,
                      args.force, args.out)


def _show_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path)
    parser.add_argument("--timeframe", choices=list(TIMEFRAMES))


def _resample_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path)
    parser.add_argument("--timeframe", required=True, choices=list(TIMEFRAMES))
    parser.add_argument("--out", type=Path, help="output parquet (default: <SYMBOL>_<TF>.parquet beside the input)")
    parser.add_argument("--force", action="store_true", help="replace an existing output file")


def _features_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="a TA-Lib function (e.g. MACD) or a transform (e.g. trend)")


def _fetch_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("symbols", nargs="+", metavar="SYMBOL", help="e.g. SOL-USD (mapped to SOL/USD or SOL/USDT)")
    parser.add_argument("--timeframe", required=True, choices=list(TIMEFRAMES))
    parser.add_argument("--exchange", default="binance", help="a ccxt exchange id (default binance; e.g. coinbase)")
    parser.add_argument("--since", help="first bar, e.g. 2023-01-01 (default: --max-bars bars before now)")
    parser.add_argument("--until", help="last bar (default: now; the bar still forming is dropped)")
    parser.add_argument("--max-bars", type=int, default=DEFAULT_MAX_BARS,
                        help="history length when --since is not given")
    parser.add_argument("--gaps", default="ffill", choices=GAP_POLICIES, help=GAPS_HELP)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR,
                        help=f"where <SYMBOL>_<TF>.parquet is written (default {DEFAULT_DATA_DIR})")


def _update_flags(parser: argparse.ArgumentParser) -> None:
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("path", metavar="PATH", nargs="?",
                       help="the dataset: a parquet written by import/fetch, or s3://...")
    which.add_argument("--universe", type=Path, metavar="CONF",
                       help="every bars file the env of experiment file CONF reads (a universe's data_paths, or "
                            "data_path): each is checked before any is written")
    new_bars = parser.add_mutually_exclusive_group(required=True)
    new_bars.add_argument("--from", dest="source_file", type=Path, metavar="FILE",
                          help="a CSV export or a bars .parquet holding the new bars (with --universe: a table of "
                               "the universe's assets, ASSET:field columns)")
    new_bars.add_argument("--fetch", metavar="EXCHANGE", help="fetch the bars after the last stored one with ccxt "
                                                              "(a ccxt exchange id, e.g. binance; needs network)")
    parser.add_argument("--symbol", help="the CSV's symbol (default: the dataset's); picks a multi-asset table's "
                                         "columns")
    parser.add_argument("--force", action="store_true",
                        help="replace stored bars that the new bars contradict (history rewritten by the source)")
    parser.add_argument("--gaps", choices=GAP_POLICIES, help="holes in the new bars (default: the dataset's policy)")
    parser.add_argument("--stamps", default="open", choices=STAMPS, help="what the CSV's times are (as for import)")


def _update_request(args: argparse.Namespace) -> UpdateBars:
    if args.universe and args.symbol:
        raise InputError(f"{args.universe}: --symbol names one file's market: leave it out with --universe (each "
                         "file's own symbol picks its columns of the table)")
    paths = () if args.path is None else (args.path,)
    return UpdateBars(paths, args.universe, args.source_file, args.fetch, args.symbol, args.force, args.gaps,
                      args.stamps)


BARS_COMMANDS = (
    DataCommand("import", "convert a CSV export into the project's parquet", _import_flags, _import_request),
    DataCommand("show", "summarize a bars parquet", _show_flags, lambda args: ShowBars(args.file, args.timeframe)),
    DataCommand("resample", "coarser bars from a bars parquet (e.g. 30m -> 1h)", _resample_flags,
                lambda args: ResampleBars(args.file, args.timeframe, args.out, args.force)),
    DataCommand("features", "the feature transforms and TA-Lib functions a feature list may name; with NAME, one of "
                            "them in full", _features_flags, lambda args: DescribeFeatures(args.name)),
    DataCommand("fetch", "download bars from an exchange with ccxt (needs network)", _fetch_flags,
                lambda args: FetchBars(tuple(args.symbols), args.timeframe, args.exchange, args.since, args.until,
                                       args.max_bars, args.gaps, args.data_dir)),
    DataCommand("update", "append new bars to a dataset (local or s3://), keeping the old version beside it",
                _update_flags, _update_request),
)
