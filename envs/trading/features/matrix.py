"""The one causal path from bars and a feature list to a feature matrix, and its normalization per fold.

Every column's value at bar t is computed from a fixed look-back of bars ending at t (`rolling`, TA-Lib over its
look-back), and carries `first_valid`: the row of its first value. So the last rows of a matrix computed over the
last `bars_needed` bars are the same bits as the env's over the whole history: what a served policy reads. A block's
columns are computed on their own bars and aligned to the base bars by as-of joins on the time each value became
known, so a row never holds a value from after its bar (tests/unit/test_feature_causality.py perturbs every
bar after t and requires rows <= t to stay bit-identical, for every allowed TA-Lib function):

- resample: a higher bar is known at its close, and seen from the first base bar that opens at or after it
  (a 1d bar from the first hourly bar of the next day on); a leading partial higher bar is dropped;
- asset: another market's bar t is seen at the base bar with the same timestamp (both have closed when the
  decision after bar t is made); its file must have the same timeframe and reach the data's last bar;
- series: a value stamped s is seen from the first base bar that opens at or after s + lag.

Rows with no value yet are NaN: before a block's history (`before_start: wait` counts them as warm-up,
`zero` leaves them at the train mean), or where another market has no bar (`missing: ffill` carries its
last bar, `zero` the train mean, `error` refuses). Normalization z-scores every column with statistics of
the fold's train rows where it has values, clips at +-10 and sets the missing ones to 0 (the train mean).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from envs.errors import InputError
from envs.trading.data import (
    TIMEFRAMES,
    bar_spacing,
    check_coarser,
    load_bars,
    resample_bars,
    timeframe_delta,
)
from envs.trading.features.series import load_series
from envs.trading.features.spec import Block, Item, TransformFeature
from envs.trading.features.talib_functions import TaFeature
from envs.trading.features.transforms import compute_transform

CLIP = 10.0


@dataclass(frozen=True)
class RawFeatures:
    """Columns before normalization, on the base bars' rows."""

    values: np.ndarray          # (bars, columns) float64; NaN where a value is not known
    names: tuple[str, ...]
    groups: tuple[str, ...]     # the feature each column belongs to (a multi-output indicator's columns share one)
    first_valid: np.ndarray     # (columns,) the row of each column's first complete value
    notes: tuple[str, ...] = ()  # what reading its inputs did that a user should know (e.g. repeated rows dropped)

    @property
    def warmup(self) -> int:
        """Bars before the first row at which every feature is complete (decisions start there)."""
        return int(self.first_valid.max()) + 1 if len(self.names) else 0

    def warmups(self) -> dict[str, int]:
        """Per feature (group): its warm-up in base bars."""
        out: dict[str, int] = {}
        for group, first in zip(self.groups, self.first_valid, strict=True):
            out[group] = max(out.get(group, 0), int(first) + 1)
        return out


@dataclass(frozen=True)
class FeatureSet:
    """Normalized features (n_bars, n_features) and the statistics used to normalize them."""

    values: np.ndarray
    mean: np.ndarray
    std: np.ndarray


@dataclass
class _Column:
    name: str
    group: str
    values: np.ndarray
    first_valid: int


def build_raw(items: tuple[Item, ...], bars: pd.DataFrame, timeframe: str, where: str) -> RawFeatures:
    """The feature matrix of `items` on `bars` (see the module docstring); InputError naming the item."""
    notes: list[str] = []
    columns = _columns(items, bars, timeframe, where, "", notes)
    if not columns:
        return RawFeatures(np.zeros((len(bars), 0)), (), (), np.zeros(0, dtype=np.int64), tuple(notes))
    return RawFeatures(np.column_stack([c.values for c in columns]), tuple(c.name for c in columns),
                       tuple(c.group for c in columns), np.array([c.first_valid for c in columns], dtype=np.int64),
                       tuple(notes))


def _columns(items: tuple[Item, ...], frame: pd.DataFrame, timeframe: str, where: str, prefix: str,
             notes: list[str]) -> list[_Column]:
    out: list[_Column] = []
    market: dict[str, np.ndarray] = {}  # the frame's columns as arrays, made once for all its TA-Lib features
    # A block's refusal names it by kind and source, not by an index: sets such as `basic` expand into several items,
    # so an item's index here is not its index in the experiment file's list.
    for item in items:
        if isinstance(item, TransformFeature):
            label = prefix + item.label
            out.append(_Column(label, label, compute_transform(item.name, dict(item.params), frame), item.first_valid))
        elif isinstance(item, TaFeature):
            market = market or {c: frame[c].to_numpy(dtype=np.float64) for c in frame.columns}
            label = prefix + item.label
            out += [_Column(prefix + name, label, values, item.first_valid)
                    for name, values in zip(item.columns(), item.compute(market), strict=True)]
        else:
            out += BLOCKS[item.kind](item, frame, timeframe, where, prefix, notes)
    return out


def _stamps(index: pd.DatetimeIndex) -> np.ndarray:
    """Int64 nanoseconds since the epoch. Pandas 3 keeps each file's unit (`ns` from an epoch-nanosecond CSV, `us`
    from the bundled parquets), so the raw stamps of two indexes compare only once in one unit."""
    return index.as_unit("ns").asi8


def _align(child: list[_Column], visible: np.ndarray, base_times: np.ndarray) -> list[_Column]:
    """Child columns on the base rows: each base row takes the last child row known at its open (`visible` <= it)."""
    rows = np.searchsorted(visible, base_times, side="right") - 1
    out = []
    for column in child:
        known = rows >= column.first_valid
        values = np.full(len(base_times), np.nan)
        values[known] = column.values[rows[known]]
        first = int(np.argmax(known)) if known.any() else len(base_times)
        out.append(_Column(column.name, column.group, values, first))
    return out


