"""The universe a portfolio env_config reads, cut into its fold's train, validation and test parts (envs.datasets)."""
from __future__ import annotations

from typing import Any

from envs.datasets import DataPart, part_digest
from envs.portfolio.config import PortfolioConfig
from envs.portfolio.sources import load_config_universe
from envs.splits import PARTS


def data_parts(env_config: dict[str, Any]) -> list[DataPart]:
    """The three parts of the env_config's fold of its universe's calendar, one dataset for all its assets; a part a
    refit leaves empty is left out."""
    cfg = PortfolioConfig.from_dict(env_config)
    universe = load_config_universe(cfg)
    n = len(universe.timestamps)
    fold = cfg.split_protocol().fold(n, cfg.fold, source=f"{universe.source}: protocol")
    digest = universe.window_digest(((0, n),))
    stamps = universe.timestamps
    return [DataPart(universe.label, name, part_digest(digest, *fold.part(name)), universe.source, end - start,
                     f"{stamps[start]}", f"{stamps[end - 1]}", fold.index)
            for name in PARTS for start, end in (fold.part(name),) if end > start]
