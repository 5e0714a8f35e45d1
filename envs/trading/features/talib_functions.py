"""Every TA-Lib function by its own name and parameter names, what each one may be used for, and its warm-up.

The registry is TA-Lib's own description (`talib.abstract`: parameters with defaults, output names,
lookback), plus what probing a function on a seeded random-walk market shows. Nothing here is a hand table
of indicators:

- **Refused**, with the reason: functions that need a second input series (MAVP's periods; BETA, CORREL,
  ADD, ... combine two series), elementwise math of a raw price (ACOS of a price above 1 is NaN), and
  functions whose value at a bar depends on where the series starts: cumulative sums (OBV, AD, ...) and
  row numbers (MAXINDEX, MININDEX), found by computing them on a market and on the same market with its
  first bars cut off.
- **Warm-up**: TA-Lib's lookback plus an unstable period. Recursive indicators (EMA, RSI, ATR, ...) carry
  all their history; TA-Lib's `set_unstable_period` makes it drop that many more leading bars. The
  unstable period of a function with its parameters is measured, not assumed: the number of bars after
  its lookback until its values on a market and on the same market started later agree within
  `CONVERGENCE_TOLERANCE` of their spread. So a feature's value no longer depends on where the file starts.
- **Scale**: an output that moves with the price level (SMA, BBANDS, ...) enters as `x / close - 1`, one
  that scales with prices but not their level (ATR, MACD) as `x / close`, variances as `x / close**2`,
  volume-scaled ones (ADOSC) over their window's mean volume; found by probing with prices doubled and
  shifted. Their train-row z-scores then do not saturate when the price moves far from the train rows.
"""
from __future__ import annotations

import functools
import inspect
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import talib
from talib import abstract

from envs.errors import InputError
from envs.trading.features.fast_path import checked, fast_outputs
from envs.trading.features.rolling import window_mean
from envs.validation import did_you_mean

CONVERGENCE_TOLERANCE = 1e-6  # of the output's spread: about float32's resolution, what the observation keeps
_PROBE_BARS = 4_000
_TWO_SERIES = {"price0", "price1"}
_SCALES = ("level", "price", "price2", "volume", "none")


