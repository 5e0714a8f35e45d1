"""SYNTHETIC universe: N coins moved by one market factor, with or without a planted cross-sectional signal.

A portfolio agent must be tested where the answer is known. `synthetic_universe(..., planted=True)` hides an
edge that only relative weights can earn; its noise twin (`planted=False`) is the same market with that edge
destroyed, so a verdict must find it on the first and nothing on the second. Like every synthetic market
these bars carry `attrs["synthetic"] = True`, and reports say SYNTHETIC.

Model, per bar of length dt (in years), for coin i:

* log return r_it = beta_i f_t + sigma_i sqrt(h_it dt) z_it + d_it - (variance of the shocks) / 2, so a coin's
  expected simple return is about its drift d_it and the market has none: timing the market earns nothing.
* market factor f_t = MARKET_VOL sqrt(g_t dt) u_t; g and every h_i are GARCH(1,1) variances (unit mean) and
  u, z Student-t shocks, with the tails and clustering of the single-coin model (envs/trading/synthetic.py).
* per-coin beta in BETA_RANGE and idiosyncratic annual volatility sigma_i in IDIO_VOL_RANGE: the hourly
  returns of two coins correlate by 0.3 to 0.6 depending on the seed.
* latent drift d_it = DRIFT_SCALE sigma_i sqrt(dt) x_it, with x_i a unit-variance AR(1) of half-life
  DRIFT_HALF_LIFE_BARS bars. planted=True keeps x in time order: a coin that has risen on its own over the
  last day or two tends to keep rising for about a day (momentum in the idiosyncratic part). It shows in the
  coin's own window of log returns, in units of its own volatility; the market factor cancels out of any
  ranking of coins. Over horizons much longer than a day the drift adds DRIFT_SCALE^2 (1 + phi) / (1 - phi),
  about 44%, to a coin's idiosyncratic variance. The half-life is in bars, not days, because the signal is
  meant for a model that reads a window of bars, whatever their length.
* planted=False shuffles each coin's x in time (a separate stream, every other draw identical): the twin has
  the same factor, betas, volatilities and marginal distributions, and nothing to predict.
* open = previous close with a tiny jitter, high/low beyond max/min(open, close) by exponential draws scaled
  to the bar's volatility, volume = a per-coin dollar volume / price, larger on big moves.

How strong (1h bars, seed 0, 20,000 bars; tests/unit/test_synthetic_universe.py): long the top quartile by
the last 24 bars' return against 1/N, rebalanced daily, earns 44 bp a day gross and 31 bp after 10 bps
costs at N=20 (t 7.1 and 4.9), 43 and 30 bp at N=500; on the noise twin +1 bp gross (t 0.2), -13 bp net. A
30-day lookback dilutes the signal in 29 days of noise and keeps about a third of it (8 bp at N=20, 14 bp at
N=500).

Each kind of draw has its own generator and is drawn coin by coin, so coin i is the same in a universe of 20
and of 500 (the first 20 of 500 are the universe of 20), and a test at small N speaks for large N. Everything
is vectorized over coins: 500 coins x 20,000 hourly bars take a few seconds (most of it drawing, and checking
500 frames).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.signal import lfilter

from envs.trading.data import timeframe_delta, validate_bars
from envs.trading.synthetic import _GARCH_ALPHA, _GARCH_BETA, _T_DOF, START, YEAR, seeded_rng

GENERATOR = "rlplatform-synthetic-universe-v1: market factor x beta + idiosyncratic GARCH(1,1) Student-t returns"
MARKET_VOL = 0.6  # annual
BETA_RANGE = (0.6, 1.4)
IDIO_VOL_RANGE = (0.5, 1.0)  # annual
DRIFT_HALF_LIFE_BARS = 24
DRIFT_SCALE = 0.08  # the drift's per-bar standard deviation, in units of the coin's idiosyncratic bar volatility


def universe_symbols(n_assets: int) -> list[str]:
    """SYN000-USD, SYN001-USD, ...: the symbols of a universe of `n_assets` coins, in order."""
    return [f"SYN{i:03d}-USD" for i in range(n_assets)]


def _draws(seed: int, kind: str) -> np.random.Generator:
    """The generator of one kind of draw of a universe, independent of every other kind."""
    return seeded_rng("SYN-UNIVERSE", seed, f"universe/{kind}")


def _student_t(rng: np.random.Generator, n_assets: int, n_bars: int) -> np.ndarray:
    """(n_assets, n_bars) unit-variance Student-t shocks, drawn coin by coin."""
    return rng.standard_t(_T_DOF, size=(n_assets, n_bars)) * math.sqrt((_T_DOF - 2) / _T_DOF)


def _garch_variances(z: np.ndarray, h0: np.ndarray) -> np.ndarray:
    """h (unit unconditional mean) of every row of shocks z (one coin per row): h_t uses z up to t-1 only."""
    omega, a, b = 1.0 - _GARCH_ALPHA - _GARCH_BETA, _GARCH_ALPHA, _GARCH_BETA
    growth = np.ascontiguousarray((a * z * z + b).T)  # one row per bar: the loop over time reads memory in order
    h = np.empty_like(growth)
    prev = h0
    for t, row in enumerate(growth):
        h[t] = prev
        prev = omega + row * prev
    return np.ascontiguousarray(h.T)


def _latent_drift(seed: int, n_assets: int, n_bars: int, planted: bool) -> np.ndarray:
    """(n_assets, n_bars) unit-variance AR(1) paths; for the noise twin, each coin's path shuffled in time."""
    phi = 0.5 ** (1.0 / DRIFT_HALF_LIFE_BARS)
    draws = _draws(seed, "drift").standard_normal((n_assets, 1 + n_bars))  # per coin: the start, then innovations
    x = lfilter([math.sqrt(1.0 - phi * phi)], [1.0, -phi], draws[:, 1:], axis=1, zi=phi * draws[:, :1])[0]
    return x if planted else _draws(seed, "shuffle").permuted(x, axis=1)


