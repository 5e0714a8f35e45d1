"""A universe's market is cached per process by its files' content, not by the env_config that names them: a table or
bars file rewritten in one process (a notebook, paper trading, the API) gives the new prices, an untouched one the
cached market."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from envs.portfolio.config import PortfolioConfig
from envs.portfolio.market import load_portfolio_market
from envs.portfolio.sources import load_config_universe
from envs.trading.data import save_bars

CONFIG = {"window": 4, "decision_interval": 1, "episode_length": None, "timeframe": "1d",
          "features": ["log_return", {"transform": "volatility", "window": 12}]}
DAYS = 400


def closes(seed: int) -> dict[str, np.ndarray]:
    """Three assets' daily closes between 100 and 999, so that a table of six decimals keeps its size."""
    rng = np.random.default_rng(seed)
    return {name: np.clip(300.0 * np.exp(np.cumsum(rng.normal(0.0, 0.01, DAYS))), 100.0, 999.0)
            for name in ("AAA", "BBB", "CCC")}


def write_table(path: Path, prices: dict[str, np.ndarray]) -> None:
    table = pd.DataFrame({"date": pd.date_range("2022-01-01", periods=DAYS, freq="D").strftime("%Y-%m-%d"),
                          **{f"{name}:close": values for name, values in prices.items()}})
    table.to_csv(path, index=False, float_format="%.6f")


def test_a_table_rewritten_in_the_same_process_gives_its_new_prices(tmp_path: Path) -> None:
    path = tmp_path / "closes.csv"
    old, new = closes(1), closes(2)
    write_table(path, old)
    config = {**CONFIG, "table_path": str(path)}
    first = load_portfolio_market(PortfolioConfig.from_dict(config))
    assert load_portfolio_market(PortfolioConfig.from_dict(config)) is first  # unchanged files: the cached market
    size = path.stat().st_size
    write_table(path, new)
    assert path.stat().st_size == size  # the same size: only the content and the time tell the tables apart
    second = load_portfolio_market(PortfolioConfig.from_dict(config))
    np.testing.assert_allclose(first.universe.closes, np.column_stack(list(old.values())), atol=1e-6)
    np.testing.assert_allclose(second.universe.closes, np.column_stack(list(new.values())), atol=1e-6)


def test_a_bars_file_rewritten_in_the_same_process_gives_its_new_universe(tmp_path: Path) -> None:
    index = pd.date_range("2022-01-01", periods=DAYS, freq="D", tz="UTC", name="timestamp")

    def write(prices: dict[str, np.ndarray]) -> list[str]:
        paths = []
        for name, close in prices.items():
            bars = pd.DataFrame({"open": close, "high": close * 1.01, "low": close * 0.99, "close": close,
                                 "volume": 1.0}, index=index)
            paths.append(str(save_bars(bars, tmp_path / f"{name}-USD_1d.parquet", f"{name}-USD", "1d")))
        return paths

    paths = write(closes(3))
    config = PortfolioConfig.from_dict({**CONFIG, "data_paths": paths, "timeframe": None})
    before = load_config_universe(config).closes
    new = closes(4)
    write(new)
    np.testing.assert_allclose(load_config_universe(config).closes, np.column_stack(list(new.values())), rtol=1e-12)
    assert not np.allclose(before, np.column_stack(list(new.values())))
