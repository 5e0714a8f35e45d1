"""docs/operations.md's walk-through says which bars each model trained, was selected and was scored on: the dates are
recomputed here from conf/dqn_btc.yaml's walk-forward protocol on the bundled bars, cut where the walk-through cuts
them (an earlier version said the incremental challenger trained on the month after the champion's data, which was in
fact its test window)."""
from __future__ import annotations

import re

import pandas as pd
import yaml

from envs.splits import Protocol
from envs.trading.data import load_bars
from tests.conftest import REPO

DOC = (REPO / "docs" / "operations.md").read_text()
BARS = load_bars(REPO / "data" / "raw" / "BTC-USD_1h.parquet")
PROTOCOL = Protocol.from_dict(yaml.safe_load((REPO / "conf" / "dqn_btc.yaml").read_text())["evaluation"]["protocol"])


def newest_fold(last_bar: str) -> dict[str, tuple[str, str]]:
    """First and last bar (`YYYY-MM-DD HH:MM`) of each part of the newest fold on the bars up to `last_bar`."""
    bars = BARS[BARS.index <= pd.Timestamp(last_bar, tz="UTC")]
    fold = PROTOCOL.folds_for(len(bars))[-1]
    return {name: tuple(f"{bars.index[row]:%Y-%m-%d %H:%M}" for row in (fold.part(name)[0], fold.part(name)[1] - 1))
            for name in ("train", "validation", "test")}


def paragraph() -> str:
    start, end = DOC.index("The challenger is the newest fold"), DOC.index("Both models were then replayed")
    return " ".join(DOC[start:end].split())


def test_the_incremental_challengers_folds_are_the_ones_the_walk_through_names():
    text = paragraph()
    bars_end = re.search(r"\(up to (\d{4}-\d\d-\d\d \d\d:\d\d)\)", text).group(1)
    assert bars_end == "2019-09-17 09:00"
    fold = newest_fold(bars_end)
    assert f"it trains through {fold['train'][1]}," in text
    assert f"is selected on {fold['validation'][0]} .. {fold['validation'][1]}" in text
    assert f"scored on {fold['test'][0]} .. {fold['test'][1]}." in text


def test_the_champions_training_end_and_where_the_month_after_its_data_fell():
    text = paragraph()
    champion = newest_fold(re.search(r"on the bars up to (\d{4}-\d\d-\d\d \d\d:\d\d)\) was", text).group(1))
    assert f"trained through {champion['train'][1]}." in text
    challenger = newest_fold("2019-09-17 09:00")
    month_after = (pd.Timestamp("2019-08-18 10:00", tz="UTC"), pd.Timestamp("2019-09-17 09:00", tz="UTC"))
    test_start = pd.Timestamp(challenger["test"][0], tz="UTC")
    assert test_start <= month_after[0] and pd.Timestamp(challenger["train"][1], tz="UTC") < month_after[0]
    assert "is in the challenger's test window, not in its training" in text
