"""`trading/Spot-v0`: one coin, discrete target positions, next-bar execution, costs in the reward.

The agent sees normalized features of the last `window` bars up to bar t (its close
included) and its current position; its action is a target position that is filled at
bar t+1's open. The reward is the log change of ledger equity from close t to close t+1,
net of fees and slippage, times `reward_scale`. Training episodes are random windows of
the train split (truncated, never terminated); validation/test episodes walk the split.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from envs.errors import InputError
from envs.trading.data import timeframe_delta
from envs.trading.features import FEATURE_NAMES, WARMUP_BARS, compute_features
from envs.trading.ledger import Ledger
from envs.trading.sources import load_source_bars

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DATA = REPO_ROOT / "data" / "raw" / "BTC-USD_1h.parquet"
POSITION_SETS = {"long_flat": (0.0, 1.0), "long_short": (-1.0, 0.0, 1.0)}
SPLITS = ("train", "validation", "test")
SOURCES = ("file", "synthetic")


@dataclass(frozen=True)
class TradingConfig:
    """Everything that defines the market an agent trades; built from the env_config dict."""

    # Where bars come from: "file" reads data_path, or <data_dir>/<symbol>_<timeframe>.parquet when
    # data_path is null; "synthetic" generates a seeded market labeled synthetic (see envs.trading.synthetic).
    source: str = "file"
    data_path: str | None = str(DEFAULT_DATA)
    data_dir: str = str(DEFAULT_DATA.parent)
    symbol: str = "BTC-USD"
    timeframe: str | None = None  # None: read from the parquet's metadata (synthetic: 1h)
    synthetic_bars: int = 20_000
    synthetic_seed: int = 0
    split: str = "train"
    split_fractions: tuple[float, float, float] = (0.7, 0.15, 0.15)
    window: int = 24
    episode_length: int | None = 720  # None: walk the whole split
    fee_bps: float = 10.0
    slippage_bps: float = 2.0
    positions: str = "long_flat"
    reward_scale: float = 100.0
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, config: dict[str, Any] | None) -> "TradingConfig":
        config = dict(config or {})
        known = set(cls.__dataclass_fields__) - {"extra"}
        unknown = sorted(set(config) - known - {"worker_index", "vector_index", "num_workers", "remote"})
        if unknown:
            raise InputError(f"trading env: unknown config key(s) {', '.join(unknown)}: "
                             f"known keys are {', '.join(sorted(known))}")
        values = {k: v for k, v in config.items() if k in known}
        if "split_fractions" in values:
            values["split_fractions"] = tuple(values["split_fractions"])
        cfg = cls(**values)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        if self.source not in SOURCES:
            raise InputError(f"trading env: source {self.source!r} must be one of {', '.join(SOURCES)}")
        if self.split not in SPLITS:
            raise InputError(f"trading env: split {self.split!r} must be one of {', '.join(SPLITS)}")
        if self.positions not in POSITION_SETS:
            raise InputError(f"trading env: positions {self.positions!r} must be one of {', '.join(POSITION_SETS)}")
        if len(self.split_fractions) != 3 or min(self.split_fractions) <= 0 or abs(sum(self.split_fractions) - 1) > 1e-6:
            raise InputError("trading env: split_fractions must be three positive numbers summing to 1, "
                             "e.g. [0.7, 0.15, 0.15]")
        if self.window < 1 or (self.episode_length is not None and self.episode_length < 2):
            raise InputError("trading env: window must be >= 1 and episode_length >= 2 (or null)")
        if self.fee_bps < 0 or self.slippage_bps < 0:
            raise InputError("trading env: fee_bps and slippage_bps must be >= 0")


@dataclass(frozen=True)
class Market:
    """Arrays of one symbol's bars, its features and split boundaries (row indices)."""

    timestamps: np.ndarray
    opens: np.ndarray
    closes: np.ndarray
    features: np.ndarray
    bounds: dict[str, tuple[int, int]]  # split -> [first decision row, last fill row + 1)
    timeframe: str
    synthetic: bool = False  # generated bars (envs.trading.synthetic): reports must say SYNTHETIC