@functools.lru_cache(maxsize=16)
def _probe_market(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """A seeded random-walk market with consistent OHLCV: what refusals, warm-ups and scales are measured on
    (cached; callers slice or scale it into new arrays, never write into it)."""
    rng = np.random.default_rng(seed)
    close = 100.0 * np.exp(np.cumsum(rng.normal(0.0, 0.01, n)))
    open_ = np.r_[close[0], close[:-1]] * np.exp(rng.normal(0.0, 0.001, n))
    high = np.maximum(open_, close) * np.exp(np.abs(rng.normal(0.0, 0.005, n)))
    low = np.minimum(open_, close) * np.exp(-np.abs(rng.normal(0.0, 0.005, n)))
    volume = np.exp(rng.normal(5.0, 0.5, n))
    return {"open": open_, "high": high, "low": low, "close": close, "volume": volume}


def input_columns(name: str) -> list[str]:
    columns: list[str] = []
    for value in abstract.Function(name).info["input_names"].values():
        columns += value if isinstance(value, list) else [value]
    return columns


@contextmanager
def unstable_period(bars: int) -> Iterator[None]:
    """TA-Lib's unstable period for every function, for the duration (it is process-wide state)."""
    talib.set_unstable_period("ALL", bars)
    try:
        yield
    finally:
        talib.set_unstable_period("ALL", 0)


def _call(name: str, params: dict[str, Any], market: dict[str, np.ndarray], unstable: int = 0) -> list[np.ndarray]:
    function = abstract.Function(name)
    function.set_parameters(params)
    with unstable_period(unstable):
        out = function(market)
    return [np.asarray(o, dtype=np.float64) for o in (out if isinstance(out, list) else [out])]


def _lookback(name: str, params: dict[str, Any], unstable: int = 0) -> int:
    function = abstract.Function(name)
    function.set_parameters(params)
    with unstable_period(unstable):
        return int(function.lookback)


def _start_dependence(name: str) -> str | None:
    """Why the function's value depends on where the series starts (None: it does not), from its default
    parameters on a market and the same market with its first quarter cut off."""
    market = _probe_market(_PROBE_BARS)
    cut = _PROBE_BARS // 4
    full = _call(name, {}, market)
    later = _call(name, {}, {k: v[cut:] for k, v in market.items()})
    for whole, part in zip(full, later, strict=True):
        tail_whole, tail_part = whole[-200:], part[-200:]
        diff = tail_whole - tail_part
        spread = np.nanstd(whole[cut:]) or 1.0
        if np.nanmax(np.abs(diff)) <= CONVERGENCE_TOLERANCE * spread:
            continue
        if np.allclose(diff, cut):
            return "it returns row numbers, which depend on where the series starts"
        return "its value at a bar depends on where the series starts (a cumulative sum never forgets it)"
    return None


@functools.cache
def refusal(name: str) -> str | None:
    """Why a TA-Lib function cannot be a feature of one market's bars, or None when it can."""
    info = abstract.Function(name).info
    inputs = set(info["input_names"])
    if "periods" in inputs:
        return "it needs a periods input (a second series of its own), not only the bars"
    if inputs & _TWO_SERIES:
        return "it combines two series (price0, price1), not one market's bars"
    if info["group"] == "Math Transform":
        return "it is elementwise math of a raw price (e.g. ACOS of a price above 1 is NaN), not an indicator"
    if any(column not in ("open", "high", "low", "close", "volume") for column in input_columns(name)):
        return f"it reads inputs the bars do not have ({', '.join(input_columns(name))})"
    return _start_dependence(name)


def all_functions() -> list[str]:
    return sorted(talib.get_functions())


def allowed_functions() -> list[str]:
    """Every TA-Lib function a feature may name."""
    return [name for name in all_functions() if refusal(name) is None]


@functools.cache
def output_scales(name: str) -> tuple[str, ...]:
    """Per output: level | price | price2 | volume | none (see the module docstring), from its default parameters
    on the probe market with prices doubled, shifted, and volume doubled."""
    market = _probe_market(_PROBE_BARS)
    prices = ("open", "high", "low", "close")
    base = _call(name, {}, market)
    doubled = _call(name, {}, {k: v * 2.0 if k in prices else v for k, v in market.items()})
    shift = float(np.median(market["close"]))
    shifted = _call(name, {}, {k: v + shift if k in prices else v for k, v in market.items()})
    more_volume = _call(name, {}, {k: v * 2.0 if k == "volume" else v for k, v in market.items()})
    scales = []
    for b, d, s, v in zip(base, doubled, shifted, more_volume, strict=True):
        b, d, s, v = (x[_PROBE_BARS // 2:] for x in (b, d, s, v))  # past any recursive indicator's memory
        rows = np.isfinite(b) & np.isfinite(d) & np.isfinite(s) & np.isfinite(v) & (np.abs(b) > 1e-9)
        b, d, s, v = b[rows], d[rows], s[rows], v[rows]

        def same(x: np.ndarray, y: np.ndarray) -> bool:
            return bool(len(x)) and np.allclose(x, y, rtol=1e-6, atol=1e-9 * (np.abs(y).max() or 1.0))

        if same(d, 2.0 * b) and same(s, b + shift):
            scales.append("level")
        elif same(d, 2.0 * b):
            scales.append("price")
        elif same(d, 4.0 * b):
            scales.append("price2")
        elif same(d, b) and same(v, 2.0 * b):
            scales.append("volume")
        else:
            scales.append("none")
    return tuple(scales)


def _coerce(name: str, key: str, value: Any, default: Any, where: str) -> Any:
    """A parameter as TA-Lib wants it: ints stay ints (periods, MA types), floats floats."""
    kind = int if isinstance(default, int) and not isinstance(default, bool) else float
    try:
        number = float(value) if isinstance(value, str) else value
        if kind is int and (isinstance(number, bool) or float(number) != int(number)):
            raise ValueError
        return kind(number)
    except (TypeError, ValueError):
        raise InputError(f"{where}: {name} {key}: {value!r} is not a{'n integer' if kind is int else ' number'} "
                         f"(TA-Lib's default is {default})") from None


@dataclass(frozen=True)
class TaFeature:
    """One TA-Lib function with its parameters and chosen outputs, validated against TA-Lib's description."""

    name: str
    params: tuple[tuple[str, Any], ...]  # every parameter, defaults filled in, in TA-Lib's order
    outputs: tuple[str, ...]

    @classmethod
    def parse(cls, item: dict[str, Any], where: str) -> "TaFeature":
        """`{ta: MACD, fastperiod: 12, outputs: [macdhist]}` -> the feature, or an InputError naming the key."""
        given = str(item["ta"]).strip()
        name = given.upper()
        if name not in talib.get_functions():
            raise InputError(f"{where}: ta: {given!r} is not a TA-Lib function{did_you_mean(name, all_functions())}"
                             " (python -m experiments.data features lists them all)")
        reason = refusal(name)
        if reason:
            raise InputError(f"{where}: ta: {name} cannot be a feature: {reason}")
        info = abstract.Function(name).info
        defaults = dict(info["parameters"])
        params = {}
        for key, value in item.items():
            if key in ("ta", "outputs"):
                continue
            if key not in defaults:
                known = ", ".join(defaults) or "none"
                raise InputError(f"{where}: {name} has no parameter {key!r}{did_you_mean(key, defaults)} "
                                 f"(its parameters: {known})")
            params[key] = _coerce(name, key, value, defaults[key], where)
        outputs = item.get("outputs")
        names = list(info["output_names"])
        if outputs is None:
            chosen = tuple(names)
        else:
            chosen_list = [outputs] if isinstance(outputs, str) else list(outputs)
            for output in chosen_list:
                if output not in names:
                    raise InputError(f"{where}: {name} has no output {output!r}{did_you_mean(str(output), names)} "
                                     f"(its outputs: {', '.join(names)})")
            if not chosen_list:
                raise InputError(f"{where}: {name} outputs: name at least one of {', '.join(names)}, or leave it out")
            chosen = tuple(o for o in names if o in chosen_list)
        feature = cls(name, tuple((key, params.get(key, default)) for key, default in defaults.items()), chosen)
        feature._check_accepted(where)
        return feature

    def _check_accepted(self, where: str) -> None:
        try:
            _lookback(self.name, dict(self.params))
            _call(self.name, dict(self.params), _probe_market(300))
        except Exception as exc:  # TA-Lib reports a bad parameter (e.g. timeperiod 1) as one of several types
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise InputError(f"{where}: TA-Lib refuses {self.label}: {text}: check the parameters' ranges "
                             f"(python -m experiments.data features {self.name})") from None

    @property
    def label(self) -> str:
        """e.g. RSI(14), MACD(12,26,9)."""
        return f"{self.name}({','.join(_short(v) for _, v in self.params)})"

    def columns(self) -> list[str]:
        all_outputs = abstract.Function(self.name).info["output_names"]
        if len(all_outputs) == 1:
            return [self.label]
        return [f"{self.label}.{output}" for output in self.outputs]

    @functools.cached_property
    def unstable_bars(self) -> int:
        """Bars after the lookback until the value forgets where the series started (see the module docstring)."""
        return _converged_after(self.name, self.params)

    @property
    def first_valid(self) -> int:
        """The row of the first value that is complete and no longer depends on where the series starts."""
        params = dict(self.params)
        base = _lookback(self.name, params)
        return max(_lookback(self.name, params, self.unstable_bars), base + self.unstable_bars)

    def compute(self, market: dict[str, np.ndarray]) -> list[np.ndarray]:
        """The chosen outputs on `market` (arrays by bar column), scaled to the close: the value at bar t is the
        function's over the fixed look-back of `first_valid + 1` bars ending at t (never over all the history
        before it), so a served policy given the last bars computes the same bits; NaN before `first_valid`. Those
        bits come from `per_bar_outputs`, or from `fast_path` where it gives the same ones for less."""
        names = abstract.Function(self.name).info["output_names"]
        chosen = [index for index, output in enumerate(names) if output in self.outputs]
        look_back = self.first_valid + 1
        inputs = [np.ascontiguousarray(market[column], dtype=np.float64) for column in input_columns(self.name)]
        raw = self._raw_outputs(inputs, dict(self.params), look_back)
        scales = output_scales(self.name)
        columns = []
        for index in chosen:
            values = _rescale(raw[index], scales[index], market, look_back)
            values[~np.isfinite(values)] = np.nan
            columns.append(values)
        return columns

    def _raw_outputs(self, inputs: list[np.ndarray], params: dict[str, Any], look_back: int) -> list[np.ndarray]:
        """Every output at every row: by the fast path where it gives the per-bar call's bits (`fast_path`: one
        whole-series call or a replay over all windows, checked against the per-bar call at its first and last
        windows), else by the per-bar calls."""
        unstable = self.unstable_bars
        fast = fast_outputs(self.name, params, unstable, inputs, look_back, _lookback(self.name, params, unstable))
        if fast is not None and checked(self.name, fast[0],
                                        lambda end: window_outputs(self.name, params, unstable, inputs, end, look_back),
                                        look_back):
            return fast[0]
        return per_bar_outputs(self.name, params, unstable, inputs, look_back)


def per_bar_outputs(name: str, params: dict[str, Any], unstable: int, inputs: list[np.ndarray],
                    look_back: int) -> list[np.ndarray]:
    """The reference: TA-Lib called on each look-back of `look_back` bars, every output's last value at the look-back's
    last row (NaN before the first). One Python-level call per bar (kept lean: parameters passed by position, in the
    function's own order); `fast_path` gives the same bits faster where it can, and is tested against this."""
    n = len(inputs[0])
    count = len(abstract.Function(name).info["output_names"])
    columns = [np.full(n, np.nan) for _ in range(count)]
    if n < look_back:
        return columns
    # TA-Lib's own function, not the pandas/polars wrapper around it: the wrapper looks at every argument on every
    # call (half the time of a per-bar call here) and passes numpy arrays through unchanged.
    function = getattr(talib, name)
    function = getattr(function, "__wrapped__", function)
    args = tuple(params[key] for key in list(inspect.signature(function).parameters)[len(inputs):])
    starts = range(n - look_back + 1)
    with unstable_period(unstable):
        if count == 1 and len(inputs) == 1:
            values = inputs[0]
            last = [function(values[start:start + look_back], *args)[-1] for start in starts]
        elif count == 1:
            last = [function(*[values[start:start + look_back] for values in inputs], *args)[-1] for start in starts]
        else:
            last = [[out[-1] for out in function(*[values[start:start + look_back] for values in inputs], *args)]
                    for start in starts]
    table = np.array(last, dtype=np.float64).reshape(len(starts), count)
    for index, column in enumerate(columns):
        column[look_back - 1:] = table[:, index]
    return columns


def window_outputs(name: str, params: dict[str, Any], unstable: int, inputs: list[np.ndarray], end: int,
                   look_back: int) -> list[float]:
    """The per-bar call's outputs for the look-back ending at row end-1."""
    with unstable_period(unstable):
        out = getattr(talib, name)(*(values[end - look_back:end] for values in inputs), **params)
    return [float(values[-1]) for values in (out if isinstance(out, tuple) else (out,))]


def _rescale(values: np.ndarray, scale: str, market: dict[str, np.ndarray], look_back: int) -> np.ndarray:
    close = market["close"]
    with np.errstate(divide="ignore", invalid="ignore"):
        if scale == "level":
            return values / close - 1.0
        if scale == "price":
            return values / close
        if scale == "price2":
            return values / close ** 2
        if scale == "volume":
            return values / window_mean(np.asarray(market["volume"], dtype=np.float64), max(look_back, 2))
    return values.copy()


def _short(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


@functools.lru_cache(maxsize=4096)
def _converged_after(name: str, params: tuple[tuple[str, Any], ...]) -> int:
    """The unstable period: bars after the lookback until the values on a market and on the same market cut short
    at the start agree within CONVERGENCE_TOLERANCE of their spread (0 for functions without memory)."""
    longest = max([int(v) for _, v in params if isinstance(v, int)] + [1])
    n = _PROBE_BARS + 60 * longest
    market = _probe_market(n)
    cut = n // 4
    settings = dict(params)
    full = _call(name, settings, market)
    later = _call(name, settings, {k: v[cut:] for k, v in market.items()})
    start = cut + _lookback(name, settings)  # the first row the cut market has a value for
    converged_at = start
    for whole, part in zip(full, later, strict=True):
        diff = np.abs(whole[start:] - part[start - cut:])
        spread = np.nanstd(whole[start:])
        if not np.isfinite(spread) or spread == 0:
            continue
        bad = np.flatnonzero(~(diff <= CONVERGENCE_TOLERANCE * spread))
        if len(bad) and bad[-1] >= len(diff) - 100:
            raise InputError(f"TA-Lib {name}{dict(params)}: its values still depend on where the series starts "
                             f"after {len(diff)} bars: use a shorter period")
        if len(bad):
            converged_at = max(converged_at, start + int(bad[-1]) + 1)
    return converged_at - start
