"""SYNTHETIC markets: deterministic, valid bars with fat tails, volatility clustering and regimes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from envs.trading.backtest import evaluate_policy
from envs.trading.data import TIMEFRAMES, find_gaps, timeframe_delta, validate_bars
from envs.trading.env import SpotTradingEnv
from envs.trading.synthetic import REGIMES, _regime_path, seeded_rng, symbol_profile, synthetic_bars

N = 20_000


def regime_labels(symbol: str, timeframe: str, n_bars: int, seed: int) -> np.ndarray:
    """The regime name of every bar `synthetic_bars` generated for the same arguments."""
    rng = seeded_rng(symbol, seed)
    return np.asarray(REGIMES)[_regime_path(rng, n_bars, timeframe_delta(timeframe) / pd.Timedelta(days=1))]


@pytest.fixture(scope="module")
def btc() -> pd.DataFrame:
    return synthetic_bars("BTC-USD", "1h", N, seed=0)


def log_returns(bars: pd.DataFrame) -> np.ndarray:
    return np.diff(np.log(bars["close"].to_numpy()))


def autocorrelation(x: np.ndarray, lag: int = 1) -> float:
    return float(np.corrcoef(x[:-lag], x[lag:])[0, 1])


def test_deterministic_per_symbol_and_seed(btc):
    again = synthetic_bars("BTC-USD", "1h", N, seed=0)
    pd.testing.assert_frame_equal(btc, again)
    assert btc.attrs == again.attrs


def test_differs_across_symbols_and_seeds(btc):
    other_seed = synthetic_bars("BTC-USD", "1h", N, seed=1)
    other_symbol = synthetic_bars("ETH-USD", "1h", N, seed=0)
    assert not np.allclose(log_returns(btc), log_returns(other_seed))
    assert not np.allclose(log_returns(btc), log_returns(other_symbol))
    # Per-symbol profiles: BTC trades in the tens of thousands, DOGE in cents.
    assert btc["close"].iloc[0] > 5_000
    assert synthetic_bars("DOGE-USD", "1h", 500, seed=0)["close"].iloc[0] < 1.0


@pytest.mark.parametrize("timeframe", list(TIMEFRAMES))
def test_valid_bars_on_every_timeframe(timeframe):
    bars = synthetic_bars("SOL-USD", timeframe, 3_000, seed=3)
    validate_bars(bars, source="test", timeframe=timeframe)
    assert isinstance(bars.index, pd.DatetimeIndex) and str(bars.index.tz) == "UTC"
    assert bars.index.name == "timestamp"
    assert list(bars.columns) == ["open", "high", "low", "close", "volume"]
    assert all(bars[c].dtype == np.float64 for c in bars.columns)
    assert find_gaps(bars.index, timeframe).missing_bars == 0
    assert (bars.index[1:] - bars.index[:-1] == timeframe_delta(timeframe)).all()
    assert bars.attrs["synthetic"] is True
    assert bars.attrs["symbol"] == "SOL-USD" and bars.attrs["timeframe"] == timeframe
    assert bars.attrs["generator"]


def test_per_bar_volatility_scales_with_sqrt_bar_length():
    hourly = log_returns(synthetic_bars("ETH-USD", "1h", N, seed=0)).std()
    daily = log_returns(synthetic_bars("ETH-USD", "1d", N, seed=0)).std()
    assert 0.6 * np.sqrt(24) < daily / hourly < 1.6 * np.sqrt(24)
    # Annualized close to the profile's volatility (regimes and GARCH move it a little).
    annual = hourly * np.sqrt(24 * 365)
    assert 0.5 * symbol_profile("ETH-USD").annual_vol < annual < 2.0 * symbol_profile("ETH-USD").annual_vol


def test_fat_tails(btc):
    assert pd.Series(log_returns(btc)).kurt() > 1.0  # excess kurtosis; a normal has 0


def test_volatility_clustering(btc):
    r = log_returns(btc)
    assert autocorrelation(np.abs(r)) > 0.1
    assert autocorrelation(r ** 2) > 0.05
    # ... while returns themselves are nearly uncorrelated.
    assert abs(autocorrelation(r)) < 0.05


def test_regimes_present_and_persistent(btc):
    labels = regime_labels("BTC-USD", "1h", N, seed=0)
    assert set(labels) == set(REGIMES)
    switches = int((labels[1:] != labels[:-1]).sum())
    assert 5 < switches < N / 100  # regimes last weeks, not bars
    r = log_returns(btc)
    by_regime = {name: r[labels[1:] == name] for name in REGIMES}
    assert by_regime["bear"].std() > 1.3 * by_regime["sideways"].std()
    # Drifts are small next to hourly noise: check their signs on daily bars (many regime spells).
    daily = synthetic_bars("BTC-USD", "1d", N, seed=0)
    labels = regime_labels("BTC-USD", "1d", N, seed=0)
    r = log_returns(daily)
    assert r[labels[1:] == "bull"].mean() > 0 > r[labels[1:] == "bear"].mean()


def test_volume_rises_with_absolute_returns(btc):
    r = log_returns(btc)
    assert np.corrcoef(np.abs(r), btc["volume"].to_numpy()[1:])[0, 1] > 0.2


def test_high_low_range_is_plausible(btc):
    spread = ((btc["high"] - btc["low"]) / btc["close"]).to_numpy()
    assert (spread > 0).all()
    body = (np.abs(btc["close"] - btc["open"]) / btc["close"]).to_numpy()
    assert spread.mean() > body.mean()


def test_unknown_symbols_get_a_stable_profile():
    assert symbol_profile("ZZZ-USD") == symbol_profile("ZZZ-USD")
    assert symbol_profile("ZZZ-USD") != symbol_profile("QQQ-USD")
    assert symbol_profile("BTC-USD") == symbol_profile("BTC/USDT")


def test_twenty_thousand_bars_on_every_timeframe():
    for timeframe in TIMEFRAMES:
        assert len(synthetic_bars("APT-USD", timeframe, N, seed=7)) == N


def test_env_and_backtest_say_synthetic():
    config = {"source": "synthetic", "symbol": "LINK-USD", "timeframe": "1h", "synthetic_bars": 2_000,
              "window": 8, "episode_length": 50}
    assert SpotTradingEnv(config).market.synthetic is True
    report = evaluate_policy(lambda obs: np.zeros(len(obs), dtype=np.int64), config)
    assert report.title.startswith("SYNTHETIC LINK-USD 1h test period")
    assert any("SYNTHETIC" in note for note in report.notes)


def test_real_data_title_has_no_synthetic_label(bars_file):
    config = {"data_path": str(bars_file), "window": 8, "episode_length": 50, "split_fractions": [0.6, 0.2, 0.2]}
    assert SpotTradingEnv(config).market.synthetic is False
    report = evaluate_policy(lambda obs: np.zeros(len(obs), dtype=np.int64), config)
    assert "SYNTHETIC" not in report.title and not report.notes
