"""Replays (see `replay`) of TA-Lib's range, trend and volume functions: ATR, NATR, ADX, ADOSC, SAR, BBANDS.

Each follows TA-Lib's C source operation by operation. Where the installed TA-Lib's arithmetic differs from its
published source (ATR's Wilder step is `fma(beta, atr, alpha * true_range)` with beta = (period-1)/period and
alpha = 1 - beta, as its CKSP/SUPERTREND sources spell out), the bit test over every function decided it.
"""
from __future__ import annotations

import numpy as np

from envs.trading.features.exact_fma import fma
from envs.trading.features.replay import Call, Unsupported, Windows, is_zero, replays


def true_ranges(w: Windows) -> np.ndarray:
    """TA-Lib's true range of every bar the windows cover (`span`-aligned; inputs high, low, close; the first bar has
    none): high-low, replaced by each previous-close distance in turn when it is greater."""
    high, low, close = w.span(0), w.span(1), w.span(2)
    greatest = np.full(len(high), np.nan)
    greatest[1:] = high[1:] - low[1:]
    for candidate in (np.abs(close[:-1] - high[1:]), np.abs(close[:-1] - low[1:])):
        greatest[1:] = np.where(candidate > greatest[1:], candidate, greatest[1:])
    return greatest


def wilder_atr(w: Windows, period: int) -> np.ndarray:
    """The ATR at the windows' last bar: the mean true range of positions 1..period, then stepped with the installed
    TA-Lib's `fma(beta, atr, alpha * true_range)`."""
    beta = float(period - 1) / float(period)
    alpha = 1.0 - beta
    ranges = true_ranges(w)
    total = w.zeros()
    for position in range(1, period + 1):
        total += w.of(ranges, position)
    atr = total / period
    for position in range(period + 1, w.length):
        atr = fma(atr, beta, alpha * w.of(ranges, position))
    return atr


@replays("ATR", ops_per_bar=34)
def atr(w: Windows, call: Call) -> tuple[list[np.ndarray], int]:
    period = call["timeperiod"]
    lookback = period + call.unstable
    return [wilder_atr(w, period)], lookback


@replays("NATR", ops_per_bar=34)
def natr(w: Windows, call: Call) -> tuple[list[np.ndarray], int]:
    period = call["timeperiod"]
    lookback = period + call.unstable
    value = wilder_atr(w, period)
    if period <= 1:
        return [value], lookback
    close = w.at(w.end, 2)
    return [np.where(close != 0.0, value / close * 100.0, 0.0)], lookback


@replays("ADX", ops_per_bar=25)
def adx(w: Windows, call: Call) -> tuple[list[np.ndarray], int]:
    """TA_ADX's last output: Wilder sums of -DM, +DM and the true range (`x -= x / period` then add), the first ADX
    the mean of `period` DX, then `(adx * (period - 1) + dx) / period` wherever the DX is defined. A bar's one-period
    -DM or +DM is the larger move outside the previous range (none on a tie), added as the C code adds it."""
    period = call["timeperiod"]
    lookback = 2 * period + call.unstable - 1
    high, low = w.span(0), w.span(1)
    diff_plus, diff_minus = np.zeros_like(high), np.zeros_like(high)
    diff_plus[1:], diff_minus[1:] = high[1:] - high[:-1], low[:-1] - low[1:]
    minus = (diff_minus > 0.0) & (diff_plus < diff_minus)
    plus = ~minus & (diff_plus > 0.0) & (diff_plus > diff_minus)
    minus_move, plus_move = np.where(minus, diff_minus, 0.0), np.where(plus, diff_plus, 0.0)
    ranges = true_ranges(w)
    minus_dm, plus_dm, total_range = w.zeros(), w.zeros(), w.zeros()
    for position in range(1, period):
        minus_dm += w.of(minus_move, position)
        plus_dm += w.of(plus_move, position)
        total_range += w.of(ranges, position)
    sum_dx = w.zeros()
    adx_value = w.zeros()
    for position in range(period, w.length):
        for total, move in ((minus_dm, minus_move), (plus_dm, plus_move), (total_range, ranges)):
            total -= total / period  # x -= x / period, then x += today's term: in place, the C statements' order
            total += w.of(move, position)
        minus_di = 100.0 * (minus_dm / total_range)
        plus_di = 100.0 * (plus_dm / total_range)
        di_sum = minus_di + plus_di
        defined = (total_range > 0.0) & ~is_zero(di_sum)
        dx = 100.0 * (np.abs(minus_di - plus_di) / di_sum)
        if position < 2 * period:
            np.add(sum_dx, dx, out=sum_dx, where=defined)
            if position == 2 * period - 1:
                adx_value = sum_dx / period
        else:
            np.copyto(adx_value, (adx_value * (period - 1) + dx) / period, where=defined)
    return [adx_value], lookback


