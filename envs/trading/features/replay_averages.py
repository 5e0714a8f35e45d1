"""Replays (see `replay`) of TA-Lib's moving averages: SMA, EMA, T3, and TA_MA's SMA steps the stochastics smooth with.

Each follows TA-Lib's C source (ta_SMA.c, ta_EMA.c, ta_T3.c) operation by operation: an SMA is a running total (add
the new value, keep it, subtract the trailing one), an EMA is seeded with the mean of its first `period` inputs
summed from 0.0 and then steps `fma(x - prev, k, prev)` with k = 2 / (period + 1), as TA-Lib after 0.6.4 does.
"""
from __future__ import annotations

import numpy as np

from envs.trading.features.exact_fma import fma
from envs.trading.features.replay import Call, Unsupported, Windows, replays


def sma_steps(values: list[np.ndarray], period: int, start: int) -> list[np.ndarray]:
    """TA_SMA's outputs over `values` (a sequence of vectors, one per position) from `start` (>= period - 1)."""
    total = np.zeros_like(values[0])
    trailing = start - (period - 1)
    position = trailing
    if period > 1:
        while position < start:
            total = total + values[position]
            position += 1
    out = []
    while position < len(values):
        total = total + values[position]
        position += 1
        kept = total
        total = total - values[trailing]
        trailing += 1
        out.append(kept / period)
    return out


@replays("SMA", ops_per_bar=2)
def sma(w: Windows, call: Call) -> tuple[list[np.ndarray], int]:
    period = call["timeperiod"]
    lookback = period - 1
    values = [w.at(i) for i in range(w.length)]
    return [sma_steps(values, period, lookback)[-1]], lookback


def ema_last(values: list[np.ndarray], period: int) -> np.ndarray:
    """TA_EMA's last output over `values` (one vector per position), started at position 0 (TA_COMPATIBILITY_DEFAULT:
    seeded with the mean of the first `period` values summed from 0.0, then `fma(x - prev, k, prev)`)."""
    if period == 1:
        return values[-1]
    k = 2.0 / float(period + 1)
    total = np.zeros_like(values[0])
    for position in range(period):
        total = total + values[position]
    prev = total / period
    for position in range(period, len(values)):
        prev = fma(values[position] - prev, k, prev)
    return prev


@replays("EMA", ops_per_bar=33)
def ema(w: Windows, call: Call) -> tuple[list[np.ndarray], int]:
    period = call["timeperiod"]
    return [ema_last([w.at(i) for i in range(w.length)], period)], period - 1 + call.unstable


def ma_lookback(period: int, ma_type: int) -> int:
    """TA_MA_Lookback for the MA types replayed here (SMA; any type at period 1, which TA_MA copies)."""
    if period == 1:
        return 0
    if ma_type != 0:
        raise Unsupported(f"MA type {ma_type}")
    return period - 1


def ma_steps(values: list[np.ndarray], period: int, ma_type: int) -> list[np.ndarray]:
    """TA_MA's outputs over `values` from its lookback on: a copy at period 1, else an SMA."""
    if period == 1:
        return list(values)
    return sma_steps(values, period, ma_lookback(period, ma_type))


def _scalar_fma(a: float, b: float, c: float) -> float:
    """fma of three floats (Python 3.11 has no math.fma)."""
    return float(fma(np.array([a]), b, np.array([c]))[0])


@replays("T3", ops_per_bar=200)
def t3(w: Windows, call: Call) -> tuple[list[np.ndarray], int]:
    """TA_T3's last output: six EMAs in lockstep, each seeded with the mean of its first `period` inputs and stepped
    `fma(1 - k, e, k * x)`, combined as fma(c4, e3, fma(c3, e4, fma(c1, e6, c2 * e5)))."""
    period, factor = call["timeperiod"], float(call["vfactor"])
    lookback = 6 * (period - 1) + call.unstable
    if period == 1:
        return [w.at(w.end)], lookback
    k = 2.0 / (period + 1.0)
    keep = 1.0 - k
    total = w.at(0)  # this seed starts from the first value, not from 0.0
    for today in range(1, period):
        total = total + w.at(today)
    today = period
    stages = [total / period]  # e1 .. e6 as they are seeded
    for stage in range(1, 6):
        total = stages[stage - 1]
        for _ in range(period - 1):
            stages[0] = fma(stages[0], keep, k * w.at(today))
            today += 1
            for j in range(1, stage):
                stages[j] = fma(stages[j], keep, k * stages[j - 1])
            total = total + stages[stage - 1]
        stages.append(total / period)
    while today <= w.end:
        stages[0] = fma(stages[0], keep, k * w.at(today))
        today += 1
        for j in range(1, 6):
            stages[j] = fma(stages[j], keep, k * stages[j - 1])
    square = factor * factor
    c1 = 0 - square * factor
    c2 = 3.0 * (square - c1)
    c3 = (0 - 6.0) * square - 3.0 * (factor - c1)
    c4 = _scalar_fma(3.0, square, _scalar_fma(3.0, factor, 1.0) - c1)
    e3, e4, e5, e6 = stages[2:]
    return [fma(e3, c4, fma(e4, c3, fma(e6, c1, c2 * e5)))], lookback
