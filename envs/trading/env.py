"""`trading/Spot-v0`: one coin, discrete target positions or a continuous target exposure, next-bar execution,
costs in the reward.

The agent sees normalized features of the last `window` bars up to bar t (its close
included) and its current position; its action is a target position (an index into a set, or
with continuous positions the exposure itself, `envs.trading.positions`) that is filled at
bar t+1's open and held for `decision_interval` bars (default 1). The reward is the log
change of ledger equity from close t to the close before the next decision, net of fees
and slippage, times `reward_scale`. Training episodes are random windows of the fold's
train part; validation/test episodes walk their whole part. Both end truncated, unless a
short is margin-called (`envs.trading.ledger`): it is liquidated at the open or close that
revealed the breach, the episode ends there terminated, with info `margin_call: True` and the
log of the liquidated (floored, positive) equity change as the reward.
Which rows are train, validation and test comes from `envs.splits` (holdout by default,
or one fold of a walk-forward protocol).
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from pydantic import Field, field_validator, model_validator

from envs.errors import InputError
from envs.splits import Fold, episode_bounds
from envs.trading.bars_config import BarsConfig
from envs.trading.calendar import ALL_WEEK, bars_per_year, check_calendar, detect_calendar
from envs.trading.data import timeframe_delta, values_digest
from envs.trading.features import DEFAULT_FEATURES, FeatureSet, RawFeatures, market_features, normalize
from envs.trading.features.matrix import bars_needed
from envs.trading.features.store import FeatureStore, bars_digest
from envs.trading.ledger import DEFAULT_MAINTENANCE_MARGIN, Ledger
from envs.trading.positions import (
    DEFAULT_MIN_TRADE,
    EXPOSURE_BOUNDS,
    POSITION_SETS,
    exposure_target,
    hold_rule,
    is_continuous,
)
from envs.trading.sources import SYNTHETIC_MODELS, load_source_bars

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DATA = REPO_ROOT / "data" / "raw" / "BTC-USD_1h.parquet"
SPLITS = ("train", "validation", "test")
# The halves of the validation part: choose on one, judge the choice on the other (docs/verdicts.md, the checkpoint
# study); `validation` is both.
VALIDATION_HALVES = ("validation_a", "validation_b")


class TradingConfig(BarsConfig):
    """Everything that defines the market an agent trades; built from the env_config dict (the keys every trading
    family shares are envs.trading.bars_config.BarsConfig's)."""

    source: Literal["file", "synthetic"] = Field(
        default="file",
        description="Where bars come from: file reads data_path (or <data_dir>/<symbol>_<timeframe>.parquet when "
                    "data_path is null); synthetic generates a seeded market labeled synthetic "
                    "(envs.trading.synthetic).")
    data_path: str | None = Field(
        default=str(DEFAULT_DATA),
        description="The bars file (parquet or CSV; relative paths resolve against the experiment file's folder). "
                    "Default: the repository's data/raw/BTC-USD_1h.parquet; null: found in data_dir by symbol.")
    data_dir: str = Field(
        default=str(DEFAULT_DATA.parent),
        description="With data_path null: the folder of <symbol>_<timeframe>.parquet files (default: the "
                    "repository's data/raw), e.g. to grid over symbols.")
    symbol: str = Field(default="BTC-USD", description="The coin traded, e.g. ETH-USD: names its data file and tags "
                                                       "the runs.")
    timeframe: str | None = Field(
        default=None, description="The bar interval, e.g. 1h. None: read from the parquet's metadata (synthetic: 1h).")
    synthetic_bars: int = Field(default=20_000, ge=100, description="source synthetic: how many bars to generate.")
    synthetic_seed: int = Field(default=0, ge=0,
                                description="source synthetic: the seed of the generated market (one market per seed).")
    synthetic_model: str = Field(
        default="regimes",
        description="source synthetic: the generator, one of envs.trading.sources.SYNTHETIC_MODELS (regimes, "
                    "random_walk, planted_signal...).")
    split: Literal["train", "validation", "test", "validation_a", "validation_b"] = Field(
        default="train",
        description="Which part of the fold the env trades: train, validation (or its halves validation_a and "
                    "validation_b: choose on one, judge on the other) or test.")
    positions: Literal["long_flat", "long_short", "continuous", "continuous_long_short"] = Field(
        default="long_flat",
        description="Discrete sets pick a whole position: long_flat (0, 1), long_short (-1, 0, 1); continuous "
                    "positions size it as a target exposure in [0, 1] (continuous) or [-1, 1] (continuous_long_short) "
                    "(envs.trading.positions).")
    min_trade: float = Field(
        default=DEFAULT_MIN_TRADE, ge=0, lt=1,
        description="Continuous positions only (refused with a discrete set): a target closer than this to the held "
                    "exposure is not traded, so no dust rebalancing or fee.")
    min_hold: int | None = Field(
        default=None, ge=1,
        description="Discrete positions only (refused with continuous ones): a position is held for at least this "
                    "many decisions before it may change; while it is younger, the agent's action is overridden by "
                    "holding it (info asked_action, applied_action, held_for). None or 1: no minimum.")
    maintenance_margin: float = Field(
        default=DEFAULT_MAINTENANCE_MARGIN, gt=0, lt=1,
        description="A short is liquidated (and the episode terminated) when equity <= maintenance_margin x the value "
                    "of the borrowed coins, checked at every open and close (envs.trading.ledger).")
    features: list[Any] = Field(
        default_factory=lambda: list(DEFAULT_FEATURES),
        description="What the agent sees of each bar (envs.trading.features.spec): feature sets, transforms, TA-Lib "
                    "functions and blocks of other timeframes or markets. Default: the eight features of basic.")

    @field_validator("synthetic_model")
    @classmethod
    def _known_model(cls, value: str) -> str:
        if value not in SYNTHETIC_MODELS:
            raise ValueError(f"must be one of {', '.join(SYNTHETIC_MODELS)}")
        return value

    @model_validator(mode="after")
    def _min_trade_is_for_continuous_positions(self) -> "TradingConfig":
        if not is_continuous(self.positions) and self.min_trade != DEFAULT_MIN_TRADE:
            raise ValueError(f"env_config.min_trade {self.min_trade:g} applies to continuous positions only: positions "
                             f"{self.positions} trades whole positions, which no min_trade holds back; "
                             "remove min_trade or use positions continuous or continuous_long_short")
        return self

    @model_validator(mode="after")
    def _min_hold_is_for_discrete_positions(self) -> "TradingConfig":
        if is_continuous(self.positions) and self.min_hold is not None:
            raise ValueError(f"env_config.min_hold {self.min_hold} applies to discrete positions only: positions "
                             f"{self.positions} sizes the position, which min_trade holds back instead; remove "
                             "min_hold or use positions long_flat or long_short")
        return self

    @property
    def hold_decisions(self) -> int:
        """min_hold as a number: 1 (no minimum) when it is not set."""
        return self.min_hold or 1


@dataclass(frozen=True)
class Market:
    """Arrays of one symbol's bars, its features and split boundaries (row indices)."""

    timestamps: np.ndarray
    opens: np.ndarray
    closes: np.ndarray
    features: np.ndarray
    bounds: dict[str, tuple[int, int]]  # split -> [first decision row, last fill row + 1)
    timeframe: str
    fold: Fold
    bars_per_year: float                  # what annualizes its results: the data's calendar, or env_config.calendar
    synthetic: bool = False  # generated bars (envs.trading.synthetic): reports must say SYNTHETIC
    feature_names: tuple[str, ...] = ()
    feature_groups: tuple[str, ...] = ()  # the feature (set item) of each column: permuted together for importance
    feature_warmup: int = 0               # bars before the first row at which every feature is complete
    feature_warmups: tuple[tuple[str, int], ...] = ()  # (feature, its warm-up in bars), in the list's order
    feature_notes: tuple[str, ...] = ()   # what reading the features' inputs did (e.g. a series turned around)
    feature_origin: str = "computed"      # computed | cache | memory (envs.trading.features.store)
    feature_key: str = ""
    data_digest: str = ""                 # of the bars' values on every test window: names them in the trials ledger
    file_digest: str = ""                 # of the whole file (its bytes): the ledger's key before data_digest
    test_windows: tuple[tuple[int, int], ...] = ()  # every fold's test rows [start, stop), not only this env's fold
    symbol: str = ""                      # what the data says it is (file metadata), else the config's symbol
    gaps: str = "ffill"                   # the file's gap policy: "drop" keeps holes, stepped over as one bar
    calendar: str = ALL_WEEK              # the data's own (metadata, else detected): weekdays has no weekend bars
    # The normalization fitted on the fold's train rows (per column): a served policy carries it
    # (envs.trading.bar_reader)
    feature_mean: np.ndarray | None = None
    feature_std: np.ndarray | None = None


def action_space(positions: str) -> gym.spaces.Space:
    """`Discrete(n)` over a position set's indices, or a `Box` of one target exposure between its bounds."""
    if is_continuous(positions):
        low, high = EXPOSURE_BOUNDS[positions]
        return gym.spaces.Box(low, high, shape=(1,), dtype=np.float32)
    return gym.spaces.Discrete(len(POSITION_SETS[positions]))


def position_width(positions: str) -> int:
    """The observation's position columns: a one-hot over the set, or the held exposure as one float."""
    return 1 if is_continuous(positions) else len(POSITION_SETS[positions])


def check_split_lengths(bounds: dict[str, tuple[int, int]], episode_length: int | None, where: str,
                        decision_interval: int = 1) -> None:
    """Every part must hold at least one training episode: a shorter train part cannot give a random
    window, and a validation or test part shorter than an episode scores too few decisions to select
    or judge on (200 bars in 70/15/15 leave 30 for each). And every part must hold two decisions or more:
    a decision_interval of 100,000 bars on 20,111 bars would score nothing."""
    lengths = {name: hi - lo for name, (lo, hi) in bounds.items()}
    short = {name: n for name, n in lengths.items() if episode_length is not None and n < episode_length}
    if short:
        sizes = ", ".join(f"{name} {length}" for name, length in short.items())
        raise InputError(f"{where}: parts shorter than episode_length {episode_length} bars ({sizes}): use a "
                         "longer history, a shorter environment.env_config.episode_length or other split sizes")
    few = {name: n for name, n in lengths.items() if n < 2 * decision_interval}
    if few:
        sizes = ", ".join(f"{name} {length}" for name, length in few.items())
        raise InputError(f"{where}: environment.env_config.decision_interval {decision_interval} bars leaves fewer "
                         f"than 2 decisions in some parts ({sizes} bars): use a shorter interval, or longer parts")


def first_decision_row(raw: RawFeatures, needed: int | None, window: int) -> int:
    """The first row whose observation is whole: every feature of its `window` rows from its full look-back, so a
    served policy given the bars up to it (`BarReader.bars_needed`) sees the same observation."""
    return max(raw.warmup, needed or 1, 1) + window - 2


def _check_warmup(raw: RawFeatures, needed: int | None, train: tuple[int, int], window: int, where: str) -> None:
    """The train part must hold decisions after every feature is complete; else name the longest warm-ups."""
    train_start, train_end = train
    first = max(train_start, first_decision_row(raw, needed, window))
    if train_end - first >= max(window, 3):
        return
    longest = sorted(raw.warmups().items(), key=lambda kv: -kv[1])[:3]
    named = ", ".join(f"{group} {bars} bars" for group, bars in longest)
    raise InputError(f"{where}: environment.env_config.features: warm-up {raw.warmup} bars leaves "
                     f"{max(train_end - first, 0)} bars of the train part ({train_start}..{train_end}) to train on "
                     f"(longest warm-ups: {named}): use shorter periods, or a longer history")


def load_market(cfg: TradingConfig) -> Market:
    """Load bars, cut the time splits, compute features (or read them from the feature store) and normalize
    them with statistics of the train split only."""
    bars = load_source_bars(cfg)
    timeframe = cfg.timeframe or bars.attrs.get("timeframe")
    if timeframe is None:
        raise InputError(f"{cfg.data_path}: timeframe unknown: set environment.env_config.timeframe (e.g. 1h)")
    timeframe_delta(timeframe)
    n = len(bars)
    source = str(cfg.data_path or cfg.symbol)
    calendar = bars.attrs.get("calendar") or detect_calendar(bars.index, timeframe)
    if cfg.calendar is not None:
        check_calendar(bars.index, timeframe, cfg.calendar, source)
    per_year = bars_per_year(bars.index, timeframe, calendar if cfg.calendar is None else cfg.calendar, source)
    protocol = cfg.split_protocol()
    fold = protocol.fold(n, cfg.fold, min_rows=max(cfg.window, 3), source=f"{source}: protocol")
    test_windows = tuple(f.test for f in protocol.folds_for(n, min_rows=max(cfg.window, 3)))  # the ledger's windows
    bounds = {name: fold.part(name) for name in SPLITS}
    where = f"{source}: fold {fold.index}"
    needed, _ = bars_needed(cfg.feature_items(), timeframe)
    raw, origin, key = market_features(cfg.feature_items(), bars, timeframe, cfg.feature_store,
                                       "environment.env_config.features",
                                       check=lambda r: _check_warmup(r, needed, fold.train, cfg.window, where))
    # The first decision needs every feature of its whole observation window complete behind it.
    train_start, train_end = fold.train
    bounds["train"] = (max(train_start, first_decision_row(raw, needed, cfg.window)), train_end)
    # A refit (envs.splits) has no validation part, and a test part only for bars that arrived after it
    check_split_lengths({name: bounds[name] for name in protocol.required_parts()}, cfg.episode_length, where,
                        cfg.decision_interval)
    middle = (bounds["validation"][0] + bounds["validation"][1]) // 2
    bounds.update(zip(VALIDATION_HALVES, ((bounds["validation"][0], middle), (middle, bounds["validation"][1])),
                      strict=True))
    features = _normalized(key, raw, slice(train_start, train_end))
    return Market(
        timestamps=_timestamps(bars.index),
        opens=bars["open"].to_numpy(),
        closes=bars["close"].to_numpy(),
        features=features.values,
        bounds=bounds,
        timeframe=timeframe,
        fold=fold,
        bars_per_year=per_year,
        synthetic=bool(bars.attrs.get("synthetic", False)),
        feature_names=raw.names,
        feature_groups=raw.groups,
        feature_warmup=raw.warmup,
        feature_warmups=tuple(raw.warmups().items()),
        feature_notes=raw.notes,
        feature_origin=origin,
        feature_key=key,
        data_digest=values_digest(bars, list(test_windows)),
        file_digest=bars_digest(bars),
        test_windows=test_windows,
        symbol=str(bars.attrs.get("symbol") or cfg.symbol),  # a Kraken XBT-USD file is labelled XBT-USD
        gaps=str(bars.attrs.get("gaps", "ffill")),
        calendar=calendar,
        feature_mean=features.mean,
        feature_std=features.std,
    )


def split_periods(market: Market) -> dict[str, tuple[str, str]]:
    """First and last bar of each part of a market's fold, e.g. {"train": ("2017-07-05", "2018-09-28")}; a part a
    refit leaves empty is not named."""
    stamps = market.timestamps
    return {name: (f"{stamps[market.bounds[name][0]]:%Y-%m-%d}", f"{stamps[market.bounds[name][1] - 1]:%Y-%m-%d}")
            for name in SPLITS if market.bounds[name][1] > market.bounds[name][0]}


_timestamps_cache: dict[tuple[str, str], np.ndarray] = {}
_TIMESTAMPS_KEPT = 4


def _timestamps(index: Any) -> np.ndarray:
    """The bars' stamps as the array of `pd.Timestamp`s a Market holds, boxed once per index in a process: boxing 20k
    zone-aware stamps is most of an env's build, and a dry run builds one env per fold of the same bars. Keyed by
    the stamps themselves, read-only (envs share it), the last few indexes kept."""
    if getattr(index, "asi8", None) is None:  # not datetimes
        return index.to_numpy()
    key = (str(index.dtype), hashlib.sha1(index.asi8.tobytes()).hexdigest())  # unit and zone, and the stamps
    if key not in _timestamps_cache:
        if len(_timestamps_cache) >= _TIMESTAMPS_KEPT:
            _timestamps_cache.pop(next(iter(_timestamps_cache)))
        stamps = index.to_numpy()
        stamps.flags.writeable = False
        _timestamps_cache[key] = stamps
    return _timestamps_cache[key]


_normalized_cache: dict[tuple[str, int, int], FeatureSet] = {}


def _normalized(key: str, raw: RawFeatures, fit_rows: slice) -> FeatureSet:
    """One normalization per (feature matrix, fold) in a process: a vectorized env's copies share it."""
    cache_key = (key, fit_rows.start, fit_rows.stop)
    if cache_key not in _normalized_cache:
        _normalized_cache[cache_key] = normalize(raw, fit_rows)
    return _normalized_cache[cache_key]


class SpotTradingEnv(gym.Env):
    """## Description

    One coin traded on a spot market from its OHLCV bars. Every `decision_interval` bars the agent picks a
    target position (or with continuous positions a target exposure) after bar t's close; the order fills at bar t+1's
    open with slippage and a fee on the notional, and the position is held until the next decision. Which bars an
    episode may use is the fold's part (`split`) of a holdout or walk-forward protocol (`envs.splits`); features are
    normalized with statistics of the fold's train part only.

    ## Action Space

    `Discrete(n)`: the index of a target position of `positions`: `long_flat` = (0 flat, 1 long),
    `long_short` = (0 short, 1 flat, 2 long). A target equal to the held position places no order.

    `Box(low, high, (1,), float32)` with `positions: continuous` ([0, 1]) or `continuous_long_short` ([-1, 1]):
    the target exposure, the fraction of equity (at the fill bar's open) to hold in the coin, negative for a
    short; actions outside the bounds are clipped into them. The ledger fills the difference to the target's
    units on the held side, or closes the position and opens the target when the side changes
    (`envs.trading.ledger`), so exposures 0, 1 and -1 trade exactly as the discrete targets. A target equal to
    the held one, or within `min_trade` of it, places no order.

    With `min_hold: K` (discrete sets only) a position is held for at least K decisions: while the held position is
    younger, the action is overridden by the held index (`envs.trading.positions.hold_rule`), and the info says
    `asked_action`, `applied_action` and `held_for` (the held position's age in decisions, counted up to K; a reset's
    flat start counts as K, free to change).

    ## Observation Space

    `Box(-10, 10, (window * 8 + n,), float32)`: the last `window` bars' features (oldest first, 8 per
    bar, clipped z-scores) followed by the held position one-hot; with continuous positions
    `Box(-10, 10, (window * 8 + 1,), float32)`: the features followed by the held exposure as one float, the
    target last filled (not re-marked as the price moves: the same exposure `min_trade` is measured from).

    | Index (per bar) | Feature       | Meaning                                         |
    |-----------------|---------------|-------------------------------------------------|
    | 0               | log_return    | log(close_t / close_t-1)                         |
    | 1               | range         | (high - low) / close                             |
    | 2               | body          | (close - open) / open                            |
    | 3               | volatility_24 | std of the last 24 log returns                   |
    | 4               | trend_24      | close / SMA(24) - 1                              |
    | 5               | trend_96      | close / SMA(96) - 1                              |
    | 6               | rsi_14        | RSI(14) rescaled to [-1, 1]                      |
    | 7               | volume_z_96   | log volume against its trailing 96-bar mean, std |
    | window*8 + i    | position      | 1 for the held position i, else 0               |
    | window*8        | exposure      | continuous positions: the held target exposure  |

    ## Rewards

    `reward_scale` x the log change of ledger equity from the decision bar's close to the close before the
    next decision, net of fees (`fee_bps`) and slippage (`slippage_bps`): costs are in the reward.

    ## Starting State

    Flat (all cash, equity 1). Training episodes start at a uniformly drawn bar of the train part (seeded by
    `reset(seed=...)`); validation and test episodes start at their part's first decision bar.

    ## Episode End

    Truncated after `episode_length` bars (training), or at the end of the part (`episode_length: null`,
    validation and test). Terminated when a short is margin-called: equity <= `maintenance_margin` x the
    borrowed coins' value at an open or a close (`info["margin_call"]`).

    ## Arguments

    One `config` dict (`TradingConfig`, validated with a "did you mean" for misspelt keys):
    `data_path` or `source: synthetic`, `symbol`, `timeframe`, `window`, `decision_interval`,
    `episode_length`, `fee_bps`, `slippage_bps`, `positions`, `min_trade`, `min_hold`, `maintenance_margin`,
    `reward_scale`, `split`, `split_fractions` or `protocol` and `fold`, `calendar` (how many bars make a year).

    ```python
    gymnasium.make("trading/Spot-v0", config={"window": 24, "decision_interval": 24, "split": "validation"})
    ```
    """

    metadata = {"render_modes": []}

    def __init__(self, config: dict[str, Any] | None = None, market: Market | None = None) -> None:
        self.cfg = TradingConfig.from_dict(config)
        self.market = market or load_market(self.cfg)
        positions = self.cfg.positions
        self.continuous = is_continuous(positions)
        self.bounds = EXPOSURE_BOUNDS.get(positions)  # (low, high) of a continuous exposure; None for a set
        # a set's targets by action index (none if continuous)
        self.targets = np.array(POSITION_SETS.get(positions, ()))
        n_features = self.market.features.shape[1]
        self.action_space = action_space(positions)
        self._position_width = position_width(positions)
        obs_dim = self.cfg.window * n_features + self._position_width
        # Features are clipped z-scores; the position one-hot is in [0, 1], a held exposure in [-1, 1].
        self.observation_space = gym.spaces.Box(-10.0, 10.0, shape=(obs_dim,), dtype=np.float32)
        self._lo, self._hi = self.market.bounds[self.cfg.split]
        self._position_eye = np.eye(len(self.targets), dtype=np.float32)
        self._flat_index = int(np.flatnonzero(self.targets == 0.0)[0]) if len(self.targets) else 0
        self._interval = self.cfg.decision_interval
        self._min_hold = self.cfg.hold_decisions
        self.fee_rate = self.cfg.fee_bps / 1e4
        self.slippage_rate = self.cfg.slippage_bps / 1e4
        self.feature_names = self.market.feature_names
        # What step() reads: prices as Python floats (numpy scalar arithmetic is several times slower;
        # the values are identical) and the features as one flat array, whose window is a contiguous run.
        self._opens = self.market.opens.tolist()
        self._closes = self.market.closes.tolist()
        self._row_size = n_features
        self._flat_features = np.ascontiguousarray(self.market.features, dtype=np.float32).reshape(-1)

    def plan_lines(self) -> list[str]:
        """The features for the plan: each one with its warm-up, and whether they were computed or cached; and the
        calendar, whose bars a year scale every annualized figure of the report."""
        market = self.market
        where = {"cache": "read from the feature store", "computed": "computed", "memory": "computed"}
        stored = (f" ({FeatureStore(self.cfg.feature_store).display(market.feature_key)})"
                  if self.cfg.feature_store else "")
        listed = ", ".join(f"{group} {bars}" for group, bars in market.feature_warmups)
        return [f"features: {len(market.feature_names)} columns of {len(market.feature_warmups)} feature(s), "
                f"warm-up {market.feature_warmup} bars; {where[market.feature_origin]}{stored}",
                f"  each feature's warm-up in bars: {listed}", *(f"  note: {note}" for note in market.feature_notes),
                (f"calendar: {market.calendar} bars; results annualized with {market.bars_per_year:.1f} bars a year"
                 f"{'' if self.cfg.calendar is None else ' (environment.env_config.calendar)'}")]

    def split_periods(self) -> dict[str, tuple[str, str]]:
        return split_periods(self.market)

    def _episode_bounds(self) -> tuple[int, int]:
        return episode_bounds(self._lo, self._hi, self.cfg.episode_length, self.cfg.split == "train", self.np_random)

    def _observation(self) -> np.ndarray:
        # The window's rows are one contiguous run of the C-ordered feature matrix: copy it and the
        # position one-hot (or the held exposure) into one new array (empty + two slice copies is faster than
        # concatenate).
        end = (self._t + 1) * self._row_size
        width = self.cfg.window * self._row_size
        obs = np.empty(width + self._position_width, dtype=np.float32)
        obs[:width] = self._flat_features[end - width:end]
        if self.continuous:
            obs[width] = self.ledger.position
        else:
            obs[width:] = self._position_eye[self._action_index]
        return obs

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._t, self._end = self._episode_bounds()
        self.ledger = Ledger(fee_rate=self.fee_rate, slippage_rate=self.slippage_rate,
                             maintenance_margin=self.cfg.maintenance_margin, min_trade=self.cfg.min_trade)
        self._action_index = self._flat_index
        # min_hold's record of the last decision: asked and applied index, and the held position's age (the flat
        # start is as old as min_hold: free to change)
        self._asked = self._applied = self._flat_index
        self._held_for = self._min_hold
        self._equity = 1.0
        return self._observation(), self._info()

    def step(self, action: int | np.ndarray):
        if self._min_hold > 1:
            action = self._hold(int(action))
        order = self._order(action)
        ledger = self.ledger
        fill_row = self._t + 1
        # Held for `decision_interval` bars (fewer at the episode's end); marked at the last close.
        next_row = min(self._t + self._interval, self._end)
        # A held short is checked at the fill bar's open before the order: called there, the order is void.
        if ledger.units < 0.0 and ledger.margin_call(self._opens[fill_row]):
            next_row = fill_row
        else:
            if order is not None:
                ledger.rebalance(order, self._opens[fill_row])
            if ledger.units < 0.0:  # then at every mark it is held through, in time order (as simulate_positions):
                # the fill bar's close, then each later bar's open and close; the episode ends at a call
                opens, closes = self._opens, self._closes
                for row in range(fill_row, next_row + 1):
                    if (row > fill_row and ledger.margin_call(opens[row])) or ledger.margin_call(closes[row]):
                        next_row = row
                        break
        equity = ledger.equity(self._closes[next_row])
        reward = math.log(equity / self._equity) * self.cfg.reward_scale
        called = ledger.margin_called
        self._equity = equity
        if not self.continuous:
            self._action_index = self._flat_index if called else int(action)
        self._t = next_row
        return self._observation(), reward, called, next_row >= self._end and not called, self._info()

    def _hold(self, asked: int) -> int:
        """min_hold's rule on this decision: the index applied (the held one while it is younger than min_hold)."""
        applied, held_for = hold_rule(asked, self._action_index, self._held_for, self._min_hold)
        self._asked, self._applied, self._held_for = asked, int(applied), int(held_for)
        return self._applied

    def target_of(self, action: int | np.ndarray) -> float:
        """The target position an action asks for: a set's target, or the exposure clipped into the bounds."""
        return exposure_target(action, *self.bounds) if self.continuous else float(self.targets[action])

    def _order(self, action: int | np.ndarray) -> float | None:
        """The target to send to the ledger at the fill, or None for no order: a discrete action that keeps the
        held index places none; a continuous target always goes, and the ledger leaves a held target and one
        within `min_trade` of it untraded."""
        if self.continuous:
            return self.target_of(action)
        action = int(action)
        return float(self.targets[action]) if action != self._action_index else None

    def _info(self) -> dict[str, Any]:
        info = {"equity": self._equity, "position": self.ledger.position,
                "fees_paid": self.ledger.fees_paid, "trades": self.ledger.trades, "row": self._t,
                "margin_call": self.ledger.margin_called}
        if self._min_hold > 1:
            info.update(asked_action=self._asked, applied_action=self._applied, held_for=self._held_for)
        return info
