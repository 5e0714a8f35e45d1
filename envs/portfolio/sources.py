"""Where a universe's bars come from: files, a wide table, or a seeded synthetic universe."""
from __future__ import annotations

from envs.portfolio.config import PortfolioConfig
from envs.portfolio.universe import Universe, build_universe, load_universe
from envs.trading.synthetic_universe import synthetic_universe


def load_config_universe(cfg: PortfolioConfig) -> Universe:
    """The universe an env_config names."""
    if cfg.source == "synthetic":
        frames = synthetic_universe(cfg.synthetic_assets, cfg.timeframe or "1h", cfg.synthetic_bars,
                                    cfg.synthetic_seed, planted=cfg.synthetic_model == "planted",
                                    signal=cfg.synthetic_signal)
        label = (f"SYNTHETIC {cfg.synthetic_model} universe of {cfg.synthetic_assets} assets (seed {cfg.synthetic_seed}, "
                 f"signal x{cfg.synthetic_signal:g})")
        return build_universe(frames, label, close_only=False)
    return load_universe(cfg.data_paths, cfg.table_path, cfg.assets, cfg.timeframe)
