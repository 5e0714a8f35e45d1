"""Where a universe's bars come from: files, a wide table, or a seeded synthetic universe."""
from __future__ import annotations

import functools
import json

from envs.portfolio.config import PortfolioConfig
from envs.portfolio.universe import Universe, build_universe, load_universe
from envs.trading.synthetic_universe import synthetic_universe

# What names a universe's bars: envs whose env_configs agree on these read the same universe, whatever their fold.
SOURCE_FIELDS = ("source", "data_paths", "table_path", "assets", "timeframe", "synthetic_assets", "synthetic_bars",
                 "synthetic_seed", "synthetic_model", "synthetic_signal")


def load_config_universe(cfg: PortfolioConfig) -> Universe:
    """The universe an env_config names, read once per process for all its folds: a run's dry run builds every fold's
    env, and the 500-asset file's synthetic universe alone takes seconds to make."""
    return _universe(json.dumps({key: getattr(cfg, key) for key in SOURCE_FIELDS}, sort_keys=True))


@functools.lru_cache(maxsize=8)
def _universe(fields: str) -> Universe:
    cfg = PortfolioConfig.from_dict(json.loads(fields))
    if cfg.source == "synthetic":
        frames = synthetic_universe(cfg.synthetic_assets, cfg.timeframe or "1h", cfg.synthetic_bars,
                                    cfg.synthetic_seed, planted=cfg.synthetic_model == "planted",
                                    signal=cfg.synthetic_signal)
        label = (f"SYNTHETIC {cfg.synthetic_model} universe of {cfg.synthetic_assets} assets "
                 f"(seed {cfg.synthetic_seed}, signal x{cfg.synthetic_signal:g})")
        return build_universe(frames, label, close_only=False)
    return load_universe(cfg.data_paths, cfg.table_path, cfg.assets, cfg.timeframe)