def load_market(cfg: TradingConfig) -> Market:
    """Load bars, cut the time splits, compute features fitted on the train split only."""
    bars = load_source_bars(cfg)
    timeframe = cfg.timeframe or bars.attrs.get("timeframe")
    if timeframe is None:
        raise InputError(f"{cfg.data_path}: timeframe unknown: set environment.env_config.timeframe (e.g. 1h)")
    timeframe_delta(timeframe)
    n = len(bars)
    first = max(WARMUP_BARS, cfg.window - 1)
    train_end = int(n * cfg.split_fractions[0])
    validation_end = int(n * (cfg.split_fractions[0] + cfg.split_fractions[1]))
    bounds = {"train": (first, train_end), "validation": (train_end, validation_end), "test": (validation_end, n)}
    for name, (lo, hi) in bounds.items():
        if hi - lo < max(cfg.window, 3):
            raise InputError(f"{cfg.data_path or cfg.symbol}: the {name} split has only {max(hi - lo, 0)} bars: "
                             "use a longer history or other split_fractions")
    features = compute_features(bars, fit_rows=slice(0, train_end))
    return Market(
        timestamps=bars.index.to_numpy(),
        opens=bars["open"].to_numpy(),
        closes=bars["close"].to_numpy(),
        features=features.values,
        bounds=bounds,
        timeframe=timeframe,
        synthetic=bool(bars.attrs.get("synthetic", False)),
    )


class SpotTradingEnv(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, config: dict[str, Any] | None = None, market: Market | None = None) -> None:
        self.cfg = TradingConfig.from_dict(config)
        self.market = market or load_market(self.cfg)
        self.targets = np.array(POSITION_SETS[self.cfg.positions])
        n_features = self.market.features.shape[1]
        self.action_space = gym.spaces.Discrete(len(self.targets))
        obs_dim = self.cfg.window * n_features + len(self.targets)
        # Features are clipped z-scores; the position one-hot is in [0, 1].
        self.observation_space = gym.spaces.Box(-10.0, 10.0, shape=(obs_dim,), dtype=np.float32)
        self._lo, self._hi = self.market.bounds[self.cfg.split]
        self._position_eye = np.eye(len(self.targets), dtype=np.float32)
        self._flat_index = int(np.flatnonzero(self.targets == 0.0)[0])
        self.fee_rate = self.cfg.fee_bps / 1e4
        self.slippage_rate = self.cfg.slippage_bps / 1e4
        self.feature_names = FEATURE_NAMES
        # What step() reads: prices as Python floats (numpy scalar arithmetic is several times slower;
        # the values are identical) and the features as one flat array, whose window is a contiguous run.
        self._opens = self.market.opens.tolist()
        self._closes = self.market.closes.tolist()
        self._row_size = n_features
        self._flat_features = np.ascontiguousarray(self.market.features, dtype=np.float32).reshape(-1)

    def _episode_bounds(self) -> tuple[int, int]:
        """First decision row and last row reached; the last fill (row hi - 1) stays inside the split."""
        last_row = self._hi - 1
        length = self.cfg.episode_length
        if length is None or self.cfg.split != "train" or last_row - self._lo <= length:
            return self._lo, last_row
        start = int(self.np_random.integers(self._lo, last_row - length + 1))
        return start, start + length

    def _observation(self) -> np.ndarray:
        # The window's rows are one contiguous run of the C-ordered feature matrix: copy it and the
        # position one-hot into one new array (empty + two slice copies is faster than concatenate).
        end = (self._t + 1) * self._row_size
        width = self.cfg.window * self._row_size
        obs = np.empty(width + len(self._position_eye), dtype=np.float32)
        obs[:width] = self._flat_features[end - width:end]
        obs[width:] = self._position_eye[self._action_index]
        return obs

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._t, self._end = self._episode_bounds()
        self.ledger = Ledger(fee_rate=self.fee_rate, slippage_rate=self.slippage_rate)
        self._action_index = self._flat_index
        self._equity = 1.0
        return self._observation(), self._info()

    def step(self, action: int):
        action = int(action)
        next_row = self._t + 1
        ledger = self.ledger
        if action != self._action_index:  # the target changes (else Ledger.rebalance does nothing)
            ledger.rebalance(float(self.targets[action]), self._opens[next_row])
        equity = ledger.equity(self._closes[next_row])
        reward = math.log(equity / self._equity) * self.cfg.reward_scale
        self._equity = equity
        self._action_index = action
        self._t = next_row
        info = {"equity": equity, "position": ledger.position, "fees_paid": ledger.fees_paid,
                "trades": ledger.trades, "row": next_row}
        return self._observation(), reward, False, next_row >= self._end, info

    def _info(self) -> dict[str, Any]:
        return {"equity": self._equity, "position": float(self.targets[self._action_index]),
                "fees_paid": self.ledger.fees_paid, "trades": self.ledger.trades, "row": self._t}
