"""Where a universe's bars come from: files, a wide table, or a seeded synthetic universe; and the key that names
them in caches: the env_config's fields that choose the bars plus each file's content digest, so a file rewritten in
one process (a notebook, paper trading, the API) is read again, as the feature store does."""
from __future__ import annotations

import functools
import json

from envs.errors import InputError
from envs.portfolio.config import PortfolioConfig
from envs.portfolio.universe import Universe, build_universe, load_universe
from envs.trading.features.store import file_digest
from envs.trading.synthetic_universe import synthetic_universe

# What names a universe's bars: envs whose env_configs agree on these read the same universe, whatever their fold.
SOURCE_FIELDS = ("source", "data_paths", "table_path", "assets", "timeframe", "synthetic_assets", "synthetic_bars",
                 "synthetic_seed", "synthetic_model", "synthetic_signal")
CONTENT_KEY = "content"  # the digests' place in a source key


def content_digest(path: str, what: str) -> str | None:
    """The digest of a file's bytes (a local file is hashed again only when its size or time changes; a URI is read
    each time), or None for a file that cannot be read: its loader then says what is wrong with it."""
    try:
        return file_digest(path, what)
    except InputError:
        return None


def source_key(cfg: PortfolioConfig) -> str:
    """The fields that choose `cfg`'s bars and the content digest of each file they name."""
    fields = {key: getattr(cfg, key) for key in SOURCE_FIELDS}
    files = [(path, "data file") for path in cfg.data_paths or []] + (
        [(cfg.table_path, "wide table")] if cfg.table_path else [])
    digests = [content_digest(path, what) for path, what in files] if cfg.source == "file" else []
    return json.dumps({**fields, CONTENT_KEY: digests}, sort_keys=True)


def load_config_universe(cfg: PortfolioConfig) -> Universe:
    """The universe an env_config names, read once per process for all its folds while its files' content stays the
    same: a run's dry run builds every fold's env, and the 500-asset file's synthetic universe alone takes seconds."""
    return _universe(source_key(cfg))


@functools.lru_cache(maxsize=8)
def _universe(key: str) -> Universe:
    fields = json.loads(key)
    del fields[CONTENT_KEY]
    cfg = PortfolioConfig.from_dict(fields)
    if cfg.source == "synthetic":
        frames = synthetic_universe(cfg.synthetic_assets, cfg.timeframe or "1h", cfg.synthetic_bars,
                                    cfg.synthetic_seed, planted=cfg.synthetic_model == "planted",
                                    signal=cfg.synthetic_signal)
        label = (f"SYNTHETIC {cfg.synthetic_model} universe of {cfg.synthetic_assets} assets "
                 f"(seed {cfg.synthetic_seed}, signal x{cfg.synthetic_signal:g})")
        return build_universe(frames, label, close_only=False)
    return load_universe(cfg.data_paths, cfg.table_path, cfg.assets, cfg.timeframe)
