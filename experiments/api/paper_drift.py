"""Paper trading's drift alarm: the band is the model's own backtest, replayed on its test window (`test_start` ..
`test_end` on the version), as the 5th..95th percentiles of its rolling Sharpe and turnover. When paper trading's
rolling values leave that band, the session raises an alarm (a metric, a tag and an event).

Only the market's equity and traded notional are read (envs.ability_types.PaperMarket), so any family that paper-trades
gets the same alarm.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd


@dataclass
class DriftBand:
    """The 5th..95th percentiles of the backtest's rolling (annualized) Sharpe and turnover over `bars` bars."""

    bars: int
    periods_per_year: float
    sharpe: tuple[float, float]
    turnover: tuple[float, float]
    seen: deque = field(default_factory=deque)  # (log return, traded notional) of the last `bars` paper bars
    drifting: bool = False  # the alarm is raised when the rolling values leave the band, not at every bar outside

    def check(self, log_return: float, traded: float) -> tuple[float, float, str, bool]:
        """The rolling Sharpe and turnover after this bar (as `rolling_stats` computes them for the band), why they
        are outside the band ("" inside), and whether they just left it."""
        self.seen.append((log_return, traded))
        if len(self.seen) > self.bars:
            self.seen.popleft()
        if len(self.seen) < self.bars:
            return float("nan"), float("nan"), "", False
        window = np.asarray(self.seen)
        std = float(window[:, 0].std())
        sharpe = float(window[:, 0].mean()) / std * np.sqrt(self.periods_per_year) if std > 0 else 0.0
        turnover = float(window[:, 1].sum())
        out = [f"{what} {value:.2f} outside {low:.2f}..{high:.2f}" for what, value, (low, high) in
               (("Sharpe", sharpe, self.sharpe), ("turnover", turnover, self.turnover)) if not low <= value <= high]
        entered, self.drifting = bool(out) and not self.drifting, bool(out)
        return sharpe, turnover, "; ".join(out), entered


def rolling_stats(rows: np.ndarray, window: int, periods_per_year: float) -> tuple[np.ndarray, np.ndarray]:
    """Per `window` bars: the annualized Sharpe of the log returns and the traded notional (in starting equities)."""
    frame = pd.DataFrame(rows, columns=["r", "traded"])
    rolling = frame["r"].rolling(window)
    std = rolling.std(ddof=0).replace(0.0, np.nan)
    sharpe = (rolling.mean() / std).fillna(0.0) * np.sqrt(periods_per_year)
    return sharpe.to_numpy()[window - 1:], frame["traded"].rolling(window).sum().to_numpy()[window - 1:]


def drift_band(market: Any, data: Any, tags: dict[str, str], bars_needed: int, bars: int,
               ask: Callable[[pd.DataFrame], pd.DataFrame]) -> DriftBand | str:
    """The band of the model's backtest on its test window of `data` (its version's `tags`), or why there is none
    (the bars do not hold that window with 2 x `bars` bars)."""
    index = market.index(data)
    lo, hi = (int(index.searchsorted(pd.Timestamp(tags.get(key, "NaT")))) for key in ("test_start", "test_end"))
    if not tags.get("test_start") or hi - lo < 2 * bars or lo < bars_needed:
        return (f"drift alarm off: {market.label} does not hold the model's test window ({tags.get('test_start')} .. "
                f"{tags.get('test_end')}) with {2 * bars} bars or more")
    book, traded = market.new_book(), []
    equity = market.replay(book, data, range(lo, hi + 1), ask, lambda _s, _o: traded.append(market.traded(book)))
    rows = np.column_stack([np.r_[0.0, np.diff(np.log(equity))], np.r_[0.0, np.diff(traded)]])
    per_year = market.periods_per_year(data)  # as the backtest annualized
    sharpe, turnover = rolling_stats(rows, bars, per_year)
    return DriftBand(bars, per_year, tuple(np.percentile(sharpe, [5, 95])), tuple(np.percentile(turnover, [5, 95])))
