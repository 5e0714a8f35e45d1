"""The universe a portfolio env_config reads, cut into its fold's train, validation and test parts (envs.datasets)."""
from __future__ import annotations

import functools
import json
from typing import Any

from envs.datasets import DataPart, part_digest
from envs.portfolio.config import PortfolioConfig
from envs.portfolio.sources import load_config_universe
from envs.portfolio.universe import Universe
from envs.splits import PARTS

SOURCE_FIELDS = ("source", "data_paths", "table_path", "assets", "timeframe", "synthetic_assets", "synthetic_bars",
                 "synthetic_seed", "synthetic_model", "synthetic_signal")


def data_parts(env_config: dict[str, Any]) -> list[DataPart]:
    """The three parts of the env_config's fold of its universe's calendar, one dataset for all its assets."""
    cfg = PortfolioConfig.from_dict(env_config)
    universe = _universe(json.dumps({key: getattr(cfg, key) for key in SOURCE_FIELDS}, sort_keys=True))
    n = len(universe.timestamps)
    fold = cfg.split_protocol().fold(n, cfg.fold, source=f"{universe.source}: protocol")
    digest = universe.window_digest(((0, n),))
    stamps = universe.timestamps
    return [DataPart(universe.label, name, part_digest(digest, *fold.part(name)), universe.source, end - start,
                     f"{stamps[start]}", f"{stamps[end - 1]}", fold.index)
            for name in PARTS for start, end in (fold.part(name),)]


@functools.lru_cache(maxsize=8)  # the folds of one universe ask once each
def _universe(fields: str) -> Universe:
    return load_config_universe(PortfolioConfig.from_dict(json.loads(fields)))
