"""The bars files a portfolio env_config reads, for `python -m experiments.data update --universe CONF`: each asset's
file of `data_paths`. A wide table (`table_path`) is replaced whole, not appended to, and generated data has none."""
from __future__ import annotations

from typing import Any

from envs.errors import InputError
from envs.portfolio.config import PortfolioConfig


def universe_files(env_config: dict[str, Any], source: str) -> list[str]:
    cfg = PortfolioConfig.from_dict(env_config)
    if cfg.source == "synthetic":
        raise InputError(f"{source}: environment.env_config.source is synthetic: a generated universe has no files "
                         "to update")
    if not cfg.data_paths:
        raise InputError(f"{source}: environment.env_config.table_path: a wide table is replaced whole: import the "
                         "newer table with python -m experiments.data import TABLE --universe --force (update "
                         "appends to the bars files of data_paths)")
    return list(cfg.data_paths)
