"""The ccxt fetcher without a network: a small stand-in exchange for paging and symbol mapping,
and a real ccxt exchange aimed at a closed loopback port for the offline path."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from envs.errors import InputError
from envs.trading.data import load_bars
from envs.trading.fetch import (
    cache_path,
    ensure_local_data,
    exchange_symbol,
    fetch_bars,
    fetch_to_cache,
    make_exchange,
)
from experiments import data as data_cli

HOUR_MS = 3_600_000
NOW = pd.Timestamp("2024-01-02 00:30", tz="UTC")


class FakeExchange:
    """Stands in for a remote exchange: ccxt's fetch_ohlcv contract over an in-memory hourly series."""

    id = "fakex"
    rateLimit = 0
    timeframes = {"1h": "1h", "1d": "1d"}

    def __init__(self, quotes=("USDT",), missing_hours=(), page_cap=300):
        self.markets: dict = {}
        self._quotes = quotes
        self.page_cap = page_cap
        self.calls: list[tuple[str, int, int]] = []
        start = pd.Timestamp("2023-12-01", tz="UTC")
        stamps = pd.date_range(start, NOW, freq="1h")  # includes the bar still forming at NOW
        rng = np.random.default_rng(0)
        close = 20.0 * np.exp(np.cumsum(rng.normal(0, 0.01, len(stamps))))
        self.rows = [[int(t.value // 1_000_000), c * 0.999, c * 1.01, c * 0.99, c, 5.0]
                     for i, (t, c) in enumerate(zip(stamps, close, strict=True)) if i not in set(missing_hours)]

    def load_markets(self):
        self.markets = {f"{base}/{quote}": {"active": True} for base in ("SOL", "BTC") for quote in self._quotes}
        self.markets["ETH/EUR"] = {"active": True}
        return self.markets

    def fetch_ohlcv(self, symbol, timeframe="1h", since=None, limit=None):
        assert symbol in self.markets and timeframe == "1h"
        self.calls.append((symbol, since, limit))
        page = [r for r in self.rows if since is None or r[0] >= since]
        return [list(r) for r in page[: min(limit or 500, self.page_cap)]]


def test_symbol_mapping_prefers_usd_then_stablecoins():
    markets = {"BTC/USD": {}, "BTC/USDT": {}, "SOL/USDT": {}, "ADA/USDC": {}, "ETH/EUR": {}}
    assert exchange_symbol("BTC-USD", markets) == "BTC/USD"
    assert exchange_symbol("SOL-USD", markets) == "SOL/USDT"
    assert exchange_symbol("ADA-USD", markets) == "ADA/USDC"
    assert exchange_symbol("sol-usdt", markets) == "SOL/USDT"
    assert exchange_symbol("BTC/USDT", markets) == "BTC/USDT"
    with pytest.raises(InputError, match="ETH is listed as ETH/EUR"):
        exchange_symbol("ETH-USD", markets, "fakex")
    with pytest.raises(InputError, match="BASE-QUOTE"):
        exchange_symbol("SOLANA", markets)


def test_pagination_covers_the_period_and_drops_the_forming_bar():
    exchange = FakeExchange()
    result = fetch_bars("SOL-USD", "1h", exchange, since="2023-12-01", now=NOW, page_limit=1000)
    bars = result.bars
    assert result.market == "SOL/USDT" and result.exchange == "fakex"
    assert len(exchange.calls) >= 3  # 745 bars through pages of at most 300
    assert bars.index[0] == pd.Timestamp("2023-12-01", tz="UTC")
    assert bars.index[-1] == pd.Timestamp("2024-01-01 23:00", tz="UTC")  # 00:00 is still forming at 00:30
    assert bars.index.is_unique and (bars.index[1:] - bars.index[:-1] == pd.Timedelta(hours=1)).all()
    # Each page starts right after the previous page's last bar.
    sinces = [since for _, since, _ in exchange.calls]
    assert all(b - a == 300 * HOUR_MS for a, b in zip(sinces, sinces[1:3], strict=False))


def test_default_history_is_max_bars_before_now():
    result = fetch_bars("BTC-USD", "1h", FakeExchange(), max_bars=48, now=NOW)
    assert len(result.bars) == 47  # 48 hourly slots back from 00:30, minus the forming bar
    assert result.bars.index[-1] == pd.Timestamp("2024-01-01 23:00", tz="UTC")


def test_gaps_are_filled_and_reported_like_the_importer():
    exchange = FakeExchange(missing_hours=(10, 11, 12))
    result = fetch_bars("SOL-USD", "1h", exchange, since="2023-12-01", now=NOW)
    assert result.gaps.missing_bars == 3 and "3 missing bars" in result.describe()
    filled = result.bars.loc["2023-12-01 10:00":"2023-12-01 12:00"]
    assert (filled["volume"] == 0).all() and (filled["open"] == filled["close"]).all()
    with pytest.raises(InputError, match="missing bars"):
        fetch_bars("SOL-USD", "1h", FakeExchange(missing_hours=(10,)), since="2023-12-01", now=NOW, gaps="error")
    dropped = fetch_bars("SOL-USD", "1h", FakeExchange(missing_hours=(10,)), since="2023-12-01", now=NOW,
                         gaps="drop").bars
    assert len(dropped) == len(result.bars) - 1


def test_unknown_timeframe_and_symbol_are_input_errors():
    with pytest.raises(InputError, match="no 4h bars"):
        fetch_bars("SOL-USD", "4h", FakeExchange(), now=NOW)
    with pytest.raises(InputError, match="lists no DOGE"):
        fetch_bars("DOGE-USD", "1h", FakeExchange(), now=NOW)
    with pytest.raises(InputError, match="unknown exchange"):
        make_exchange("not-an-exchange")


def test_cache_and_ensure_local_data(tmp_path):
    path, result = fetch_to_cache("SOL-USD", "1h", tmp_path, FakeExchange(), since="2023-12-20")
    assert path == cache_path("SOL-USD", "1h", tmp_path) == tmp_path / "SOL-USD_1h.parquet"
    loaded = load_bars(path)
    assert loaded.attrs["symbol"] == "SOL-USD" and loaded.attrs["timeframe"] == "1h"
    assert len(loaded) == len(result.bars)

    status = ensure_local_data(["SOL-USD", "BTC-USD", "SOL-USD"], "1h", tmp_path, fetch=False)
    assert status.present == ["SOL-USD"] and status.missing == ["BTC-USD"] and not status.ok

    lines: list[str] = []
    status = ensure_local_data(["SOL-USD", "BTC-USD"], "1h", tmp_path, fetch=True, exchange=FakeExchange(),
                               since="2023-12-20", log=lines.append)
    assert status.present == ["SOL-USD"] and status.fetched == ["BTC-USD"] and status.ok
    assert (tmp_path / "BTC-USD_1h.parquet").exists() and "fetched BTC-USD 1h" in lines[0]
    assert set(status.paths) == {"SOL-USD", "BTC-USD"}


def offline_exchange():
    """A real ccxt exchange whose every endpoint is a closed port on this machine."""
    exchange = make_exchange("binance", timeout_ms=2_000)

    def redirect(urls):
        return {k: redirect(v) if isinstance(v, dict) else "http://127.0.0.1:9/api" for k, v in urls.items()}

    exchange.urls["api"] = redirect(exchange.urls["api"])
    return exchange


def test_offline_is_a_clear_input_error():
    with pytest.raises(InputError) as info:
        fetch_bars("SOL-USD", "1h", offline_exchange(), since="2024-01-01")
    message = str(info.value)
    assert message.startswith("cannot reach binance to fetch SOL-USD 1h: you are offline")
    assert "python -m experiments.data import" in message and "source: synthetic" in message


def test_offline_ensure_local_data_raises(tmp_path):
    with pytest.raises(InputError, match="cannot reach binance"):
        ensure_local_data(["SOL-USD"], "1h", tmp_path, fetch=True, exchange=offline_exchange())


def test_fetch_cli_offline_exits_2(tmp_path, monkeypatch, capsys):
    import envs.trading.fetch as fetch

    monkeypatch.setattr(fetch, "make_exchange", lambda name, **_: offline_exchange())
    code = data_cli.main(["fetch", "SOL-USD", "--timeframe", "1h", "--data-dir", str(tmp_path)])
    assert code == 2
    assert "cannot reach binance to fetch SOL-USD 1h" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_fetch_cli_writes_the_cache(tmp_path, monkeypatch, capsys):
    import envs.trading.fetch as fetch

    monkeypatch.setattr(fetch, "make_exchange", lambda name, **_: FakeExchange())
    code = data_cli.main(["fetch", "SOL-USD", "BTC-USD", "--timeframe", "1h", "--since", "2023-12-25",
                          "--data-dir", str(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    assert "SOL-USD:" in out and "from fakex SOL/USDT" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["BTC-USD_1h.parquet", "SOL-USD_1h.parquet"]
