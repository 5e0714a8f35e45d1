"""Fetch OHLCV bars from an exchange with ccxt and cache them as `data/raw/<SYMBOL>_<TF>.parquet`.

`python -m experiments.data fetch SOL-USD --timeframe 1h [--exchange binance] [--since 2023-01-01]`
fetches every symbol (`fetch_bars`), then writes each where `fetch_to_cache` does (envs.trading.data_tasks).
Bars are paged through `exchange.fetch_ohlcv`, the bar still forming is dropped, and the result is validated and
gap-handled exactly like an imported CSV (`ffill` by default, reported). Without a network every entry point raises
`InputError` saying so and how to continue offline (import a CSV export, or `source: synthetic`).

`ensure_local_data` is for the pipeline: before a sweep over symbols it reports which symbols
have no local parquet and, when allowed, fetches them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
import pandas as pd

from envs.errors import InputError
from envs.trading.data import (
    BAR_COLUMNS,
    GAP_POLICIES,
    GapReport,
    drop_exact_duplicates,
    find_gaps,
    regularize,
    save_bars,
    timeframe_delta,
    validate_bars,
)
from envs.trading.symbols import USD_QUOTES

DEFAULT_EXCHANGE = "binance"
DEFAULT_DATA_DIR = Path("data") / "raw"
DEFAULT_MAX_BARS = 20_000  # when no --since: about 2.3 years of 1h bars, ending now
PAGE_LIMIT = 1000          # bars per request (Binance's maximum; ccxt caps it per exchange)
TIMEOUT_MS = 15_000
# Quotes tried, in order, for a symbol written against USD (BTC-USD): exchanges list USD, stablecoins or both.


@dataclass
class FetchResult:
    """What `fetch_bars` got: the bars plus where they came from and how gaps were handled."""

    bars: pd.DataFrame
    exchange: str
    market: str  # the exchange's symbol, e.g. SOL/USDT
    gaps: GapReport
    gap_policy: str

    def describe(self) -> str:
        bars = self.bars
        handled = f" (handled: {self.gap_policy})" if self.gaps.missing_bars else ""
        return (f"{len(bars)} bars {bars.index[0]} .. {bars.index[-1]} from {self.exchange} {self.market}; "
                f"gaps: {self.gaps.describe()}{handled}")


def cache_path(symbol: str, timeframe: str, data_dir: str | Path = DEFAULT_DATA_DIR) -> Path:
    """Where a symbol's bars live locally: <data_dir>/<SYMBOL>_<TF>.parquet (what the env's source: file reads)."""
    return Path(data_dir) / f"{symbol}_{timeframe}.parquet"


def _is_offline_error(exc: BaseException) -> bool:
    import ccxt

    if isinstance(exc, (ccxt.NetworkError, ConnectionError, TimeoutError)):
        return True
    try:
        import requests

        return isinstance(exc, requests.exceptions.RequestException)
    except ImportError:  # pragma: no cover - ccxt depends on requests
        return False


def _offline_message(exchange: str, symbol: str, timeframe: str, exc: BaseException) -> str:
    reason = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
    return (f"cannot reach {exchange} to fetch {symbol} {timeframe}: you are offline or the exchange is "
            f"unreachable ({type(exc).__name__}: {reason}); import a CSV export with "
            f"python -m experiments.data import FILE --symbol {symbol} --timeframe {timeframe}, "
            "or set environment.env_config.source: synthetic")


def make_exchange(exchange: str = DEFAULT_EXCHANGE, timeout_ms: int = TIMEOUT_MS, **options: Any) -> Any:
    """A ccxt exchange instance with rate limiting on, or an InputError naming the known exchanges."""
    import ccxt

    name = exchange.lower()
    if name not in ccxt.exchanges:
        close = [e for e in ("binance", "coinbase", "kraken", "bybit", "okx", "bitstamp") if e in ccxt.exchanges]
        raise InputError(f"unknown exchange {exchange!r}: use a ccxt exchange id, e.g. {', '.join(close)}")
    return getattr(ccxt, name)({"enableRateLimit": True, "timeout": timeout_ms, **options})


def exchange_symbol(symbol: str, markets: dict[str, Any], exchange: str = "exchange") -> str:
    """BTC-USD -> the exchange's market for it: BTC/USD if listed, else BTC/USDT, BTC/USDC ...

    A symbol already in the exchange's form (BTC/USDT) is used as is when listed.
    """
    if symbol in markets:
        return symbol
    name = symbol.strip().upper().replace("_", "-")
    if "/" in name:
        base, quote = name.split("/", 1)
    elif "-" in name:
        base, quote = name.split("-", 1)
    else:
        raise InputError(f"symbol {symbol!r}: write BASE-QUOTE, e.g. BTC-USD or SOL-USDT")
    quotes = USD_QUOTES if quote == "USD" else (quote,)
    for candidate_quote in quotes:
        candidate = f"{base}/{candidate_quote}"
        if candidate in markets and markets[candidate].get("active", True) is not False:
            return candidate
    for candidate_quote in quotes:  # listed but flagged inactive: still has history
        if f"{base}/{candidate_quote}" in markets:
            return f"{base}/{candidate_quote}"
    listed = sorted(m for m in markets if m.split("/")[0] == base and ":" not in m)[:8]
    hint = f" ({base} is listed as {', '.join(listed)}: pass one of those)" if listed else ""
    raise InputError(f"{exchange} lists no {base}/{'|'.join(quotes)} market for {symbol}{hint}: "
                     "try another --exchange")


def _parse_time(value: str | pd.Timestamp | None, what: str) -> pd.Timestamp | None:
    if value is None:
        return None
    try:
        stamp = pd.Timestamp(value)
    except (ValueError, TypeError):
        raise InputError(f"{what} {value!r}: use an ISO date such as 2023-01-01 or 2023-01-01T12:00") from None
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def _ms(stamp: pd.Timestamp) -> int:
    return int(stamp.value // 1_000_000)


def fetch_bars(symbol: str, timeframe: str = "1h", exchange: str | Any = DEFAULT_EXCHANGE,
               since: str | pd.Timestamp | None = None, until: str | pd.Timestamp | None = None,
               max_bars: int = DEFAULT_MAX_BARS, gaps: str = "ffill", page_limit: int = PAGE_LIMIT,
               now: pd.Timestamp | None = None) -> FetchResult:
    """Page through `fetch_ohlcv` from `since` (default: `max_bars` bars before now) to `until` (default now).

    `exchange` is a ccxt exchange id or an object with ccxt's interface (`load_markets`, `markets`,
    `fetch_ohlcv`, optional `id`, `timeframes`). Only closed bars are kept. Network failures raise
    an `InputError` that says the machine is offline and how to continue without the network.
    """
    step = timeframe_delta(timeframe)
    if gaps not in GAP_POLICIES:
        raise InputError(f"unknown gap policy {gaps!r}: use one of {', '.join(GAP_POLICIES)}")
    client = make_exchange(exchange) if isinstance(exchange, str) else exchange
    name = str(getattr(client, "id", None) or exchange)
    timeframes = getattr(client, "timeframes", None)
    if timeframes and timeframe not in timeframes:
        raise InputError(f"{name} has no {timeframe} bars (it offers {', '.join(timeframes)}): "
                         "pick another --timeframe or --exchange")
    now = _parse_time(now, "now") or pd.Timestamp.now(tz="UTC")
    end = min(_parse_time(until, "--until") or now, now)
    start = _parse_time(since, "--since") or end - step * max_bars
    start = start.ceil(step)
    if start >= end:
        raise InputError(f"--since {start} is not before --until {end}: nothing to fetch")
    step_ms, end_ms = _ms(step), _ms(end)
    rows: list[list[float]] = []
    try:
        client.load_markets()
        market = exchange_symbol(symbol, client.markets, name)
        cursor = _ms(start)
        while cursor < end_ms:
            page = client.fetch_ohlcv(market, timeframe, since=cursor, limit=page_limit)
            page = [r for r in page or [] if r[0] >= cursor]
            if not page:
                break
            rows.extend(page)
            cursor = int(page[-1][0]) + step_ms
    except InputError:
        raise
    except Exception as exc:
        if _is_offline_error(exc):
            raise InputError(_offline_message(name, symbol, timeframe, exc)) from None
        import ccxt

        if isinstance(exc, ccxt.BaseError):
            raise InputError(f"{name} refused to give {symbol} {timeframe} bars ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0][:200]}): check the symbol and --exchange") from None
        raise
    return _to_result(rows, symbol, timeframe, name, market, end_ms, step_ms, gaps)


def _to_result(rows: list[list[float]], symbol: str, timeframe: str, name: str, market: str,
               end_ms: int, step_ms: int, gaps: str) -> FetchResult:
    source = f"{name} {market} {timeframe}"
    # Keep bars that have closed by `end` (the last one is usually still forming).
    table = np.asarray([r[:6] for r in rows if r[0] + step_ms <= end_ms], dtype=np.float64).reshape(-1, 6)
    if len(table) < 2:
        raise InputError(f"{source}: the exchange returned {len(table)} closed bar(s) for {symbol} in that "
                         "period: use an earlier --since (the market may be younger than that)")
    index = pd.DatetimeIndex(pd.to_datetime(table[:, 0].astype("int64"), unit="ms", utc=True), name="timestamp")
    bars = pd.DataFrame(table[:, 1:], index=index, columns=list(BAR_COLUMNS))
    bars["volume"] = bars["volume"].fillna(0.0)  # some exchanges send null volume for empty bars
    bars = bars.sort_index()
    bars, _ = drop_exact_duplicates(bars, Path(source))
    report = find_gaps(bars.index, timeframe)
    bars = regularize(bars, timeframe, gaps, report, Path(source))
    bars = validate_bars(bars, source=source, timeframe=timeframe, allow_gaps=gaps == "drop")
    bars.attrs = {"symbol": symbol, "timeframe": timeframe, "exchange": name, "market": market}
    return FetchResult(bars=bars, exchange=name, market=market, gaps=report, gap_policy=gaps)


def fetch_to_cache(symbol: str, timeframe: str = "1h", data_dir: str | Path = DEFAULT_DATA_DIR,
                   exchange: str | Any = DEFAULT_EXCHANGE, since: str | None = None, until: str | None = None,
                   max_bars: int = DEFAULT_MAX_BARS, gaps: str = "ffill") -> tuple[Path, FetchResult]:
    """Fetch and write <data_dir>/<SYMBOL>_<TF>.parquet (atomically); returns the path and the fetch result."""
    result = fetch_bars(symbol, timeframe, exchange, since=since, until=until, max_bars=max_bars, gaps=gaps)
    path = save_bars(result.bars, cache_path(symbol, timeframe, data_dir), symbol, timeframe, gaps=gaps)
    return path, result


@dataclass
class LocalData:
    """Which symbols have a local parquet, which were fetched just now, and which are still missing."""

    present: list[str] = field(default_factory=list)
    fetched: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    paths: dict[str, Path] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.missing


def ensure_local_data(symbols: Iterable[str], timeframe: str, data_dir: str | Path = DEFAULT_DATA_DIR,
                      fetch: bool = False, exchange: str | Any = DEFAULT_EXCHANGE, since: str | None = None,
                      max_bars: int = DEFAULT_MAX_BARS, log: Any = None) -> LocalData:
    """Check <data_dir>/<SYMBOL>_<TF>.parquet for every symbol; with `fetch`, download the missing ones.

    Returns a `LocalData`; `missing` is empty when every symbol has data. Fetching stops at the first
    network failure with the offline `InputError` (the other symbols would fail the same way); a symbol
    the exchange does not list also raises `InputError`. `log` (e.g. print) gets one line per fetch.
    """
    timeframe_delta(timeframe)
    status = LocalData()
    for symbol in dict.fromkeys(symbols):  # unique, in order
        path = cache_path(symbol, timeframe, data_dir)
        if path.exists():
            status.present.append(symbol)
            status.paths[symbol] = path
        elif fetch:
            path, result = fetch_to_cache(symbol, timeframe, data_dir, exchange, since=since, max_bars=max_bars)
            status.fetched.append(symbol)
            status.paths[symbol] = path
            if log is not None:
                log(f"fetched {symbol} {timeframe}: {result.describe()} -> {path}")
        else:
            status.missing.append(symbol)
    return status



def prepare_data(env_config: dict[str, Any], searched: dict[str, list[Any]], fetch: bool,
                 log: Callable[[str], None]) -> list[str]:
    """The trading family's `prepare` hook (envs.EnvFamily): for symbol-addressed bars (source: file,
    data_path: null) fetch every symbol the run trades that has no local parquet, or, when `fetch` is off
    (a dry run), report them. Returns the symbols still missing."""
    from envs.trading.env import DEFAULT_DATA

    addressed_by_symbol = "data_path" in env_config and env_config["data_path"] is None
    if env_config.get("source", "file") != "file" or not addressed_by_symbol:
        return []
    symbols = [str(v) for v in searched.get("symbol") or [env_config.get("symbol", "BTC-USD")]]
    timeframe = env_config.get("timeframe") or "1h"
    status = ensure_local_data(symbols, timeframe, env_config.get("data_dir", DEFAULT_DATA.parent), fetch=fetch,
                               log=log)
    if status.missing:
        log(f"note: no local {timeframe} data for {', '.join(status.missing)}; the run will fetch them with ccxt "
            "(needs network)")
    return status.missing