def synthetic_universe(n_assets: int, timeframe: str, n_bars: int, seed: int,
                       planted: bool, signal: float = 1.0) -> dict[str, pd.DataFrame]:
    """SYNTHETIC OHLCV bars of `n_assets` coins sharing one market: deterministic per (seed, planted, signal),
    validated. `signal` scales the drift (1: DRIFT_SCALE): a canary may plant it stronger, so that what it checks
    (that the pipeline learns and finds a cross-sectional edge) does not hang on a marginal one."""
    if n_assets < 1 or n_bars < 2:
        raise ValueError(f"synthetic_universe: need n_assets >= 1 and n_bars >= 2, got {n_assets} and {n_bars}")
    step = timeframe_delta(timeframe)
    dt = step / YEAR
    # Arrays are (coin, bar): one coin's bars are contiguous, as its frame wants them.
    beta, idio_vol, price, dollars, garch_start = _draws(seed, "coins").random((n_assets, 5)).T[:, :, None]
    beta = BETA_RANGE[0] + (BETA_RANGE[1] - BETA_RANGE[0]) * beta
    idio_vol = IDIO_VOL_RANGE[0] + (IDIO_VOL_RANGE[1] - IDIO_VOL_RANGE[0]) * idio_vol
    start_price = 10 ** (-2 + 4 * price)  # 0.01 .. 100
    bar_dollar_volume = 10 ** (7 + 2 * dollars) * (step / pd.Timedelta(days=1))

    market_rng = _draws(seed, "market")
    u = _student_t(market_rng, 1, n_bars)
    market_var = MARKET_VOL ** 2 * dt * _garch_variances(u, h0=np.array([market_rng.uniform(0.5, 2.0)]))
    z = _student_t(_draws(seed, "idiosyncratic"), n_assets, n_bars)
    idio_var = idio_vol ** 2 * dt * _garch_variances(z, h0=0.5 + 1.5 * garch_start[:, 0])
    bar_var = beta ** 2 * market_var + idio_var
    drift = signal * DRIFT_SCALE * idio_vol * math.sqrt(dt) * _latent_drift(seed, n_assets, n_bars, planted)
    log_return = beta * np.sqrt(market_var) * u + np.sqrt(idio_var) * z + drift - 0.5 * bar_var
    close = start_price * np.exp(np.cumsum(log_return, axis=1))
    prev_close = np.hstack([start_price, close[:, :-1]])

    bar_sigma = np.sqrt(bar_var)
    shape = (n_assets, n_bars)
    open_ = prev_close * np.exp(_draws(seed, "open").normal(0.0, 0.03, shape) * bar_sigma)
    high = np.maximum(open_, close) * np.exp(_draws(seed, "high").exponential(0.45, shape) * bar_sigma)
    low = np.minimum(open_, close) * np.exp(-_draws(seed, "low").exponential(0.45, shape) * bar_sigma)
    # Volume: dollar volume / price, lognormal noise, more on moves large for the bar's volatility.
    volume = (bar_dollar_volume / close * np.exp(_draws(seed, "volume").normal(-0.5 * 0.35 ** 2, 0.35, shape))
              * (1.0 + 1.5 * np.abs(log_return) / bar_sigma) / 2.2)

    index = pd.date_range(START, periods=n_bars, freq=step, name="timestamp")
    kind = "planted idiosyncratic momentum" if planted else "noise twin, drift shuffled in time"
    generator = (f"{GENERATOR}; {kind}, drift x{signal:g}, half-life {DRIFT_HALF_LIFE_BARS} bars; seed {int(seed)}")
    universe: dict[str, pd.DataFrame] = {}
    for i, symbol in enumerate(universe_symbols(n_assets)):
        bars = pd.DataFrame({"open": open_[i], "high": high[i], "low": low[i], "close": close[i],
                             "volume": volume[i]}, index=index)
        # The coins share one index: its spacing and gaps (the timeframe's checks) are checked with the first.
        bars = validate_bars(bars, source=f"SYNTHETIC {symbol} {timeframe}", timeframe=None if i else timeframe)
        bars.attrs = {"symbol": symbol, "timeframe": timeframe, "synthetic": True, "generator": generator}
        universe[symbol] = bars
    return universe
