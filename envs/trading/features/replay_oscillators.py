"""Replays (see `replay`) of TA-Lib's oscillators: RSI, CMO, STOCH, STOCHRSI, CCI, MFI, ULTOSC, LINEARREG_SLOPE.

Each follows TA-Lib's C source operation by operation (ta_RSI.c, ta_CMO.c, ...): Wilder's smoothing as
`prev *= period - 1; prev += x; prev /= period` (RSI multiplies by the reciprocal instead), sums from 0.0 in input
order, circular buffers read in the order the C code reads them, and the same zero tests.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from envs.trading.features.replay import Call, Unsupported, Windows, is_zero, replays
from envs.trading.features.replay_averages import ma_lookback, ma_steps


def wilder_steps(w: Windows, period: int, lookback: int, by_reciprocal: bool,
                 output: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> list[np.ndarray]:
    """RSI's and CMO's outputs at positions `lookback`.. of the windows (TA_COMPATIBILITY_DEFAULT, started at position
    0): `output(gain, loss)` of Wilder's average gain and loss. Each average divides by the period (CMO) or multiplies
    by its reciprocal (RSI: what the TA-Lib this runs with does, found by the bit test, where its published source
    still divides)."""
    series = w.span()
    change = np.zeros_like(series)
    change[1:] = series[1:] - series[:-1]
    down = change < 0.0
    loss_term, gain_term = np.where(down, change, 0.0), np.where(down, 0.0, change)  # `loss -= c` or `gain += c`
    reciprocal = 1.0 / float(period)
    gain, loss = w.zeros(), w.zeros()
    out = []
    for position in range(1, w.length):
        if position > period:
            loss *= float(period - 1)
            gain *= float(period - 1)
        loss -= w.of(loss_term, position)
        gain += w.of(gain_term, position)
        if position >= period:
            if by_reciprocal:
                loss *= reciprocal
                gain *= reciprocal
            else:
                loss /= float(period)
                gain /= float(period)
        if position >= lookback:
            out.append(output(gain, loss))
    return out


def _rsi_value(gain: np.ndarray, loss: np.ndarray) -> np.ndarray:
    total = gain + loss
    return np.where(is_zero(total), 0.0, 100.0 * (gain / total))


def _cmo_value(gain: np.ndarray, loss: np.ndarray) -> np.ndarray:
    total = gain + loss
    return np.where(is_zero(total), 0.0, 100.0 * ((gain - loss) / total))


@replays("RSI", ops_per_bar=12)
def rsi(w: Windows, call: Call) -> tuple[list[np.ndarray], int]:
    period = call["timeperiod"]
    lookback = period + call.unstable
    return [wilder_steps(w, period, lookback, True, _rsi_value)[-1]], lookback


@replays("CMO", ops_per_bar=12)
def cmo(w: Windows, call: Call) -> tuple[list[np.ndarray], int]:
    period = call["timeperiod"]
    lookback = period + call.unstable
    return [wilder_steps(w, period, lookback, False, _cmo_value)[-1]], lookback


def stoch_k(high: list[np.ndarray], low: list[np.ndarray], close: list[np.ndarray], period: int) -> list[np.ndarray]:
    """The raw %K of TA_STOCH / TA_STOCHF at positions period-1..: the close within the window's extremes, 0 where the
    range is zero against its own extremes (TA_IS_ZERO_SCALED). Extremes are exact, however TA-Lib tracks them."""
    out = []
    for today in range(period - 1, len(close)):
        highest = np.maximum.reduce(high[today - period + 1:today + 1])
        lowest = np.minimum.reduce(low[today - period + 1:today + 1])
        span = highest - lowest
        flat = np.abs(span) <= 1e-14 * (np.abs(highest) + np.abs(lowest))
        out.append(np.where(flat, 0.0, (close[today] - lowest) / span * 100.0))
    return out


@replays("STOCH", ops_per_bar=12)
def stoch(w: Windows, call: Call) -> tuple[list[np.ndarray], int]:
    fast, slow_k, slow_d = call["fastk_period"], call["slowk_period"], call["slowd_period"]
    k_type, d_type = call["slowk_matype"], call["slowd_matype"]
    lookback = fast - 1 + ma_lookback(slow_k, k_type) + ma_lookback(slow_d, d_type)
    high, low, close = ([w.at(i, series) for i in range(w.length)] for series in range(3))
    k = ma_steps(stoch_k(high, low, close, fast), slow_k, k_type)
    return [k[-1], ma_steps(k, slow_d, d_type)[-1]], lookback


@replays("STOCHRSI", ops_per_bar=16)
def stochrsi(w: Windows, call: Call) -> tuple[list[np.ndarray], int]:
    period, fast_k = call["timeperiod"], call["fastk_period"]
    fast_d, d_type = call["fastd_period"], call["fastd_matype"]
    rsi_lookback = period + call.unstable
    lookback = rsi_lookback + fast_k - 1 + ma_lookback(fast_d, d_type)
    values = wilder_steps(w, period, rsi_lookback, True, _rsi_value)
    k = stoch_k(values, values, values, fast_k)
    return [k[-1], ma_steps(k, fast_d, d_type)[-1]], lookback


def _typical(w: Windows, position: int) -> np.ndarray:
    return (w.at(position, 0) + w.at(position, 1) + w.at(position, 2)) / 3.0


@replays("CCI", ops_per_bar=5)
def cci(w: Windows, call: Call) -> tuple[list[np.ndarray], int]:
    """TA_CCI's last output: its circular buffer is summed in slot order, slot j holding the position congruent to j
    modulo the period (writes start at slot 0 with the window's first bar)."""
    period = call["timeperiod"]
    lookback = period - 1
    end = w.end
    by_slot = sorted(range(end - period + 1, end + 1), key=lambda position: position % period)
    typical = {position: _typical(w, position) for position in by_slot}
    average = w.zeros()
    for position in by_slot:
        average = average + typical[position]
    average = average / float(period)
    deviation = w.zeros()
    for position in by_slot:
        deviation = deviation + np.abs(typical[position] - average)
    deviation = deviation / float(period)
    distance = typical[end] - average
    level = np.abs(average)
    flat = (np.abs(distance) <= 1e-14 * level) | (np.abs(deviation) <= 1e-14 * level)
    return [np.where(flat, 0.0, distance / (0.015 * deviation))], lookback


@replays("MFI", ops_per_bar=16)
def mfi(w: Windows, call: Call) -> tuple[list[np.ndarray], int]:
    """TA_MFI's last output: money flows summed in time order, a flow counted neither way where the typical price
    moved less than TA_EPSILON of the two prices' magnitudes (TA_IS_ZERO_SCALED), 0 where both sums are below 1."""
    period = call["timeperiod"]
    lookback = period
    positive, negative = w.zeros(), w.zeros()
    flows: list[tuple[np.ndarray, np.ndarray]] = []
    prev = _typical(w, 0)
    for position in range(1, w.length):
        if position > period:
            old_positive, old_negative = flows[position - 1 - period]
            positive = positive - old_positive
            negative = negative - old_negative
        typical = _typical(w, position)
        change = typical - prev
        scale = np.abs(typical) + np.abs(prev)
        prev = typical
        flow = typical * w.at(position, 3)
        still = np.abs(change) <= 1e-14 * scale
        down = ~still & (change < 0.0)
        up = ~still & ~(change < 0.0)
        flow_negative = np.where(down, flow, 0.0)
        flow_positive = np.where(up, flow, 0.0)
        negative = np.where(down, negative + flow, negative)
        positive = np.where(up, positive + flow, positive)
        flows.append((flow_positive, flow_negative))
    total = positive + negative
    return [np.where(total < 1.0, 0.0, 100.0 * (positive / total))], lookback


def _ultosc_terms(w: Windows, position: int) -> tuple[np.ndarray, np.ndarray]:
    """ULTOSC's close-minus-true-low and true range of the bar at `position` (> 0)."""
    low, high, prev_close = w.at(position, 1), w.at(position, 0), w.at(position - 1, 2)
    true_low = np.where(low < prev_close, low, prev_close)
    buying = w.at(position, 2) - true_low
    true_range = high - low
    for candidate in (np.abs(prev_close - high), np.abs(prev_close - low)):
        true_range = np.where(candidate > true_range, candidate, true_range)
    return buying, true_range


@replays("ULTOSC", ops_per_bar=30)
def ultosc(w: Windows, call: Call) -> tuple[list[np.ndarray], int]:
    """TA_ULTOSC's last output: three running totals over the sorted periods, reset to exactly zero once a whole
    window of bars without a true range has passed."""
    short, middle, long = sorted((call["timeperiod1"], call["timeperiod2"], call["timeperiod3"]))
    lookback = long
    start = lookback
    totals = [[w.zeros(), w.zeros()] for _ in range(3)]  # (a, b) for the short, middle and long windows
    terms: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    null_run = np.zeros(w.count, dtype=np.int64)

    def count_null(buying: np.ndarray, true_range: np.ndarray, run: np.ndarray) -> np.ndarray:
        return np.where((true_range == 0.0) & (buying == 0.0), run + 1, 0)

    for i in range(start - long + 1, start):
        terms[i] = buying, true_range = _ultosc_terms(w, i)
        null_run = count_null(buying, true_range, null_run)
        for index, period in enumerate((short, middle, long)):
            if i >= start - period + 1:
                totals[index][0] = totals[index][0] + buying
                totals[index][1] = totals[index][1] + true_range
    output = w.zeros()
    for today in range(start, w.length):
        terms[today] = buying, true_range = _ultosc_terms(w, today)
        for pair in totals:
            pair[0] = pair[0] + buying
            pair[1] = pair[1] + true_range
        null_run = count_null(buying, true_range, null_run)
        for index, period in enumerate((short, middle, long)):
            empty = null_run >= period
            totals[index] = [np.where(empty, 0.0, totals[index][0]), np.where(empty, 0.0, totals[index][1])]
        null_run = np.minimum(null_run, long)
        output = w.zeros()
        for (a, b), weight in zip(totals, (4.0, 2.0, None), strict=True):
            ratio = a / b if weight is None else weight * (a / b)
            output = np.where(b > 0.0, output + ratio, output)
        for index, period in enumerate((short, middle, long)):
            old_buying, old_range = terms[today - period + 1]
            totals[index] = [totals[index][0] - old_buying, totals[index][1] - old_range]
    return [100.0 * (output / 7.0)], lookback


@replays("LINEARREG_SLOPE", ops_per_bar=4)
def linearreg_slope(w: Windows, call: Call) -> tuple[list[np.ndarray], int]:
    """TA_LINEARREG_SLOPE's first output (the window is exactly one period: later outputs slide running sums)."""
    period = call["timeperiod"]
    lookback = period - 1
    if w.length != period:
        raise Unsupported("a window longer than the period")
    sum_x = float(period) * (period - 1) * 0.5
    sum_x_sqr = float(period) * (period - 1) * (2 * period - 1) / 6.0
    divisor = sum_x * sum_x - period * sum_x_sqr
    sum_y, sum_xy = w.zeros(), w.zeros()
    for i in range(period - 1, -1, -1):
        value = w.at(w.end - i)
        sum_y = sum_y + value
        sum_xy = sum_xy + float(i) * value
    return [(period * sum_xy - sum_x * sum_y) / divisor], lookback
