"""SYNTHETIC canary markets: one where nothing can be predicted, one with an edge planted on purpose.

They exist to test the platform, not to look like crypto. A verdict must find no edge on the random
walk, whatever the seed, and must find the planted one: if either fails, the pipeline (fills, features,
splits, selection, statistics) is broken, not the market.

- `random_walk_bars`: i.i.d. Gaussian log returns with zero drift and constant volatility. The past
  says nothing about the next return, so after fees no strategy beats cash in expectation.
- `planted_signal_bars`: the sign of each return follows a hidden two-state Markov chain that stays
  put with probability `persistence` (default 0.9: runs of about 10 bars), and the size is a
  half-normal draw. The sign of the last return, which the agent sees as its `log_return` feature,
  predicts the next one 90% of the time: being long after an up bar and flat after a down bar earns
  far more than the fees.

Like every synthetic market these bars carry `attrs["synthetic"] = True`, and reports say SYNTHETIC.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from envs.trading.data import timeframe_delta, validate_bars
from envs.trading.synthetic import START, seeded_rng

BAR_VOLATILITY = 0.01  # 1% per bar
PERSISTENCE = 0.9


def _bars(log_returns: np.ndarray, rng: np.random.Generator, symbol: str, timeframe: str,
          generator: str) -> pd.DataFrame:
    """OHLCV bars around a close path: open = previous close, high/low a little beyond, random volume."""
    n = len(log_returns)
    close = 100.0 * np.exp(np.cumsum(log_returns))
    open_ = np.concatenate(([100.0], close[:-1]))
    spread = np.exp(rng.exponential(0.3 * BAR_VOLATILITY, (2, n)))
    bars = pd.DataFrame({"open": open_, "high": np.maximum(open_, close) * spread[0],
                         "low": np.minimum(open_, close) / spread[1], "close": close,
                         "volume": rng.lognormal(3.0, 0.5, n)},
                        index=pd.date_range(START, periods=n, freq=timeframe_delta(timeframe), name="timestamp"))
    bars = validate_bars(bars, source=f"SYNTHETIC {symbol} {timeframe}", timeframe=timeframe)
    bars.attrs = {"symbol": symbol, "timeframe": timeframe, "synthetic": True, "generator": generator}
    return bars


def random_walk_bars(symbol: str, timeframe: str, n_bars: int, seed: int) -> pd.DataFrame:
    """SYNTHETIC bars whose log returns are i.i.d. N(0, 1%): no edge exists."""
    rng = seeded_rng(symbol, seed, "random_walk")
    returns = rng.normal(0.0, BAR_VOLATILITY, n_bars)
    return _bars(returns, rng, symbol, timeframe,
                 f"random walk, i.i.d. N(0, {BAR_VOLATILITY:g}) log returns; seed {seed}")


def planted_signal_bars(symbol: str, timeframe: str, n_bars: int, seed: int,
                        persistence: float = PERSISTENCE) -> pd.DataFrame:
    """SYNTHETIC bars whose return sign persists with probability `persistence`: a learnable edge."""
    rng = seeded_rng(symbol, seed, "planted_signal")
    flips = rng.random(n_bars) > persistence
    signs = np.where(np.cumsum(flips) % 2 == 0, 1.0, -1.0)
    returns = signs * np.abs(rng.normal(0.0, BAR_VOLATILITY, n_bars))
    return _bars(returns, rng, symbol, timeframe,
                 f"planted signal: return sign persists with probability {persistence:g}; seed {seed}")
