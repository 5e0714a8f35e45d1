"""Where a trading env's bars come from: a parquet file, a symbol in a data folder, or a synthetic market."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Protocol

import pandas as pd

from envs.errors import InputError
from envs.trading.canaries import planted_signal_bars, random_walk_bars
from envs.trading.data import load_bars
from envs.trading.synthetic import synthetic_bars


class BarsSource(Protocol):
    """The settings of a trading env config (envs.trading.env.TradingConfig) that say where its bars come from."""

    source: str
    data_path: str | None
    data_dir: str
    symbol: str
    timeframe: str | None
    synthetic_bars: int
    synthetic_seed: int
    synthetic_model: str


def bars_path(cfg: BarsSource) -> str:
    """The parquet for a file-backed config: data_path (a path or an s3:// URI), else
    <data_dir>/<symbol>_<timeframe>.parquet."""
    if cfg.data_path:
        return cfg.data_path
    return str(Path(cfg.data_dir) / f"{cfg.symbol}_{cfg.timeframe or '1h'}.parquet")


# synthetic_model -> generator(symbol, timeframe, n_bars, seed) of SYNTHETIC bars.
SYNTHETIC_MODELS: dict[str, Callable[[str, str, int, int], pd.DataFrame]] = {
    "regimes": synthetic_bars,                # crypto-like: regimes, GARCH-t volatility (the default)
    "random_walk": random_walk_bars,          # canary: nothing is predictable
    "planted_signal": planted_signal_bars,    # canary: a strong, learnable edge
}


def load_source_bars(cfg: BarsSource) -> pd.DataFrame:
    if cfg.source == "synthetic":
        generate = SYNTHETIC_MODELS[cfg.synthetic_model]
        return generate(cfg.symbol, cfg.timeframe or "1h", cfg.synthetic_bars, cfg.synthetic_seed)
    path = bars_path(cfg)
    if not cfg.data_path and not Path(path).exists():
        raise InputError(f"{path}: no local data for {cfg.symbol} {cfg.timeframe or '1h'}: fetch it with "
                         f"python -m experiments.data fetch {cfg.symbol} --timeframe {cfg.timeframe or '1h'} "
                         "(needs network), import a CSV export, or set source: synthetic")
    return load_bars(path, cfg.timeframe)
