"""`reference`: this machine's speed on the day a figure is measured, so wall times of two days compare.

One number: the fastest of 200 passes of the `features` benchmark's peer, the 30 TA-Lib indicators called directly
over the bundled 20,111 BTC-USD bars (deterministic C code on fixed data; about 1.5 s in all). The fastest pass is
the machine's own speed: other jobs on the cores slow most passes, rarely all 200 of them, so the median (recorded
beside it) shows the load and the best shows the machine. This machine measured 5.3 ms on 2026-11-26 and 10.7 ms on
2026-11-28, when whole jobs ran ~2x slower too (the main job 3 min 01 s against 6.3 min): a wall time measured at
reference R takes about R'/R as long on a day that measures R'. Every wall time in the README gives the reference of
its day (docs/benchmarks.md, "Reference speed").
"""
from __future__ import annotations

import statistics
import time

from experiments.benchmark.common import Budget, Figure, Report, load_average
from experiments.benchmark.features_bench import BARS_FILE, INDICATORS, talib_alone, talib_inputs


def pass_times(passes: int) -> tuple[list[float], int]:
    """Seconds of each of `passes` TA-Lib passes over the bundled bars (after one untimed pass that loads the code),
    and how many bars a pass reads."""
    from envs.trading.data import load_bars

    bars = load_bars(BARS_FILE)
    arrays = talib_inputs(bars)
    talib_alone(arrays)
    times = []
    for _ in range(passes):
        started = time.perf_counter()
        talib_alone(arrays)
        times.append(time.perf_counter() - started)
    return times, len(bars)


def summary(best_ms: float, median_ms: float, passes: int, bars: int, load: list[float] | None) -> str:
    """The line to copy beside a wall time."""
    at_load = f", load {load[0]}" if load else ""
    return (f"reference: {best_ms:.2f} ms (TA-Lib alone, {len(INDICATORS)} indicators over the bundled {bars:,} bars, "
            f"best of {passes} passes; median {median_ms:.2f} ms{at_load})")


def run(budget: Budget) -> Report:
    passes = budget.pick(full=200, quick=20)
    times, bars = pass_times(passes)
    best_ms, median_ms = min(times) * 1e3, statistics.median(times) * 1e3
    return Report("reference", __doc__.splitlines()[0], "TA-Lib alone", "none", [
        Figure(f"reference: {len(INDICATORS)} TA-Lib indicators over the bundled bars, best of {passes} passes", "ms",
               best_ms, higher_is_better=False, note=f"median {median_ms:.2f} ms: the best is the machine, the "
                                                     "median the machine and its load"),
    ], {"passes": passes, "best_ms": best_ms, "median_ms": median_ms, "samples_ms": [t * 1e3 for t in times],
        "summary": summary(best_ms, median_ms, passes, bars, load_average())})
