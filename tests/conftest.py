"""Shared fixtures: small real-looking bar files written to a temp folder, and the repo paths."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

pytest_plugins = ["tests.lanes"]  # the fast and the slow lane (tests/README.md)

REPO = Path(__file__).resolve().parents[1]


def shipped_experiments() -> list[Path]:
    """The shipped experiment files (conf/*.yaml), without the listings of several (conf/agents.yaml)."""
    from experiments.config.listing import is_listing

    return [path for path in sorted((REPO / "conf").glob("*.yaml")) if not is_listing(path)]


def random_walk_bars(
    n: int = 600, seed: int = 0, start: str = "2021-01-01", freq: str = "1h"
) -> pd.DataFrame:
    """Geometric random-walk OHLCV bars that satisfy every invariant of validate_bars."""
    rng = np.random.default_rng(seed)
    closes = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, n)))
    opens = np.concatenate([[100.0], closes[:-1]]) * np.exp(rng.normal(0, 0.001, n))
    highs = np.maximum(opens, closes) * (1 + rng.uniform(0, 0.005, n))
    lows = np.minimum(opens, closes) * (1 - rng.uniform(0, 0.005, n))
    index = pd.date_range(start, periods=n, freq=freq, tz="UTC", name="timestamp")
    return pd.DataFrame(
        {"open": opens, "high": highs, "low": lows, "close": closes, "volume": rng.uniform(1, 10, n)},
        index=index,
    )


@pytest.fixture
def bars_file(tmp_path: Path) -> Path:
    from envs.trading.data import save_bars

    return save_bars(random_walk_bars(), tmp_path / "TEST-USD_1h.parquet", "TEST-USD", "1h")


def bare_market(opens, closes):
    """A trading market of the given bars with one constant feature, every part the whole series: prices alone
    decide a walk through it."""
    from envs.splits import Fold
    from envs.trading.env import Market

    n = len(closes)
    whole = (0, n)
    return Market(timestamps=pd.date_range("2022-01-01", periods=n, freq="1h", tz="UTC").to_numpy(),
                  opens=np.asarray(opens, dtype=np.float64), closes=np.asarray(closes, dtype=np.float64),
                  features=np.zeros((n, 1)), bounds={"train": whole, "validation": whole, "test": whole},
                  timeframe="1h", fold=Fold(0, whole, whole, whole), bars_per_year=8760.0)


def paper_replay_of_test_window(reader, policy, bars, env):
    """Paper-trade `env`'s test window of `bars` bar by bar, deciding through the served model's `reader` as
    `experiments.paper` does; returns the equity at each close and the paper book (its ledger's trades)."""
    from envs.trading.paper import new_book, replay

    lo, hi = env.market.bounds["test"]

    def decide(window: pd.DataFrame, held: float) -> float:
        return float(reader.decide(window.assign(position=held), policy)["target_position"].iloc[0])

    book = new_book(reader)
    return replay(book, bars, range(lo, hi), reader.bars_needed, decide), book


def daily_csv(bars: pd.DataFrame, path: Path) -> Path:
    """Daily bars as a plain CSV export (`date,open,high,low,close,volume`), for the importer's tests."""
    rows = [f"{t:%Y-%m-%d},{o},{h},{lo},{c},{v}"
            for t, (o, h, lo, c, v) in zip(bars.index, bars.to_numpy(), strict=True)]
    path.write_text("date,open,high,low,close,volume\n" + "\n".join(rows) + "\n")
    return path
