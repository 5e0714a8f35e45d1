"""A universe made ready for one fold: its calendar cut into parts, each asset's features normalized on the fold's
train rows, and which assets can trade at each decision.

Features are each asset's own (the feature lists of trading/Spot-v0, computed on that asset's bars alone and cached
by content in the feature store), z-scored with that asset's own train statistics, so one network reads every asset
on one scale. An asset with no complete feature row in the train part (listed later) is scaled with the mean of
the other assets' statistics. An asset can trade at decision row t when its observation is whole (its features
complete over the whole window) and it has a bar at t+1 to fill at.

A feature with `cross_section: rank | zscore` is replaced, once the assets are on the calendar, by its rank or
z-score across the assets whose value is finite at that row (envs.portfolio.inputs), and is not z-scored again
with the asset's own train statistics (its mean and std are stored as 0 and 1): a rank already lies on one scale
for every asset, and a per-asset rescaling would undo what the cross-section compares (asset A's 0.5 would no
longer mean what asset B's does). Under `window_normalization: last_close` the market also keeps each asset's
close, high and low (close only when close-only) on the calendar rows, NaN outside its span, for the env to divide
by each window's last close.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from envs.errors import InputError
from envs.portfolio.config import PortfolioConfig
from envs.portfolio.inputs import apply_cross_sections, price_columns
from envs.portfolio.sources import content_digest, load_config_universe, source_key
from envs.portfolio.universe import Universe, close_only_refusal
from envs.splits import Fold
from envs.trading.calendar import bars_per_year, check_calendar
from envs.trading.features import market_features
from envs.trading.features.matrix import apply_normalization
from envs.trading.features.spec import column_cross_sections, file_sources

SPLITS = ("train", "validation", "test")
# Keys that change how the env trades a market, not the market: envs that differ only in these share one.
TRADING_KEYS = ("split", "episode_length", "fee_bps", "slippage_bps", "weights", "kappa", "gross_cap", "reward_scale")
MARKETS_KEPT = 16  # markets kept per process, the most recently used: files get rewritten, folds and configs vary
_markets: dict[str, "PortfolioMarket"] = {}


@dataclass(frozen=True)
class PortfolioMarket:
    """One fold of a universe, as the env and the scorer read it."""

    universe: Universe
    features: np.ndarray            # (N, T, F) float32, normalized; 0 where not known
    tradable: np.ndarray            # (T, N) bool: can be given weight at a decision at row t
    bounds: dict[str, tuple[int, int]]  # part -> [first decision row, last fill row + 1)
    fold: Fold
    feature_names: tuple[str, ...]
    feature_warmup: int
    bars_per_year: float
    test_windows: tuple[tuple[int, int], ...]
    feature_mean: np.ndarray        # (N, F): what a served model normalizes each asset's features with
    feature_std: np.ndarray
    window_prices: np.ndarray | None = None  # (N, T, P) under last_close: the prices a window is divided by
    price_names: tuple[str, ...] = ()        # their columns (close first)

    @property
    def timestamps(self):  # noqa: ANN201 - a pandas DatetimeIndex
        return self.universe.timestamps


def load_portfolio_market(cfg: PortfolioConfig) -> PortfolioMarket:
    """The universe of `cfg`, its fold and its features (see the module docstring); InputError naming the key. Once
    per process while the files it reads keep their content (the universe's and those its features read): RLlib's env
    runners build 32 envs of one config, and 500 assets take seconds to read and featurize."""
    key = market_key(cfg)
    market = _markets.pop(key, None)
    if market is None:
        market = _load_market(cfg)
    _markets[key] = market  # most recently used last
    if len(_markets) > MARKETS_KEPT:
        del _markets[next(iter(_markets))]
    return market


def market_key(cfg: PortfolioConfig) -> str:
    """What names a fold's market: every key but those that only change how it is traded, the universe's source key
    (with its files' digests) and the digest of every file its features read (another market, an outside series)."""
    features = [content_digest(path, "feature source file") for path in file_sources(cfg.feature_items())]
    return json.dumps({"config": cfg.model_dump(exclude=set(TRADING_KEYS)), "source": source_key(cfg),
                       "features": features}, sort_keys=True, default=str)


def _load_market(cfg: PortfolioConfig) -> PortfolioMarket:
    universe = load_config_universe(cfg)
    items = cfg.feature_items()
    where = "environment.env_config.features"
    if universe.close_only:
        close_only_refusal(items, where)
    calendar = cfg.calendar
    if calendar is not None:
        check_calendar(universe.timestamps, universe.timeframe, calendar, universe.source)
    n = len(universe.timestamps)
    protocol = cfg.split_protocol()
    min_rows = max(cfg.window, 3, 2 * cfg.decision_interval)
    fold = protocol.fold(n, cfg.fold, min_rows=min_rows, source=f"{universe.source}: calendar of {n} bars: protocol")
    test_windows = tuple(f.test for f in protocol.folds_for(n, min_rows=min_rows))
    raws = []
    for symbol, frame in zip(universe.symbols, universe.frames, strict=True):
        raw, _, _ = market_features(items, frame, universe.timeframe, cfg.feature_store, f"{where} ({symbol})")
        raws.append(raw)
    modes = column_cross_sections(items)
    names = tuple(f"{mode}({name})" if mode else name for name, mode in zip(raws[0].names, modes, strict=True))
    warmup = max(raw.warmup for raw in raws)
    first_rows = universe.first_rows
    features, complete = _on_calendar(raws, first_rows, n)
    features = apply_cross_sections(features, modes)
    mean, std = _train_statistics(features, complete, fold.train)
    crossed = np.array([mode is not None for mode in modes])
    mean[:, crossed], std[:, crossed] = 0.0, 1.0  # on one scale across assets already (module docstring)
    normalized = np.stack([apply_normalization(features[i], mean[i], std[i]) for i in range(universe.n_assets)])
    normalized[~np.broadcast_to(complete.T[:, :, None], normalized.shape)] = 0.0
    tradable = _tradable(complete, universe.listed, cfg.window)
    bounds = {name: fold.part(name) for name in SPLITS}
    first = int(np.argmax(tradable.sum(axis=1) >= 2)) if (tradable.sum(axis=1) >= 2).any() else n
    train_start, train_end = bounds["train"]
    bounds["train"] = (max(train_start, first), train_end)
    if bounds["train"][1] - bounds["train"][0] < min_rows:
        raise InputError(f"{universe.source}: fold {fold.index}: the train part ({train_start}..{train_end}) has "
                         f"{max(bounds['train'][1] - bounds['train'][0], 0)} rows at which two assets can trade "
                         f"after the features' warm-up ({warmup} bars) and the window ({cfg.window}), fewer than "
                         f"{min_rows}: use a longer history, fewer folds or shorter windows")
    prices = price_columns(universe.close_only) if cfg.window_normalization == "last_close" else ()
    return PortfolioMarket(
        universe=universe, features=normalized, tradable=tradable, bounds=bounds, fold=fold, feature_names=names,
        feature_warmup=warmup, bars_per_year=bars_per_year(universe.timestamps, universe.timeframe, calendar),
        test_windows=test_windows, feature_mean=mean, feature_std=std,
        window_prices=_prices_on_calendar(universe, prices) if prices else None, price_names=prices)


def _on_calendar(raws: list, first_rows: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Each asset's raw features on the calendar rows (N, T, F), NaN outside its span, and where they are whole."""
    width = len(raws[0].names)
    features = np.full((len(raws), n, width), np.nan)
    for i, raw in enumerate(raws):
        start = int(first_rows[i])
        features[i, start:start + len(raw.values)] = raw.values
    complete = np.isfinite(features).all(axis=2).T  # (T, N)
    return features, complete


def _prices_on_calendar(universe: Universe, columns: tuple[str, ...]) -> np.ndarray:
    """(N, T, P): each asset's `columns` on its span of calendar rows (holes as flat bars), NaN outside it."""
    prices = np.full((universe.n_assets, len(universe.timestamps), len(columns)), np.nan)
    for i, (start, frame) in enumerate(zip(universe.first_rows, universe.frames, strict=True)):
        prices[i, int(start):int(start) + len(frame)] = frame[list(columns)].to_numpy(dtype=np.float64)
    return prices


def _train_statistics(features: np.ndarray, complete: np.ndarray,
                      train: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Per asset, the mean and std of its complete train rows; an asset with none gets the others' mean."""
    n_assets, _, width = features.shape
    mean, std = np.zeros((n_assets, width)), np.ones((n_assets, width))
    fitted = np.zeros(n_assets, dtype=bool)
    for i in range(n_assets):
        rows = features[i, train[0]:train[1]][complete[train[0]:train[1], i]]
        if len(rows) >= 2:
            mean[i], std[i] = rows.mean(axis=0), np.where(rows.std(axis=0) > 1e-12, rows.std(axis=0), 1.0)
            fitted[i] = True
    if not fitted.any():
        raise InputError("environment.env_config.features: no asset has complete features in the train part: "
                         "use a longer history or shorter feature windows")
    mean[~fitted], std[~fitted] = mean[fitted].mean(axis=0), std[fitted].mean(axis=0)
    return mean, std


def _tradable(complete: np.ndarray, listed: np.ndarray, window: int) -> np.ndarray:
    """(T, N): the asset's features are whole over the window ending at t, and it has a bar at t+1."""
    counts = np.cumsum(complete, axis=0)  # complete rows up to t; the window's are counts[t] - counts[t - window]
    before = np.zeros_like(counts)
    before[window:] = counts[:-window]
    whole = counts - before == window
    next_bar = np.zeros_like(listed)
    next_bar[:-1] = listed[1:]
    return whole & next_bar
