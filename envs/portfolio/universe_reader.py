"""What a served portfolio policy reads: the universe's last bars as one wide table, and the weights it holds.

A registered model of `trading/Portfolio-v0` carries one `UniverseReader`: its assets in the model's order, the
feature list, window and timeframe, whether the universe is close-only, the weight rule, and each asset's
normalization statistics from its fold's train rows. `read` computes every asset's features over its last bars with
the env's own code (`build_raw`, `apply_normalization`, and envs.portfolio.inputs for a `cross_section:` feature and
for `window_normalization: last_close`) and writes the observation as `PortfolioEnv.observation_at` does, so a
served model and the backtest see the same numbers (tests/unit/test_universe_reader.py,
tests/unit/test_portfolio_inputs.py). Every asset with a bar in the table enters the cross-sections at the rows where
its feature has a value, as in the env, even one listed too recently to trade.

The request is a DataFrame: a `timestamp` column (in process, a DatetimeIndex will do), then `ASSET:close` (and, for an
OHLCV universe, `ASSET:open/high/low/volume`) columns for exactly the model's assets, oldest row first; and optionally
`weight:cash` and `weight:ASSET` columns whose last row holds the current weights (all cash when absent). A missing
or extra asset, too few bars, or weights that are NaN, negative under long-only or do not sum to 1 are refused in
one line. The answer is one row per asset and cash: the target weight, the bar it was decided on and the open it
fills at.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from envs.errors import InputError
from envs.portfolio.inputs import apply_cross_sections, last_close_window, price_columns
from envs.portfolio.universe import asset_difference
from envs.portfolio.weights import check_user_weights, scores_to_weights
from envs.reader_file import FeatureWindowReader, load_reader, save_reader
from envs.trading.calendar import timeframe_delta
from envs.trading.csv_import import parse_times
from envs.trading.data import BAR_COLUMNS
from envs.trading.features.matrix import apply_normalization, bars_needed, build_raw
from envs.trading.features.spec import column_cross_sections

FORMAT = "rlplatform-universe-reader/1"
SEPARATOR = ":"
WEIGHT_PREFIX = "weight" + SEPARATOR
CASH = "cash"


@dataclass(frozen=True)
class UniverseReader(FeatureWindowReader):
    """The universe's last bars and held weights -> one observation of the env a policy was trained in."""

    symbols: tuple[str, ...]
    features: list[Any]
    timeframe: str
    window: int
    close_only: bool
    weights: str = "long_only"
    kappa: float = 5.0
    gross_cap: float = 1.0
    feature_bars: int = 0
    decision_interval: int = 1
    bars_per_year: float = 0.0
    window_normalization: str = "none"  # PortfolioConfig.window_normalization
    # How the env traded and on which bars, so paper trading (envs.portfolio.paper) fills as the backtest did and
    # starts after the data the model saw
    fee_bps: float = 0.0
    slippage_bps: float = 0.0
    data_start: str = ""
    data_end: str = ""
    test_start: str = ""
    test_end: str = ""
    mean: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # (N, F)
    std: np.ndarray = field(default_factory=lambda: np.ones((0, 0)))
    refusal: str = ""  # why bars alone cannot give the observation ("" when they can)

    @classmethod
    def for_env_config(cls, env_config: dict[str, Any]) -> "UniverseReader":
        """The reader of the env a policy was trained in, with its fold's per-asset train-row normalization."""
        from envs.portfolio.env import PortfolioEnv

        env = PortfolioEnv({**env_config, "split": "test", "episode_length": None})
        market, cfg = env.market, env.cfg
        needed, other = bars_needed(cfg.feature_items(), market.universe.timeframe)
        stamps, (lo, hi) = market.timestamps, market.bounds["test"]
        return cls(symbols=market.universe.symbols, features=list(cfg.features), timeframe=market.universe.timeframe,
                   window=cfg.window, close_only=market.universe.close_only, weights=cfg.weights, kappa=cfg.kappa,
                   gross_cap=cfg.gross_cap, feature_bars=needed or 0, decision_interval=cfg.decision_interval,
                   window_normalization=cfg.window_normalization,
                   bars_per_year=market.bars_per_year, fee_bps=cfg.fee_bps, slippage_bps=cfg.slippage_bps,
                   data_start=stamps[0].isoformat(), data_end=stamps[-1].isoformat(),
                   # a refit (envs.splits) has no test window: ""
                   test_start=stamps[lo].isoformat() if hi > lo else "",
                   test_end=stamps[hi - 1].isoformat() if hi > lo else "", mean=market.feature_mean,
                   std=market.feature_std,
                   refusal="" if needed is not None else f"its features read another series ({other})")

    def describe(self) -> str:
        """What the model takes, as a clause whose subject is the model."""
        if self.refusal:
            return f"takes observations only: {self.refusal}"
        shown = ", ".join(self.symbols[:5]) + (", ..." if len(self.symbols) > 5 else "")
        return (f"reads the last {self.bars_needed} {self.timeframe} bars of {len(self.symbols)} assets ({shown}) as "
                f"one wide table ({'closes' if self.close_only else 'OHLCV'}), and the weights held")

    def tags(self) -> dict[str, str]:
        return {"inputs": self.describe(), "assets": ",".join(self.symbols)[:5000], "timeframe": self.timeframe,
                "data_start": self.data_start, "data_end": self.data_end, "test_start": self.test_start,
                "test_end": self.test_end}

    def save(self, path: str | Path) -> None:
        config = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("mean", "std")}
        save_reader(path, {**config, "symbols": list(self.symbols)}, FORMAT, self.mean, self.std)

    @classmethod
    def load(cls, path: str | Path) -> "UniverseReader":
        config, mean, std = load_reader(path, FORMAT, "universe reader")
        return cls(**{**config, "symbols": tuple(config["symbols"])}, mean=mean, std=std)

    @staticmethod
    def accepts(model_input: Any) -> bool:
        """Whether a model's input is a wide table of bars (ASSET:close columns), not observations."""
        return isinstance(model_input, pd.DataFrame) and any(
            str(column).endswith(SEPARATOR + "close") for column in model_input.columns)

    def read(self, table: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, pd.Timestamp]:
        """The observation (1, N, D) after the last bar's close, which assets can trade, and the last bar's time."""
        if self.refusal:
            raise InputError(f"this model cannot read bars: {self.refusal}")
        stamps = self._stamps(table)
        held = self._held(table)
        frames = [self._asset_bars(table, symbol, stamps) for symbol in self.symbols]
        raw = apply_cross_sections(np.stack([self._raw_window(bars, stamps) for bars in frames]),
                                   column_cross_sections(self._items))
        # As in the env: a row of the window with an unknown feature reads 0, and an asset whose window is not
        # whole (listed too recently, or not at the last bar) cannot trade and gets weight 0
        complete = np.isfinite(raw).all(axis=2)
        features = np.stack([apply_normalization(raw[i], self.mean[i], self.std[i]) for i in range(len(frames))])
        features[~complete] = 0.0
        parts = [features.reshape(len(frames), -1)]
        if self.window_normalization == "last_close":
            columns = list(price_columns(self.close_only))
            parts.append(last_close_window(np.stack([
                self._on_window(bars[columns].to_numpy(dtype=np.float64), bars, stamps) for bars in frames])))
        tradable = complete.all(axis=1)
        rows = np.concatenate([*parts, held[1:, None].astype(np.float32), tradable[:, None].astype(np.float32)],
                              axis=1)
        return rows[None], tradable, stamps[-1]

    def _raw_window(self, bars: pd.DataFrame, stamps: pd.DatetimeIndex) -> np.ndarray:
        """(window, F): the asset's raw features on the table's last `window` rows, NaN where unknown (before its
        look-back is whole, outside its bars), from its last `bars_needed` bars as the env's own rows are."""
        if not len(bars):
            return np.full((self.window, self.mean.shape[1]), np.nan)
        raw = build_raw(self._items, bars.iloc[-self.bars_needed:], self.timeframe, "model features")
        return self._on_window(raw.values, bars, stamps)

    def _on_window(self, values: np.ndarray, bars: pd.DataFrame, stamps: pd.DatetimeIndex) -> np.ndarray:
        """Rows of `values` (the asset's last bars, ending at its last bar) on the table's last `window` rows, NaN
        where the asset has none."""
        out = np.full((self.window, values.shape[1]), np.nan)
        if not len(bars):
            return out
        end = stamps.get_loc(bars.index[-1]) + 1 - (len(stamps) - self.window)  # one past its last row, in `out`
        start = end - len(values)
        if end > 0:
            out[max(start, 0):end] = values[max(start, 0) - start:]
        return out

    def decide(self, table: pd.DataFrame, policy: Callable[[np.ndarray], np.ndarray]) -> pd.DataFrame:
        """The target weights after the last bar's close (cash first), filled at the next bar's open."""
        observation, tradable, bar_time = self.read(table)
        scores = np.asarray(policy(observation), dtype=np.float64)[0]
        weights = scores_to_weights(scores, tradable, self.weights, self.kappa, self.gross_cap)
        fills = bar_time + timeframe_delta(self.timeframe)
        return pd.DataFrame({"asset": [CASH, *self.symbols], "target_weight": weights,
                             "bar_time": bar_time.isoformat(), "applies_from": fills.isoformat()})

    def _stamps(self, table: pd.DataFrame) -> pd.DatetimeIndex:
        columns = {str(c).split(SEPARATOR, 1)[0] for c in table.columns
                   if SEPARATOR in str(c) and not str(c).startswith(WEIGHT_PREFIX)}
        if difference := asset_difference(self.symbols, columns):
            raise InputError(f"the table's assets differ from this model's ({', '.join(self.symbols)}): {difference}: "
                             "send exactly the model's assets")
        if "timestamp" in table.columns:
            stamps = parse_times(table["timestamp"].reset_index(drop=True), "the request", "timestamp")
        elif isinstance(table.index, pd.DatetimeIndex):  # in process: the bars' own index
            stamps = parse_times(table.index.to_series().reset_index(drop=True), "the request", "timestamp")
        else:
            raise InputError("the table needs a timestamp column (the bars' open times, oldest first)")
        if len(stamps) < self.bars_needed:
            raise InputError(f"{len(stamps)} bars given; this model reads the last {self.bars_needed}")
        if not stamps.is_monotonic_increasing or stamps.has_duplicates:
            raise InputError("the table's timestamps must be strictly increasing (oldest first)")
        return stamps

    def _asset_bars(self, table: pd.DataFrame, symbol: str, stamps: pd.DatetimeIndex) -> pd.DataFrame:
        """One asset's bars from its first row with a close on (a later listing), holes as flat bars."""
        fields_ = ["close"] if self.close_only else list(BAR_COLUMNS)
        wanted = [f"{symbol}{SEPARATOR}{name}" for name in fields_]
        absent = [column for column in wanted if column not in table.columns]
        if absent:
            raise InputError(f"the table lacks {', '.join(absent)}: this model reads "
                             f"{'closes' if self.close_only else 'OHLCV bars'}")
        frame = table[wanted].set_axis(fields_, axis=1).astype(np.float64).set_axis(stamps)
        listed = np.flatnonzero(frame["close"].notna().to_numpy())
        # From its first close to its last: an asset whose bars ended before the table's last row cannot trade
        frame = frame.iloc[listed[0]:listed[-1] + 1] if len(listed) else frame.iloc[:0]
        close = frame["close"].ffill()
        if self.close_only:
            return pd.DataFrame({"open": close.shift(1).fillna(close), "close": close})
        return frame.assign(close=close, open=frame["open"].fillna(close), high=frame["high"].fillna(close),
                            low=frame["low"].fillna(close), volume=frame["volume"].fillna(0.0))

    def _held(self, table: pd.DataFrame) -> np.ndarray:
        """The weights held (cash first) from the last row's weight: columns, all cash when there are none."""
        names = [CASH, *self.symbols]
        columns = [f"{WEIGHT_PREFIX}{name}" for name in names]
        if not any(column in table.columns for column in columns):
            return np.concatenate([[1.0], np.zeros(len(self.symbols))])
        last = table.iloc[-1]
        given = np.array([float(last[column]) if column in table.columns else 0.0 for column in columns])
        return check_user_weights(given, self.weights, "the request's weight: columns")
