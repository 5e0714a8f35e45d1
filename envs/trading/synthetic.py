"""SYNTHETIC markets: seeded OHLCV bars that look like crypto, for offline runs and tests.

These bars are generated, not observed. Every frame carries `attrs["synthetic"] = True`, the
trading env records it on its `Market`, and backtest titles say SYNTHETIC, so a result on a
generated market is never mistaken for one on real data.

Model, per bar of length dt (in years):

* Markov regimes bull / bear / sideways with their own drift and volatility level; mean
  durations are in days, so the chain behaves the same on 1m and 1d bars.
* GARCH(1,1) volatility clustering: h_t = (1 - a - b) + a * h_{t-1} z_{t-1}^2 + b * h_{t-1}
  (unit unconditional mean), shocks z_t Student-t(nu) scaled to unit variance (fat tails).
* log return r_t = (mu_regime - kappa * (log p - log p0) - sigma^2 / 2) dt
  + sigma_symbol * vol_regime * sqrt(h_t dt) * z_t, with a weak pull towards the starting
  price over years so very long series stay in a plausible price range.
* open = previous close (crypto trades around the clock) with a tiny jitter; high and low
  extend max/min(open, close) by exponential draws scaled to the bar's volatility.
* volume (base units) = a per-symbol dollar volume / price, times a lognormal AR(1) factor,
  times (1 + k |z_t| sqrt(h_t)): volume rises with absolute returns and in volatile regimes.

Per-symbol profiles (start price, annual volatility, dollar volume) exist for common coins;
any other symbol gets a profile derived from a stable hash of its name. Randomness comes
from `numpy.random.default_rng` seeded by SHA-256 of (symbol, seed), never Python's hash().
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from envs.trading.data import timeframe_delta, validate_bars

GENERATOR = "rlplatform-synthetic-v1: Markov regimes + GARCH(1,1) Student-t returns, range and volume models"
START = pd.Timestamp("2020-01-01", tz="UTC")  # fictional calendar: the dates mean nothing
YEAR = pd.Timedelta(days=365)

# Regimes: annual log drift, volatility multiplier, mean duration in days.
REGIMES = ("bull", "bear", "sideways")
_DRIFT = np.array([1.2, -1.4, 0.0])
_VOL_MULT = np.array([1.0, 1.35, 0.7])
_DURATION_DAYS = np.array([60.0, 40.0, 45.0])
# Where the chain goes when it leaves a regime (rows: from, columns: to; diagonal unused).
_LEAVE = np.array([[0.0, 0.45, 0.55],
                   [0.4, 0.0, 0.6],
                   [0.55, 0.45, 0.0]])
_GARCH_ALPHA, _GARCH_BETA = 0.08, 0.90
_T_DOF = 4.5
_MEAN_REVERSION = 0.25  # per year, towards the starting log price


@dataclass(frozen=True)
class SymbolProfile:
    """What makes one synthetic coin differ from another."""

    start_price: float
    annual_vol: float
    daily_dollar_volume: float


# Rough 2023 magnitudes, for realism only; nothing here is market data.
PROFILES: dict[str, SymbolProfile] = {
    "BTC": SymbolProfile(30_000.0, 0.55, 1.5e10), "ETH": SymbolProfile(2_000.0, 0.70, 7e9),
    "SOL": SymbolProfile(25.0, 1.00, 8e8), "BNB": SymbolProfile(300.0, 0.65, 6e8),
    "XRP": SymbolProfile(0.5, 0.85, 1e9), "ADA": SymbolProfile(0.35, 0.90, 3e8),
    "DOGE": SymbolProfile(0.07, 1.00, 4e8), "AVAX": SymbolProfile(15.0, 1.05, 2.5e8),
    "DOT": SymbolProfile(5.0, 0.90, 1.5e8), "LINK": SymbolProfile(7.0, 0.95, 2.5e8),
    "MATIC": SymbolProfile(0.8, 1.00, 3e8), "LTC": SymbolProfile(80.0, 0.80, 4e8),
    "TRX": SymbolProfile(0.08, 0.60, 2e8), "ATOM": SymbolProfile(9.0, 0.90, 1.2e8),
    "XLM": SymbolProfile(0.1, 0.85, 8e7), "NEAR": SymbolProfile(1.5, 1.10, 1e8),
    "UNI": SymbolProfile(5.0, 1.00, 8e7), "ETC": SymbolProfile(18.0, 0.90, 1.5e8),
    "FIL": SymbolProfile(4.0, 1.05, 1e8), "APT": SymbolProfile(7.0, 1.15, 1.2e8),
}


def _digest(*parts: object) -> bytes:
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()


def base_asset(symbol: str) -> str:
    """BTC-USD, BTC/USDT, btcusdt -> BTC (the part before a separator, else the whole name)."""
    name = symbol.strip().upper()
    for separator in ("-", "/", "_", ":"):
        if separator in name:
            return name.split(separator, 1)[0]
    for quote in ("USDT", "USDC", "USD", "EUR", "BTC"):
        if name.endswith(quote) and len(name) > len(quote):
            return name[: -len(quote)]
    return name


def symbol_profile(symbol: str) -> SymbolProfile:
    """The coin's profile; unknown symbols get a stable one derived from the name's hash."""
    base = base_asset(symbol)
    if base in PROFILES:
        return PROFILES[base]
    u = np.frombuffer(_digest("profile", base)[:24], dtype=np.uint64) / float(2**64)
    return SymbolProfile(
        start_price=float(10 ** (-2 + 4 * u[0])),  # 0.01 .. 100
        annual_vol=float(0.6 + 0.7 * u[1]),
        daily_dollar_volume=float(10 ** (7 + 2 * u[2])),
    )


def seeded_rng(symbol: str, seed: int, kind: str = "bars") -> np.random.Generator:
    """The generator of one synthetic market (`kind` of model, symbol, seed): stable across processes."""
    return np.random.default_rng(int.from_bytes(_digest(kind, symbol.strip().upper(), int(seed))[:16], "little"))


def _regime_path(rng: np.random.Generator, n: int, bar_days: float) -> np.ndarray:
    """A Markov chain over REGIMES, sampled by durations (geometric in bars, mean in days)."""
    stay = np.exp(-bar_days / _DURATION_DAYS)  # per-bar probability of staying
    path = np.empty(n, dtype=np.int8)
    state = int(rng.integers(len(REGIMES)))
    i = 0
    while i < n:
        length = int(rng.geometric(1.0 - stay[state]))
        path[i: i + length] = state
        i += length
        state = int(rng.choice(len(REGIMES), p=_LEAVE[state]))
    return path


def _garch_variance(z: np.ndarray, h0: float) -> np.ndarray:
    """h_t (unit unconditional mean) driven by unit-variance shocks z: h_t uses z up to t-1 only."""
    h = np.empty(len(z))
    omega, a, b = 1.0 - _GARCH_ALPHA - _GARCH_BETA, _GARCH_ALPHA, _GARCH_BETA
    prev = h0
    for t, z2 in enumerate((z * z).tolist()):
        h[t] = prev
        prev = omega + (a * z2 + b) * prev
    return h


def synthetic_bars(symbol: str, timeframe: str, n_bars: int, seed: int) -> pd.DataFrame:
    """SYNTHETIC OHLCV bars for `symbol`: deterministic per (symbol, seed), validated, no gaps."""
    if n_bars < 2:
        raise ValueError(f"synthetic_bars: n_bars must be >= 2, got {n_bars}")
    step = timeframe_delta(timeframe)
    dt = step / YEAR  # bar length in years
    bar_days = step / pd.Timedelta(days=1)
    profile = symbol_profile(symbol)
    rng = seeded_rng(symbol, seed)

    regimes = _regime_path(rng, n_bars, bar_days)
    t = rng.standard_t(_T_DOF, size=n_bars) * math.sqrt((_T_DOF - 2) / _T_DOF)  # unit variance
    h = _garch_variance(t, h0=float(rng.uniform(0.5, 2.0)))
    sigma = profile.annual_vol * _VOL_MULT[regimes] * np.sqrt(h)  # annualized, per bar
    shocks = sigma * math.sqrt(dt) * t
    drift = (_DRIFT[regimes] - 0.5 * sigma ** 2) * dt

    # Cumulate log returns with a weak pull of the log price towards its start (AR(1) in levels).
    log_p0 = math.log(profile.start_price)
    pull = 1.0 - _MEAN_REVERSION * dt
    log_close = np.empty(n_bars)
    x = log_p0 + float(rng.normal(0.0, 0.3))
    increments = (drift + shocks).tolist()
    for i, inc in enumerate(increments):
        x = log_p0 + pull * (x - log_p0) + inc
        log_close[i] = x
    close = np.exp(log_close)
    prev_close = np.concatenate(([close[0] * math.exp(-increments[0])], close[:-1]))
    bar_sigma = sigma * math.sqrt(dt)
    open_ = prev_close * np.exp(rng.normal(0.0, 0.03, n_bars) * bar_sigma)
    upper = np.maximum(open_, close) * np.exp(rng.exponential(0.45, n_bars) * bar_sigma)
    lower = np.minimum(open_, close) * np.exp(-rng.exponential(0.45, n_bars) * bar_sigma)

    # Volume: dollar volume per bar / price, a persistent lognormal factor, more on big moves.
    noise = rng.normal(0.0, 0.35, n_bars)
    factor = np.empty(n_bars)
    phi, level = 0.9, 0.0
    for i, e in enumerate(noise.tolist()):
        level = phi * level + math.sqrt(1 - phi * phi) * e
        factor[i] = level
    regime_activity = np.array([1.1, 1.3, 0.8])[regimes]
    dollar = profile.daily_dollar_volume * bar_days * regime_activity * np.exp(factor - 0.5 * 0.35 ** 2)
    volume = dollar / close * (1.0 + 1.5 * np.abs(t) * np.sqrt(h)) / 2.2

    index = pd.date_range(START, periods=n_bars, freq=step, name="timestamp")
    bars = pd.DataFrame({"open": open_, "high": upper, "low": lower, "close": close, "volume": volume},
                        index=index)
    bars = validate_bars(bars, source=f"SYNTHETIC {symbol} {timeframe}", timeframe=timeframe)
    bars.attrs = {"symbol": symbol, "timeframe": timeframe, "synthetic": True,
                  "generator": f"{GENERATOR}; seed {int(seed)}"}
    return bars
