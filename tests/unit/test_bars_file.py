"""The bars file paper trading reads: a CSV export through the importer's checks (paper trading refused CSV with
"not a readable parquet file"), only its appended rows under --follow, and the model's symbol, timeframe and holes
checked before any MLflow run opens."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import envs.trading.bars_file as bars_file
from envs.errors import InputError
from envs.trading.bars_file import BarsFile
from envs.trading.data import load_bars, save_bars
from tests.conftest import REPO

BARS = load_bars(REPO / "data" / "raw" / "BTC-USD_1h.parquet").iloc[-400:]


def csv_text(bars: pd.DataFrame) -> str:
    """A generic export: ISO open times, oldest first, one line per bar."""
    frame = bars.reset_index()
    frame["timestamp"] = frame["timestamp"].dt.strftime("%Y-%m-%d %H:%M:%S")
    return frame.to_csv(index=False, float_format="%.17g")


def same_bars(read: pd.DataFrame, expected: pd.DataFrame) -> bool:
    return read.index.equals(expected.index) and np.array_equal(read.to_numpy(), expected.to_numpy())


def test_a_csv_export_reads_as_its_bars(tmp_path):
    path = tmp_path / "bars.csv"
    path.write_text(csv_text(BARS))
    assert same_bars(BarsFile(str(path), "BTC-USD", "1h").read(), BARS)


def test_a_cryptodatadownload_export_newest_first_reads_oldest_first(tmp_path):
    frame = BARS.iloc[::-1].reset_index()
    lines = ["https://www.CryptoDataDownload.com", "Unix,Date,Symbol,Open,High,Low,Close,Volume BTC,Volume USD"]
    lines += [f"{int(t.timestamp())},{t:%Y-%m-%d %I-%p},BTCUSD,{o!r},{h!r},{lo!r},{c!r},{v!r},{v * c!r}"
              for t, o, h, lo, c, v in frame[["timestamp", "open", "high", "low", "close", "volume"]].itertuples(False)]
    path = tmp_path / "Coinbase_BTCUSD_1h.csv"
    path.write_text("\n".join(lines) + "\n")
    assert same_bars(BarsFile(str(path), "BTC-USD", "1h").read(), BARS)


def test_following_a_csv_reads_only_the_appended_rows_and_checks_the_seam(tmp_path, monkeypatch):
    path = tmp_path / "live.csv"
    text = csv_text(BARS)
    lines = text.splitlines(keepends=True)
    path.write_text("".join(lines[:301]))  # the header and 300 bars
    read = []
    real_import = bars_file.import_csv
    monkeypatch.setattr(bars_file, "import_csv", lambda *a, **k: read.append(k["text"]) or real_import(*a, **k))
    follower = BarsFile(str(path), "BTC-USD", "1h", follow=True)
    assert same_bars(follower.read(), BARS.iloc[:300])
    with path.open("a") as handle:
        handle.write("".join(lines[301:351]) + lines[351][:20])  # 50 bars, and the next one half written
    assert same_bars(follower.read(), BARS.iloc[:350])
    assert read[-1].splitlines()[0] == lines[0].strip() and len(read[-1].splitlines()) == 1 + 1 + 50
    with path.open("a") as handle:
        handle.write(lines[351][20:] + "".join(lines[352:]))
    assert same_bars(follower.read(), BARS)
    assert len(read[-1].splitlines()) == 1 + 1 + 50  # the bar of the seam, then the 49 + 1 new ones
    assert len(read) == 3
    path.write_text("".join(lines[:201]))  # rewritten, not appended: read whole again
    assert same_bars(follower.read(), BARS.iloc[:200])


def test_a_hole_at_the_seam_of_appended_rows_is_refused(tmp_path):
    path = tmp_path / "live.csv"
    lines = csv_text(BARS).splitlines(keepends=True)
    path.write_text("".join(lines[:101]))
    follower = BarsFile(str(path), "BTC-USD", "1h", follow=True)
    follower.read()
    with path.open("a") as handle:
        handle.write("".join(lines[104:120]))
    with pytest.raises(InputError, match=r"live.csv: 3 missing bars.*does not record them.*--gaps drop"):
        follower.read()


@pytest.mark.parametrize("edit, fragment", [
    (lambda frame: frame.assign(Symbol="ETHUSD"), "holds ETHUSD bars but the model trades BTC-USD"),
    (lambda frame: frame.rename(columns={"volume": "Volume ETH"}), "holds ETH bars but the model trades BTC-USD"),
    (lambda frame: frame.drop(index=[50, 51]), "2 missing bars"),
    (lambda frame: frame.iloc[::4], "contradicts the data, whose bars are 4h apart"),
])
def test_a_csv_that_does_not_fit_the_model_is_refused_in_one_line(tmp_path, edit, fragment):
    path = tmp_path / "bars.csv"
    frame = pd.read_csv(pd.io.common.StringIO(csv_text(BARS)))
    edit(frame).to_csv(path, index=False)
    with pytest.raises(InputError) as refused:
        BarsFile(str(path), "BTC-USD", "1h").read()
    assert fragment in str(refused.value) and "\n" not in str(refused.value)


def test_parquet_holes_are_read_where_the_file_records_them_and_other_timeframes_refused(tmp_path):
    holed = BARS.drop(BARS.index[100:110])
    kept = BarsFile(str(save_bars(holed, tmp_path / "kept.parquet", "BTC-USD", "1h", gaps="drop")), "BTC-USD", "1h")
    assert same_bars(kept.read(), holed)
    with pytest.raises(InputError, match="10 missing bars"):
        load_bars(save_bars(holed, tmp_path / "filled.parquet", "BTC-USD", "1h"))
    daily = save_bars(load_bars(REPO / "data" / "raw" / "BTC-USD_1d.parquet"), tmp_path / "d.parquet", "BTC-USD", "1d")
    with pytest.raises(InputError, match="holds 1d bars but the model trades 1h bars"):
        BarsFile(str(daily), "BTC-USD", "1h").read()
    other = save_bars(BARS, tmp_path / "eth.parquet", "ETH-USD", "1h")
    with pytest.raises(InputError, match="holds ETH-USD bars but the model trades BTC-USD"):
        BarsFile(str(other), "BTC-USD", "1h").read()
