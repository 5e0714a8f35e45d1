"""TA-Lib over every fixed look-back at once: a function's own sequence of floating-point operations replayed in numpy,
one vector element per window.

Why: a TA-Lib feature's value at bar t is the function's output over the last `look_back` bars only
(`TaFeature.compute`: a served policy given those bars must get the same bits), so each bar needs its own call
from a fresh start, and one Python-level call per bar and indicator costs ~4 us of overhead each. A replay runs the
function's C source step by step (position i of the look-back, for all windows at once: `Windows.at`), with the same
operations in the same order, the same branches (as `np.where`) and `fma` where TA-Lib calls `fma()`
(`exact_fma`). So every value is the bits the per-bar call gives; tests/unit/test_talib_fast_path.py checks every
replayed function against the per-bar calls, bit for bit, on the bundled bars and on synthetic markets.

A replay is registered with `@replays(NAME)` in `replay_averages`, `replay_oscillators` and `replay_ranges`, and gets
the function's parameters (defaults filled in), the unstable period in force and the window length; it returns its
outputs at the last bar of every window, in TA-Lib's output order, and the lookback it used (checked against
TA-Lib's own). Windows are processed in chunks, which keeps numpy's temporaries small and in cache.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

CHUNK = 8192  # windows per pass: temporaries of 64 KB stay in the CPU cache (and off the allocator's mmap path)


@dataclass(frozen=True)
class Windows:
    """`count` windows of `length` bars over the same input series; window j covers rows first+j .. first+j+length-1."""

    inputs: tuple[np.ndarray, ...]  # TA-Lib's input order (e.g. high, low, close)
    length: int
    first: int
    count: int

    def at(self, position: int, series: int = 0) -> np.ndarray:
        """Input `series` at `position` (0 = the oldest bar) of every window."""
        start = self.first + position
        return self.inputs[series][start:start + self.count]

    def span(self, series: int = 0) -> np.ndarray:
        """Input `series` over all the bars these windows cover: per-bar terms that do not depend on where a window
        starts (a bar's change, its true range) are computed on it once, and read with `of`."""
        return self.inputs[series][self.first:self.first + self.count + self.length - 1]

    def of(self, derived: np.ndarray, position: int) -> np.ndarray:
        """A per-bar term computed on `span` at `position` of every window."""
        return derived[position:position + self.count]

    def zeros(self) -> np.ndarray:
        """A fresh accumulator per window, +0.0 as TA-Lib's `total = 0.0`."""
        return np.zeros(self.count)

    @property
    def end(self) -> int:
        """TA-Lib's endIdx for one window."""
        return self.length - 1


@dataclass(frozen=True)
class Call:
    """What a replay needs besides the windows: parameters by TA-Lib's names and the unstable period in force."""

    params: dict[str, Any]
    unstable: int

    def __getitem__(self, key: str) -> Any:
        return self.params[key]


class Unsupported(Exception):
    """A replay does not cover these parameters (e.g. an MA type it does not replay): the per-bar path computes them."""


Replay = Callable[[Windows, Call], tuple[list[np.ndarray], int]]
REPLAYS: dict[str, Replay] = {}
OPS_PER_BAR: dict[str, int] = {}  # about how many numpy operations a replay runs per bar of a window (what it costs)


def replays(name: str, ops_per_bar: int) -> Callable[[Replay], Replay]:
    """Register a replay of TA-Lib's `name`, which runs about `ops_per_bar` numpy operations per bar of a window (an
    emulated fma counts ~33)."""
    def register(function: Replay) -> Replay:
        REPLAYS[name] = function
        OPS_PER_BAR[name] = ops_per_bar
        return function
    return register


def replay(name: str, params: dict[str, Any], unstable: int, inputs: list[np.ndarray], length: int,
           lookback: int) -> list[np.ndarray]:
    """The outputs of TA-Lib's `name` at the last bar of every window of `length` bars (at least one window), as rows
    of len(inputs[0]) with NaN before the first full window. `lookback` is TA-Lib's own (with the unstable period):
    a replay computing another one is a bug, and raises. Unsupported: parameters the replay does not cover."""
    n = len(inputs[0])
    count = n - length + 1
    function = REPLAYS[name]
    call = Call(params, unstable)
    arrays = tuple(np.ascontiguousarray(values, dtype=np.float64) for values in inputs)
    pieces: list[list[np.ndarray]] = []
    with np.errstate(all="ignore"):  # TA-Lib divides by zero and takes NaN through like any C program: same here
        for first in range(0, count, CHUNK):
            outputs, used = function(Windows(arrays, length, first, min(CHUNK, count - first)), call)
            if used != lookback:
                raise RuntimeError(f"replay of {name}{params} used lookback {used}, TA-Lib's is {lookback}")
            pieces.append(outputs)
    columns = []
    for index in range(len(pieces[0])):
        column = np.full(n, np.nan)
        column[length - 1:] = np.concatenate([piece[index] for piece in pieces])
        columns.append(column)
    return columns


def is_zero(value: np.ndarray) -> np.ndarray:
    """TA-Lib's TA_IS_ZERO: within TA_EPSILON (1e-14) of zero."""
    return (-1e-14 < value) & (value < 1e-14)
