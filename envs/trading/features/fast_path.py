"""Which way a TA-Lib feature is computed: one whole-series call, a replay over all windows, or a call per bar.

Why: a feature's value at bar t must be TA-Lib's output over the fixed look-back ending at t (`TaFeature.compute`),
bit for bit, and calling TA-Lib once per bar costs ~4 us of Python per bar and indicator. Two ways give the same bits
without that:

- **Whole series**, for the functions in `WHOLE_SERIES` only: their output at a bar is computed from that bar's
  look-back alone, from scratch, by operations that do not depend on where the series starts (a difference or
  ratio of two values, the extremes of the window and where they are, the bar itself). So one call over the whole
  series gives every bar's look-back value. A function with any running total or recursion (an SMA's running sum,
  a variance, an EMA) carries rounding from before the look-back and is not here, however close its values are.
- **Replay** (`replay`): the function's own floating-point operations run over every window at once, for the
  functions registered there, where that costs less than the per-bar calls (`replay_pays`: a replay pays a fixed
  ~1 us per numpy operation, so it loses on a handful of windows, e.g. a served policy's, and an emulated fused
  multiply-add costs ~33 operations, so it loses on long recursions such as TEMA's).

Everything else, and any input a replay is not exact for (non-finite values, magnitudes near the ends of the double
range), takes the per-bar path (`talib_functions.per_bar_outputs`), which stays the reference: tests compare every
fast function with it bit for bit, and `checked` compares each fast result with a per-bar call at its first and last
bars before using it (a TA-Lib whose arithmetic changed falls back to the per-bar path, with a warning).
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

import numpy as np
import talib

from envs.trading.features import replay_averages, replay_oscillators, replay_ranges  # noqa: F401  (register replays)
from envs.trading.features.replay import CHUNK, OPS_PER_BAR, REPLAYS, Unsupported, replay

# Each function's output at a bar, and why it depends on that bar's look-back only.
WHOLE_SERIES: dict[str, str] = {
    "MOM": "the value minus the value `timeperiod` bars earlier",
    "ROC": "the change over `timeperiod` bars as a percentage of the earlier value",
    "ROCP": "the change over `timeperiod` bars over the earlier value",
    "ROCR": "the value over the value `timeperiod` bars earlier",
    "ROCR100": "the value over the value `timeperiod` bars earlier, times 100",
    "MAX": "the highest value of the window",
    "MIN": "the lowest value of the window",
    "MINMAX": "the lowest and highest values of the window",
    "MIDPOINT": "the mean of the window's highest and lowest values",
    "MIDPRICE": "the mean of the window's highest high and lowest low",
    "WILLR": "the close within the window's highest high and lowest low",
    "AROON": "how many bars ago the window's highest high and lowest low were",
    "AROONOSC": "how many bars ago the window's highest high and lowest low were",
    "TRANGE": "the bar's range extended to the previous close",
    "AVGPRICE": "the bar's four prices",
    "MEDPRICE": "the bar's high and low",
    "TYPPRICE": "the bar's high, low and close",
    "WCLPRICE": "the bar's high, low and close",
    "BOP": "the bar's open, high, low and close",
}
# The cost model of `replay_pays`, measured on this project's machine (CPU time, 20,111 bars): a TA-Lib call per bar,
# a numpy operation's fixed cost, and its cost per window. Since the per-bar path skips TA-Lib's pandas wrapper a
# call costs ~2-3 us, but 5 us still picks the faster route on the benchmark's 30 indicators (2026-11-28, CPU time,
# best of 4: 1.05 s with 5e-6, 1.10 s with 2.5e-6, which moves 7 replays to per-bar calls): it also prices the slicing.
CALL_SECONDS = 5e-6
OPERATION_SECONDS = 1e-6
ELEMENT_SECONDS = 0.5e-9
_SAFE_MAGNITUDE = 1e100  # inputs within 1e-100..1e100 keep every replayed product and sum normal and finite


def replay_pays(name: str, look_back: int, windows: int) -> bool:
    """Whether replaying `name` over `windows` windows of `look_back` bars costs less than calling TA-Lib per bar."""
    operations = OPS_PER_BAR[name] * look_back  # per chunk of windows
    chunks = -(-windows // CHUNK)
    return operations * (chunks * OPERATION_SECONDS + windows * ELEMENT_SECONDS) < windows * CALL_SECONDS


def _safe(inputs: list[np.ndarray]) -> bool:
    """Every input finite and 0 or between 1e-100 and 1e100 in magnitude: the replayed values stay far inside the
    normal range, where the emulated fma is exact."""
    for values in inputs:
        magnitude = np.abs(values)
        if not np.isfinite(values).all() or magnitude.max(initial=0.0) > _SAFE_MAGNITUDE:
            return False
        if ((magnitude > 0.0) & (magnitude < 1.0 / _SAFE_MAGNITUDE)).any():
            return False
    return True


def fast_outputs(name: str, params: dict[str, Any], unstable: int, inputs: list[np.ndarray], look_back: int,
                 lookback: int) -> tuple[list[np.ndarray], str] | None:
    """All outputs of `name` at every row (NaN before the first full look-back) without a call per bar, and the path
    taken ("whole series" or "replay"), or None where only the per-bar path gives the right bits. `lookback` is
    TA-Lib's own with the unstable period in force."""
    n = len(inputs[0])
    if n < look_back or not _safe(inputs):
        return None
    if name in WHOLE_SERIES:  # none of them has an unstable period
        out = getattr(talib, name)(*inputs, **params)
        columns = [np.array(values, dtype=np.float64) for values in (out if isinstance(out, tuple) else (out,))]
        for column in columns:
            column[:look_back - 1] = np.nan
        return columns, "whole series"
    if name in REPLAYS and replay_pays(name, look_back, n - look_back + 1):
        try:
            return replay(name, params, unstable, inputs, look_back, lookback), "replay"
        except Unsupported:
            return None
    return None


def checked(name: str, fast: list[np.ndarray], reference: Callable[[int], list[float]], look_back: int) -> bool:
    """Whether the fast outputs equal the per-bar call's bits at the first and the last full look-back (`reference(end)`
    gives the outputs of the window ending at row end-1); a mismatch warns, and the caller computes per bar."""
    n = len(fast[0])
    for end in sorted({look_back, n}):
        expected = np.array(reference(end), dtype=np.float64)
        got = np.array([column[end - 1] for column in fast])
        same = (expected.view(np.int64) == got.view(np.int64)) | (np.isnan(expected) & np.isnan(got))
        if not same.all():
            warnings.warn(f"TA-Lib {name}: the fast path differs from the per-bar call at row {end - 1} "
                          f"({got.tolist()} vs {expected.tolist()}); computing it per bar", RuntimeWarning,
                          stacklevel=3)
            return False
    return True
