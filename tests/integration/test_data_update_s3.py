"""`python -m experiments.data update s3://...` against a real S3 API (moto's server, loopback): the dataset
object is replaced whole and the previous bytes are kept as a dated object under the same prefix."""

from __future__ import annotations

import io
import re

import pandas as pd
import pytest

from envs.trading.data import load_bars, save_bars
from experiments import data as data_cli
from tests.conftest import random_walk_bars
from tests.servers import TEST_CREDENTIALS, s3_server

BUCKET = "market"
KEY = "raw/TEST-USD_1h.parquet"


@pytest.fixture
def s3(monkeypatch):
    for name, value in TEST_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    with s3_server() as server:
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", server.endpoint)  # as a user of an S3-compatible store sets it
        server.create_bucket(BUCKET)
        yield server


def test_update_replaces_the_object_and_keeps_the_previous_one(s3, tmp_path, capsys):
    bars = random_walk_bars(300)
    old = save_bars(bars.iloc[:200], tmp_path / "old.parquet", "TEST-USD", "1h").read_bytes()
    s3.client().put_object(Bucket=BUCKET, Key=KEY, Body=old)
    source = tmp_path / "new.csv"
    bars.iloc[190:].to_csv(source)

    assert data_cli.main(["update", f"s3://{BUCKET}/{KEY}", "--from", str(source)]) == 0
    out = capsys.readouterr().out
    assert "appended 100 1h bars 2021-01-09 08:00 .. 2021-01-13 11:00" in out
    assert "overlap: 10 bars already stored and identical, skipped" in out
    [copy] = [key for key in s3.keys(BUCKET) if key != KEY]
    assert re.fullmatch(r"raw/TEST-USD_1h\.\d{8}T\d{6}Z\.parquet", copy)
    assert f"previous version kept as s3://{BUCKET}/{copy}" in out
    assert s3.read(BUCKET, copy) == old

    updated = pd.read_parquet(io.BytesIO(s3.read(BUCKET, KEY)))
    assert updated.attrs == {"symbol": "TEST-USD", "timeframe": "1h", "gaps": "ffill", "calendar": "24/7"}
    assert len(updated) == 300 and updated.index[-1] == bars.index[-1]
    assert load_bars(f"s3://{BUCKET}/{KEY}?endpoint_override={s3.endpoint}").index.equals(bars.index)
