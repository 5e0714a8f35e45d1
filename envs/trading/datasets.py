"""The bars a trading env_config reads, cut into its fold's train, validation and test parts (envs.datasets)."""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

import pandas as pd

from envs.datasets import DataPart, part_digest
from envs.splits import PARTS
from envs.trading.env import TradingConfig
from envs.trading.features.store import bars_digest
from envs.trading.sources import bars_path, load_source_bars


def data_parts(env_config: dict[str, Any]) -> list[DataPart]:
    """The three parts of the env_config's fold of its bars (the train part from its first row: the feature warm-up
    is read too); a part a refit leaves empty is left out."""
    cfg = TradingConfig.from_dict(env_config)
    bars = _bars(_source_key(cfg))
    label = _label(cfg)
    fold = cfg.split_protocol().fold(len(bars), cfg.fold, source=f"{label}: protocol")
    digest, stamps = bars_digest(bars), bars.index
    source = _generator(cfg) if cfg.source == "synthetic" else bars_path(cfg)
    parts = []
    for name in PARTS:
        start, end = fold.part(name)
        if end == start:
            continue
        parts.append(DataPart(label, name, part_digest(digest, start, end), source, end - start, f"{stamps[start]}",
                              f"{stamps[end - 1]}", fold.index))
    return parts


def _source_key(cfg: TradingConfig) -> tuple[tuple[str, Any], ...]:
    """The fields that choose the bars (a config itself holds lists, so it cannot key a cache), and a local file's
    size and time: bars appended to it since (experiments.data update) are other bars."""
    fields = ("source", "data_path", "data_dir", "symbol", "timeframe", "synthetic_model", "synthetic_bars",
              "synthetic_seed")
    path = Path(bars_path(cfg)) if cfg.source != "synthetic" else None
    stat = path.stat() if path is not None and path.is_file() else None
    return (*((name, getattr(cfg, name)) for name in fields),
            ("file", (stat.st_size, stat.st_mtime_ns) if stat else None))


@functools.lru_cache(maxsize=32)  # a sweep over 20 coins starts their trials interleaved with their folds
def _bars(source: tuple[tuple[str, Any], ...]) -> pd.DataFrame:
    """Cached per source: a sweep asks once per trial, and the folds of one file share its bars."""
    return load_source_bars(TradingConfig.from_dict({k: v for k, v in source if k != "file"}))


def _label(cfg: TradingConfig) -> str:
    """The file's stem (BTC-USD_1h), or for a generated market its symbol, timeframe, model and seed."""
    if cfg.source == "synthetic":
        return f"{cfg.symbol}_{cfg.timeframe or '1h'}-{cfg.synthetic_model}-{cfg.synthetic_seed}"
    return Path(bars_path(cfg).split("?")[0]).stem


def _generator(cfg: TradingConfig) -> str:
    text = f"synthetic:{cfg.synthetic_model}:{cfg.symbol}:{cfg.timeframe}:{cfg.synthetic_bars}:{cfg.synthetic_seed}"
    return f"{text}#{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def bars_part(source: str, bars: pd.DataFrame, part: str = "paper") -> DataPart:
    """All of a bars file as one part (e.g. the bars a paper-trading session replays: `part` "paper"); a file that
    grew since the last session is another digest."""
    stamps = bars.index
    return DataPart(Path(source.split("?")[0]).stem, part, part_digest(bars_digest(bars), 0, len(bars)), source,
                    len(bars), f"{stamps[0]}", f"{stamps[-1]}")
