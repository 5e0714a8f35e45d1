"""Bars of another coin are refused wherever the file says which coin it holds (issue 39, point 5).

A CryptoDataDownload export names its market in a `Symbol` column (`ETHUSD`) and the base asset in its volume
column (`Volume ETH`); a bars parquet in its metadata. `update` and `import --symbol` read that statement and
refuse a mismatch in one line, while the same market spelled by another exchange (`ETH/USD`, `XBTUSD`,
`ETHUSDT`) is accepted."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from envs.errors import InputError
from envs.trading.csv_import import stated_symbol
from envs.trading.data import load_bars, save_bars
from envs.trading.symbols import check_symbol, same_symbol
from experiments import data as data_cli
from tests.conftest import random_walk_bars

ALL = random_walk_bars(300)
STORED = 200


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return save_bars(ALL.iloc[:STORED], tmp_path / "data" / "BTC-USD_1h.parquet", "BTC-USD", "1h")


def cdd_csv(tmp_path: Path, symbol: str | None, base: str = "ETH", name: str = "export.csv") -> Path:
    """CryptoDataDownload's layout: a URL line, `Unix,Date,Symbol,...,Volume <BASE>,Volume USD`, newest first
    (`symbol=None`: the same file without its Symbol column)."""
    bars = ALL.iloc[STORED - 10:]
    rows = [[str(int(t.timestamp() * 1000)), f"{t:%Y-%m-%d %H:%M:%S}", str(symbol),
             *(repr(float(x)) for x in (o, h, lo, c, v)), repr(float(v * c))]
            for t, (o, h, lo, c, v) in zip(bars.index[::-1], bars.to_numpy()[::-1], strict=True)]
    header = ["Unix", "Date", "Symbol", "Open", "High", "Low", "Close", f"Volume {base}", "Volume USD"]
    keep = [i for i, column in enumerate(header) if symbol is not None or column != "Symbol"]
    lines = [",".join(header[i] for i in keep), *(",".join(row[i] for i in keep) for row in rows)]
    path = tmp_path / name
    path.write_text("https://www.CryptoDataDownload.com\n" + "\n".join(lines) + "\n")
    return path


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def refusal(code: int, capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), captured
    return lines[0]


@pytest.mark.parametrize("symbol, base", [("ETHUSD", "ETH"), (None, "ETH"), ("ETH/USD", "ETH")])
def test_update_refuses_an_export_of_another_coin(dataset, tmp_path, capsys, symbol, base):
    source = cdd_csv(tmp_path, symbol, base)
    before = snapshot(dataset.parent)
    line = refusal(data_cli.main(["update", str(dataset), "--from", str(source)]), capsys)
    stated = symbol or base
    assert str(source) in line and f"holds {stated} bars" in line and "holds BTC-USD" in line, line
    assert snapshot(dataset.parent) == before


@pytest.mark.parametrize("symbol", ["BTCUSD", "BTC/USD", "BTC-USD", "XBTUSD", "BTCUSDT", None])
def test_update_takes_the_same_market_spelled_otherwise(dataset, tmp_path, capsys, symbol):
    source = cdd_csv(tmp_path, symbol, base="XBT" if symbol == "XBTUSD" else "BTC")
    assert data_cli.main(["update", str(dataset), "--from", str(source)]) == 0, capsys.readouterr().err
    assert "appended 100 1h bars" in capsys.readouterr().out
    assert len(load_bars(dataset)) == len(ALL)


def test_update_refuses_a_symbol_the_file_contradicts(dataset, tmp_path, capsys):
    source = cdd_csv(tmp_path, "BTCUSD", "BTC")
    line = refusal(data_cli.main(["update", str(dataset), "--from", str(source), "--symbol", "ETH-USD"]), capsys)
    assert str(source) in line and "holds BTCUSD bars" in line and "--symbol is ETH-USD" in line, line


def test_import_refuses_a_symbol_the_file_contradicts(tmp_path, capsys):
    source = cdd_csv(tmp_path, "ETHUSD")
    out = tmp_path / "out.parquet"
    args = ["import", str(source), "--timeframe", "1h", "--out", str(out)]
    line = refusal(data_cli.main([*args, "--symbol", "BTC-USD"]), capsys)
    assert str(source) in line and "holds ETHUSD bars" in line and "--symbol is BTC-USD" in line, line
    assert not out.exists()
    assert data_cli.main([*args, "--symbol", "ETH-USD"]) == 0
    assert load_bars(out).attrs["symbol"] == "ETH-USD"


def test_stated_symbol_reads_a_path_or_a_frame(tmp_path):
    assert stated_symbol(cdd_csv(tmp_path, "ETHUSD")) == "ETHUSD"
    assert stated_symbol(cdd_csv(tmp_path, None, "ETH")) == "ETH"
    assert stated_symbol(save_bars(ALL, tmp_path / "x.parquet", "ETH-USD", "1h")) == "ETH-USD"
    assert stated_symbol(pd.DataFrame({"Symbol": ["SOL/USDT"] * 2, "Close": [1.0, 2.0]})) == "SOL/USDT"
    assert stated_symbol(ALL) is None  # plain bars say nothing about their market
    mixed = pd.DataFrame({"symbol": ["ETHUSD", "BTCUSD"], "close": [1.0, 2.0]})
    with pytest.raises(InputError, match=r"^mixed.csv: holds bars of several symbols \(ETHUSD, BTCUSD\)"):
        stated_symbol(mixed, "mixed.csv")


@pytest.mark.parametrize("stated, expected", [
    ("ETHUSD", "ETH-USD"), ("ETH/USD", "ETH-USD"), ("eth-usd", "ETH-USD"), ("ETH-USDT", "ETHUSDT"),
    ("ETHUSDT", "ETH-USD"), ("XBTUSD", "BTC-USD"), ("XBT/EUR", "BTC-EUR"), ("ETH", "ETH-USD"), ("XBT", "BTC-USD"),
    ("ETHBTC", "ETH-BTC"), ("DOTUSD", "DOT-USD"), ("BNBUSD", "BNB-USD"), (None, "BTC-USD"),
])
def test_check_symbol_takes_one_market_however_it_is_spelled(stated, expected):
    assert stated is None or same_symbol(stated, expected)  # the one rule it applies, both ways
    assert stated is None or same_symbol(expected, stated)
    assert check_symbol(stated, expected, "bars.csv") is None  # accepted: nothing refused


@pytest.mark.parametrize("stated, expected", [
    ("ETHUSD", "BTC-USD"), ("ETH", "BTC-USD"), ("ETHBTC", "ETH-USD"), ("BTC-EUR", "BTC-USD"),
])
def test_check_symbol_refuses_another_market_in_one_line(stated, expected):
    with pytest.raises(InputError) as caught:
        check_symbol(stated, expected, "bars.csv", "the model trades")
    message = str(caught.value)
    assert message.startswith(f"bars.csv: holds {stated} bars but the model trades {expected}: ")
    assert "\n" not in message
