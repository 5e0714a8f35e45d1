"""A correctly rounded fused multiply-add, elementwise in numpy: `fma(a, b, c)` is `a*b + c` rounded once.

Why: TA-Lib after 0.6.4 (the pinned ta-lib 0.8.2 wheel carries C TA-Lib 0.8.1) computes its recursions with C's
`fma()` (e.g. an EMA step is `fma(x - prev, k, prev)`), and numpy has no fma ufunc. `a*b + c` in numpy rounds
twice and differs from TA-Lib in the last bit now and then, and a recursion carries that bit on; the window replay
(`envs.trading.features.replay`) must give TA-Lib's bits exactly. The emulation is Boldo & Melquiond's (IEEE
Trans. Computers 57(4), 2008, "Emulation of FMA and correctly rounded sums: proved algorithms using rounding to
odd"): the product split exactly into two doubles (Dekker), its high part added to `c` exactly (TwoSum), the two
low parts summed rounded to odd, and one final rounding to nearest. Exact for finite values whose product and partial
sums neither overflow nor fall into the subnormal range (|values| between about 1e-290 and 1e290): `fast_path`
replays only inputs between 1e-100 and 1e100 in magnitude (or zero), which keeps the replayed values far inside it.
"""
from __future__ import annotations

import numpy as np

_SPLITTER = 134217729.0  # 2**27 + 1: Veltkamp's split of a double into two halves of 26 bits


def split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Veltkamp: a == high + low exactly, each with at most 26 significant bits (so products of halves are exact)."""
    c = a * _SPLITTER
    high = c - (c - a)
    return high, a - high


def _split_scalar(b: float) -> tuple[float, float]:
    c = b * _SPLITTER
    high = c - (c - b)
    return high, b - high


def fma(a: np.ndarray, b: np.ndarray | float, c: np.ndarray) -> np.ndarray:
    """a*b + c with a single rounding to nearest (ties to even), elementwise; `b` may be a float. Exact where every
    value, product and sum stays within the normal range (the callers check their inputs' magnitudes)."""
    product = a * b
    a_high, a_low = split(a)
    b_high, b_low = _split_scalar(float(b)) if np.ndim(b) == 0 else split(b)
    product_error = ((a_high * b_high - product) + a_high * b_low + a_low * b_high) + a_low * b_low
    total = c + product                                   # TwoSum(c, product): total + sum_error == c + product
    virtual = total - c
    sum_error = (c - (total - virtual)) + (product - virtual)
    tail = sum_error + product_error                      # TwoSum(sum_error, product_error), then round to odd
    virtual = tail - sum_error
    tail_error = (sum_error - (tail - virtual)) + (product_error - virtual)
    bits = tail.view(np.int64)
    # Rounding to odd: an inexact tail moves to its odd neighbour on the side of its error (toward zero when the error
    # has the other sign than the tail, else away from it); an exact one stays.
    odd = (bits + ((tail_error.view(np.int64) ^ bits) >> 63)) | 1
    np.copyto(bits, odd, where=tail_error != 0.0)
    total += tail
    return total