@replays("ADOSC", ops_per_bar=68)
def adosc(w: Windows, call: Call) -> tuple[list[np.ndarray], int]:
    """TA_ADOSC's last output: the A/D line (a bar adds only where high > low), both EMAs seeded with its first value
    and stepped `fma(1 - k, ema, k * ad)`."""
    fast_period, slow_period = call["fastperiod"], call["slowperiod"]
    lookback = max(fast_period, slow_period) - 1 + call.unstable
    fast_k = 2.0 / (float(fast_period) + 1.0)
    slow_k = 2.0 / (float(slow_period) + 1.0)
    high, low, close, volume = (w.span(series) for series in range(4))
    span = high - low
    # `ad += ...` only where high > low
    increment = np.where(span > 0.0, (close - low - (high - close)) / span * volume, 0.0)
    ad = w.zeros()
    ad += w.of(increment, 0)
    fast, slow = ad.copy(), ad.copy()
    for position in range(1, w.length):
        ad += w.of(increment, position)
        fast = fma(fast, 1.0 - fast_k, fast_k * ad)
        slow = fma(slow, 1.0 - slow_k, slow_k * ad)
    return [fast - slow], lookback


@replays("SAR", ops_per_bar=70)
def sar(w: Windows, call: Call) -> tuple[list[np.ndarray], int]:
    """TA_SAR's last output. The first direction is short where MINUS_DM(1) of the second bar is positive; every bar
    outputs the SAR carried in (or, on a reversal, the extreme point clamped to the last two bars' range), then steps
    `fma(af, ep - sar, sar)` and clamps it again."""
    acceleration, maximum = float(call["acceleration"]), float(call["maximum"])
    lookback = 1
    if acceleration > maximum:
        acceleration = maximum
    high, low = [w.at(i, 0) for i in range(w.length)], [w.at(i, 1) for i in range(w.length)]
    diff_plus, diff_minus = high[1] - high[0], low[0] - low[1]
    is_long = ~((diff_minus > 0.0) & (diff_plus < diff_minus))
    ep = np.where(is_long, high[1], low[1])
    value = np.where(is_long, low[0], high[0])
    af = np.full(w.count, acceleration)
    new_low, new_high = low[1], high[1]
    out = value
    for today in range(1, w.length):
        prev_low, prev_high = new_low, new_high
        new_low, new_high = low[today], high[today]
        to_short = is_long & (new_low <= value)
        to_long = ~is_long & (new_high >= value)
        override_short = np.where(ep < prev_high, prev_high, ep)
        override_short = np.where(override_short < new_high, new_high, override_short)
        override_long = np.where(ep > prev_low, prev_low, ep)
        override_long = np.where(override_long > new_low, new_low, override_long)
        out = np.where(to_short, override_short, np.where(to_long, override_long, value))
        if today == w.end:
            break
        now_long = (is_long & ~to_short) | to_long
        extends = np.where(now_long, ~to_long & (new_high > ep), ~to_short & (new_low < ep))
        increased = af + acceleration
        increased = np.where(increased > maximum, maximum, increased)
        af = np.where(to_short | to_long, acceleration, np.where(extends, increased, af))
        ep = np.where(to_short, new_low, np.where(to_long, new_high,
                                                   np.where(extends, np.where(now_long, new_high, new_low), ep)))
        value = fma(af, ep - out, out)
        value = np.where(now_long & (value > prev_low), prev_low, value)
        value = np.where(now_long & (value > new_low), new_low, value)
        value = np.where(~now_long & (value < prev_high), prev_high, value)
        value = np.where(~now_long & (value < new_high), new_high, value)
        is_long = now_long
    return [out], lookback


@replays("BBANDS", ops_per_bar=10)
def bbands(w: Windows, call: Call) -> tuple[list[np.ndarray], int]:
    """TA_BBANDS' first output with an SMA middle band (the window is exactly one period): the variance of the values
    shifted by the first one, recomputed around the window's mean where it is below 1e-6 of the mean square (then
    floored at 1e-12 of it to zero)."""
    period, up, down, ma_type = call["timeperiod"], float(call["nbdevup"]), float(call["nbdevdn"]), call["matype"]
    lookback = period - 1
    if ma_type != 0 or w.length != period:
        raise Unsupported("an MA type other than SMA, or a window longer than the period")
    inverse = 1.0 / float(period)
    values = [w.at(i) for i in range(period)]
    shift = values[0]
    ma_total, total1, total2 = w.zeros(), w.zeros(), w.zeros()
    for value in values:
        ma_total = ma_total + value
        deviation = value - shift
        total1 = total1 + deviation
        total2 = total2 + deviation * deviation
    mean1 = total1 * inverse
    variance = total2 * inverse - mean1 * mean1
    middle = ma_total / period
    reseed = variance < 0.000001 * (total2 * inverse)
    if reseed.any():
        window_sum = w.zeros()
        for value in values:
            window_sum = window_sum + value
        shift = window_sum * inverse
        total1, total2 = w.zeros(), w.zeros()
        for value in values:
            deviation = value - shift
            total1 = total1 + deviation
            total2 = total2 + deviation * deviation
        mean1 = total1 * inverse
        fresh = total2 * inverse - mean1 * mean1
        fresh = np.where(fresh < 0.000000000001 * (total2 * inverse), 0.0, fresh)
        variance = np.where(reseed, fresh, variance)
    deviation = np.where(variance != 0.0, np.sqrt(variance), 0.0)
    if up == down:
        width = deviation * up
        return [middle + width, middle, middle - width], lookback
    return [fma(deviation, up, middle), middle, middle - deviation * down], lookback