def _before_start(columns: list[_Column], block: Block) -> list[_Column]:
    """`before_start: zero`: rows before the block's first complete value sit at the train mean (NaN here) and
    do not hold decisions back."""
    if block.option("before_start", "wait") == "zero":
        for column in columns:
            column.first_valid = 0
    return columns


def _block_columns(block: Block, frame: pd.DataFrame, timeframe: str, at: str, prefix: str,
                   notes: list[str]) -> list[_Column]:
    """A block's own features, on its bars (`frame`): named after it, and its refusals naming it by kind and source."""
    return _columns(block.children, frame, timeframe, f"{at}: {block.kind}: {block.source}", f"{prefix}{block.label}:",
                    notes)


def _resample(block: Block, frame: pd.DataFrame, timeframe: str, at: str, prefix: str,
              notes: list[str]) -> list[_Column]:
    check_coarser(block.source, timeframe, f"{at}: resample")
    if "open" not in frame.columns:
        raise InputError(f"{at}: resample: only bars can be resampled, not an outside series")
    higher = resample_bars(frame, block.source, timeframe)
    child = _block_columns(block, higher, block.source, at, prefix, notes)
    close_times = _stamps(higher.index + timeframe_delta(block.source))
    return _before_start(_align(child, close_times, _stamps(frame.index)), block)


def _asset(block: Block, frame: pd.DataFrame, timeframe: str, at: str, prefix: str,
           notes: list[str]) -> list[_Column]:
    other = load_bars(block.source)
    declared = other.attrs.get("timeframe")
    spacing = bar_spacing(other.index)
    own = declared or next((name for name, delta in TIMEFRAMES.items() if delta == spacing), str(spacing))
    if own != timeframe:
        raise InputError(f"{at}: asset: {block.source} holds {own} bars, the bars it is aligned to are {timeframe}: "
                         f"use the other market's {timeframe} bars (a resample: block inside the asset block gives "
                         "its higher timeframes)")
    if other.index[-1] < frame.index[-1]:
        raise InputError(f"{at}: asset: {block.source} ends at {other.index[-1]}, before the data's last bar "
                         f"{frame.index[-1]}: use a file that covers the data's range")
    child = _block_columns(block, other, timeframe, at, prefix, notes)
    own, base = _stamps(other.index), _stamps(frame.index)
    columns = _align(child, own, base)
    absent = ~np.isin(base, own) & (base >= own[0])
    policy = block.option("missing", "ffill")
    if absent.any() and policy == "error":
        raise InputError(f"{at}: asset: {block.source} has no bar at {frame.index[np.argmax(absent)]} "
                         f"({int(absent.sum())} of the data's bars are missing there): set missing: ffill (its last "
                         "bar) or missing: zero (the train mean)")
    if policy == "zero":
        for column in columns:
            column.values[absent] = np.nan
    return _before_start(columns, block)


def _series(block: Block, frame: pd.DataFrame, timeframe: str, at: str, prefix: str,
            notes: list[str]) -> list[_Column]:
    series = load_series(block.source, block.option("column"), block.option("nan", "error"), at)
    if series.note:
        notes.append(f"{block.label}: {series.note}")
    lag = pd.Timedelta(block.option("lag"))
    published = series.frame.index + lag
    spacing = bar_spacing(series.frame.index) if len(series.frame) > 1 else pd.Timedelta(0)
    if published[-1] + 3 * spacing < frame.index[-1]:
        raise InputError(f"{at}: series: {block.source}'s last value is published at {published[-1]}, long before "
                         f"the data's last bar {frame.index[-1]}: extend the series, or cut the data")
    child = _block_columns(block, series.frame, timeframe, at, prefix, notes)
    return _before_start(_align(child, _stamps(published), _stamps(frame.index)), block)


BLOCKS: dict[str, Callable[..., list[_Column]]] = {"resample": _resample, "asset": _asset, "series": _series}


def bars_needed(items: tuple[Item, ...], timeframe: str) -> tuple[int | None, str]:
    """How many base bars give every feature's value at the last bar from its whole look-back (what a served
    policy must be given), or None and the block that reads another series than the bars."""
    needed = 1
    for item in items:
        if isinstance(item, Block):
            if item.kind != "resample":
                return None, f"{item.kind}: {item.source}"
            inner, other = bars_needed(item.children, item.source)
            if inner is None:
                return None, other
            ratio = int(timeframe_delta(item.source) // timeframe_delta(timeframe))
            # the child's look-back in whole higher bars, a partial one at each end of the given bars
            needed = max(needed, (inner + 2) * ratio)
        else:
            needed = max(needed, item.first_valid + 1)
    return needed, ""


def normalize(raw: RawFeatures, fit_rows: slice) -> FeatureSet:
    """Z-scores with statistics of `fit_rows` (the fold's train part) where each column has values, clipped at
    +-CLIP; values not known (NaN) become 0, the train mean."""
    fit = raw.values[fit_rows]
    # NaN-free columns get numpy's mean and std bit for bit; a column without values in the train rows is refused
    # before this (the warm-up check).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mean, std = np.nanmean(fit, axis=0), np.nanstd(fit, axis=0)
    std = np.where(std > 1e-12, std, 1.0)
    return FeatureSet(values=apply_normalization(raw.values, mean, std), mean=mean, std=std)


def apply_normalization(values: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """Raw feature rows as the agent sees them: z-scored with a fold's train statistics, clipped, unknown at 0;
    elementwise, so a served policy carrying `mean` and `std` gets the env's bits."""
    clipped = np.clip((values - mean) / std, -CLIP, CLIP)
    return np.nan_to_num(clipped, nan=0.0).astype(np.float32)
