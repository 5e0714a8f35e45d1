"""`portfolio_env`: env steps/s of trading/Portfolio-v0 vs FinRL 0.3.7's StockPortfolioEnv on the same daily closes.

Rows: N = 20 and N = 500 assets of the SYNTHETIC noise universe (`envs.trading.synthetic_universe`,
planted=False, 1d bars); the target is 10x the peer's steps/s at each N.

Same closes, same rows: the universe is written as a close-only wide table (`date, SYM:close, ...`) that the
platform's env reads, and the peer's dataframe takes its closes from the universe the platform loaded, so both price
the same numbers. Both walk the platform's validation part (a one-fold walk_forward protocol after 300 rows of
history), one decision per bar, on the same pre-drawn seeded random scores (the peer gets the N asset scores mapped
onto its Box(0, 1)). Steps/s count whole episodes with the resets outside the clock on both sides, at least one
episode and at least a second of stepping per sample, best of 3 interleaved samples (every sample in the JSON).

What differs, in the platform's disfavour unless said:
- the peer charges no costs and holds no cash (`env_portfolio.py`, `StockPortfolioEnv.step`): it softmaxes the N
  scores into weights over the assets only, its return is sum(w * (close[t+1] / close[t] - 1)) and its reward the
  portfolio value; `transaction_cost_pct`, `reward_scaling` and `hmax` are stored and never read. The platform
  softmaxes N+1 scores over cash and the tradable assets, fills them at the next bar's open paying fee + slippage
  (12 bps) on every traded notional by the self-financing equation, and rewards the log change of equity.
- observations: the peer's is (N + K) x N: the N x N covariance of the last 252 daily returns (one matrix per day,
  precomputed in its dataframe as FinRL's tutorials do) above K indicator rows, here the platform's own K = 5
  features at the bar (the same numbers). The platform's is N x (24 x 5 + 2): each asset's last 24 bars of the 5
  features, its weight and whether it can trade. At N = 20 the platform returns 5x more floats, at N = 500 4x fewer.
- the peer's step reads `len(df.index.unique())` of its whole dataframe and `df.loc[day]` every call, and its last
  step of an episode saves two PNG plots into `results/` and prints a summary (run here in a temporary folder,
  print captured): the rows "last step left out" drop each episode's last step on both sides.
The peer's covariances are 8 N^2 bytes a day (2 MB at N = 500), so its days are capped at 2 GB of them (1,000 days
at N = 500); the platform walks the same days.
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd

from experiments.benchmark.common import BENCH_EXTRA, Budget, Figure, PeerMissing, Report, timed

ASSETS = (20, 500)
QUICK_ASSETS = (4, 8)  # --quick: the whole path on universes small enough for a unit test
WINDOW = 24
HISTORY_ROWS = 300  # before the walk: the platform's feature warm-up and train statistics, the peer's first lookback
TEST_ROWS = WINDOW  # the protocol's test part, never walked (the protocol wants one window of rows)
COV_LOOKBACK = 252  # a year of daily returns, as in FinRL's portfolio-allocation tutorial
COV_BYTES = 2_000_000_000  # the peer's covariance column at most: 1,000 days at N = 500
REPEATS = 3
MIN_SECONDS = 1.0  # of stepping per sample: the platform's 1,000-step episode at N = 20 takes ~0.1 s
TARGET = 10.0
PEER_FILE = Path("meta", "env_portfolio_allocation", "env_portfolio.py")
PEER_TERMS = ("the peer charges no costs and holds no cash: it softmaxes the N scores into asset weights summing to "
              "1, returns sum(w * close change) and rewards the portfolio value (transaction_cost_pct and "
              "reward_scaling are never read); the platform pays fee + slippage (12 bps) on each rebalance from N+1 "
              "scores with cash first. ")


def peer_module() -> ModuleType:
    """FinRL's `env_portfolio` module loaded from its file: `import finrl` runs its package `__init__`, which imports
    the data processors (alpaca-trade-api, wrds, yfinance) that the env never uses and the bench extra does not
    install. The module itself needs gymnasium, matplotlib, numpy, pandas and stable-baselines3."""
    spec = importlib.util.find_spec("finrl")
    if spec is None or not spec.submodule_search_locations:
        raise PeerMissing(f"finrl is not installed: {BENCH_EXTRA}")
    path = Path(spec.submodule_search_locations[0]) / PEER_FILE
    module_spec = importlib.util.spec_from_file_location("finrl_env_portfolio", path)
    if module_spec is None or module_spec.loader is None:
        raise PeerMissing(f"{path}: not in this finrl ({BENCH_EXTRA} installs finrl 0.3.7)")
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except ImportError as missing:
        raise PeerMissing(f"FinRL's env_portfolio needs {missing.name}: {BENCH_EXTRA}") from None
    return module


def write_table(n_assets: int, n_bars: int, seed: int, path: Path) -> Path:
    """The synthetic universe's daily closes as the close-only wide table the platform reads."""
    from envs.trading.synthetic_universe import synthetic_universe

    frames = synthetic_universe(n_assets, "1d", n_bars, seed, planted=False)
    table = pd.DataFrame({f"{symbol}:close": frame["close"] for symbol, frame in frames.items()})
    table.index = table.index.strftime("%Y-%m-%d")
    table.rename_axis("date").to_csv(path)
    return path


def platform_config(table: Path, days: int) -> dict[str, Any]:
    """The env_config that walks `days` rows (the validation part) after HISTORY_ROWS, deciding at every bar."""
    return {"table_path": str(table), "timeframe": "1d", "window": WINDOW, "decision_interval": 1,
            "split": "validation",
            "protocol": {"type": "walk_forward", "folds": 1, "validation_size": days, "test_size": TEST_ROWS}}


def rolling_covariances(returns: np.ndarray, first: int, count: int, lookback: int) -> np.ndarray:
    """An object array of `count` matrices: the sample covariance (ddof 1, as pandas' `DataFrame.cov`) of
    `returns[d - lookback:d]` for d = first .. first + count - 1. Rolling sums, updated in place: np.cov per day
    takes ~33 s for 1,000 days at N = 500 on this machine, this ~4 s (it is setup, outside the clock)."""
    window = returns[first - lookback:first]
    total, products = window.sum(axis=0), window.T @ window
    scratch = np.empty_like(products)
    out = np.empty(count, dtype=object)
    for i, day in enumerate(range(first, first + count)):
        if i:
            new, old = returns[day - 1], returns[day - 1 - lookback]
            total += new - old
            products += np.outer(new, new, out=scratch)
            products -= np.outer(old, old, out=scratch)
        covariance = np.outer(total, total / -lookback)
        covariance += products
        covariance /= lookback - 1
        out[i] = covariance
    return out


def peer_frame(market: Any) -> pd.DataFrame:
    """The dataframe StockPortfolioEnv reads for the platform's validation days: one row per day and asset (index =
    day number, as FinRL's tutorials build it), with date, tic, close, the day's covariance matrix (`cov_list`) and
    the platform's normalized features at the bar as the technical indicators."""
    universe = market.universe
    lo, hi = market.bounds["validation"]
    n, days = universe.n_assets, hi - lo
    closes = universe.closes
    covariances = rolling_covariances(closes[1:] / closes[:-1] - 1.0, lo, days, COV_LOOKBACK)
    frame = pd.DataFrame({"date": np.repeat(universe.timestamps[lo:hi].strftime("%Y-%m-%d").to_numpy(), n),
                          "tic": np.tile(np.array(universe.symbols), days),
                          "close": closes[lo:hi].reshape(-1),
                          "cov_list": np.repeat(covariances, n)})
    for k, name in enumerate(market.feature_names):
        frame[name] = market.features[:, lo:hi, k].T.reshape(-1)
    frame.index = np.repeat(np.arange(days), n)
    return frame


def peer_env(module: ModuleType, frame: pd.DataFrame, n_assets: int, indicators: tuple[str, ...]) -> Any:
    """StockPortfolioEnv on `frame` with the values of FinRL's portfolio-allocation tutorial (hmax,
    transaction_cost_pct and reward_scaling are stored and never read)."""
    return module.StockPortfolioEnv(df=frame, stock_dim=n_assets, hmax=100, initial_amount=1_000_000,
                                    transaction_cost_pct=0.001, reward_scaling=1e-4, state_space=n_assets,
                                    action_space=n_assets, tech_indicator_list=list(indicators),
                                    lookback=COV_LOOKBACK)


def episode_rates(env: Any, actions: np.ndarray, seed: int, min_seconds: float) -> tuple[float, float]:
    """Steps/s of `env` over whole episodes (each reset outside the clock), at least one episode and until
    `min_seconds` of stepping; and the same with each episode's last step left out (where the peer plots)."""
    step = env.step
    steps = episodes = 0
    elapsed = last = 0.0
    while episodes == 0 or elapsed < min_seconds:
        env.reset(seed=seed)
        start = time.perf_counter()
        for action in actions:
            before = time.perf_counter()
            _, _, terminated, truncated, _ = step(action)
            steps += 1
            if terminated or truncated:
                break
        else:
            raise RuntimeError(f"an episode outlasted its {len(actions)} actions: the envs walk different days")
        end = time.perf_counter()
        elapsed += end - start
        last += end - before
        episodes += 1
    return steps / elapsed, (steps - episodes) / (elapsed - last)


def measure(n_assets: int, days: int, budget: Budget, module: ModuleType, folder: Path) -> dict[str, Any]:
    """Both envs on one universe of `n_assets`: setup times, shapes and every sample of both rates."""
    from envs.portfolio.config import PortfolioConfig
    from envs.portfolio.env import PortfolioEnv
    from envs.portfolio.market import load_portfolio_market

    table = write_table(n_assets, HISTORY_ROWS + days + TEST_ROWS, budget.seed, folder / "closes.csv")
    config = platform_config(table, days)
    market_s, market = timed(lambda: load_portfolio_market(PortfolioConfig.from_dict(config)))
    platform = PortfolioEnv(config, market=market)
    frame_s, frame = timed(lambda: peer_frame(market))
    peer = peer_env(module, frame, n_assets, market.feature_names)
    rng = np.random.default_rng(budget.seed)
    scores = rng.uniform(-1.0, 1.0, size=(days, n_assets + 1)).astype(np.float32)  # cash first
    peer_actions = (scores[:, 1:] + 1.0) / 2.0  # the asset scores on the peer's Box(0, 1)
    min_seconds = 0.0 if budget.quick else MIN_SECONDS
    (folder / "results").mkdir()
    samples: dict[str, list[float]] = {key: [] for key in ("platform", "peer", "platform_no_last", "peer_no_last")}
    for _ in range(1 if budget.quick else REPEATS):  # interleaved, so a burst of load hits both sides
        whole, no_last = episode_rates(platform, scores, budget.seed, min_seconds)
        samples["platform"].append(whole)
        samples["platform_no_last"].append(no_last)
        with contextlib.chdir(folder), contextlib.redirect_stdout(io.StringIO()):
            whole, no_last = episode_rates(peer, peer_actions, budget.seed, min_seconds)
        samples["peer"].append(whole)
        samples["peer_no_last"].append(no_last)
    lo, hi = market.bounds["validation"]
    return {"samples": samples, "walked_rows": [int(lo), int(hi)], "days": days, "features": list(market.feature_names),
            "platform_steps_per_episode": hi - 1 - lo, "peer_steps_per_episode": days,
            "platform_observation_shape": list(platform.observation_space.shape),
            "peer_observation_shape": list(peer.observation_space.shape),
            "peer_covariance_bytes": int(days * n_assets * n_assets * 8),
            "setup_s": {"platform_market": round(market_s, 2), "peer_dataframe": round(frame_s, 2)}}


def _figures(n_assets: int, measured: dict[str, Any]) -> list[Figure]:
    samples, features = measured["samples"], len(measured["features"])
    ours, theirs = measured["platform_observation_shape"], measured["peer_observation_shape"]
    main = Figure(f"N = {n_assets} assets, {measured['days']:,} days walked, one decision a day, env steps/s over "
                  "whole episodes", "steps/s", max(samples["platform"]), max(samples["peer"]),
                  target=f">= {TARGET:.0f}x peer",
                  note=PEER_TERMS + f"Observations: platform {ours[0]} x {ours[1]} ({WINDOW} bars x {features} "
                       f"features + weight + tradable), peer {theirs[0]} x {theirs[1]} (covariance of {COV_LOOKBACK} "
                       f"daily returns + the {features} features at the bar).")
    main.met = main.ratio is not None and main.ratio >= TARGET
    return [main, Figure(f"N = {n_assets}: same, each episode's last step left out (the peer saves 2 plots and "
                         "prints there)", "steps/s", max(samples["platform_no_last"]), max(samples["peer_no_last"]))]


def run(budget: Budget) -> Report:
    module = peer_module()
    days = max(budget.pick(full=1_000, quick=40), WINDOW)
    figures, details = [], {"statistic": "best of interleaved samples", "repeats": 1 if budget.quick else REPEATS,
                            "min_seconds_per_sample": 0.0 if budget.quick else MIN_SECONDS,
                            "universe": "envs.trading.synthetic_universe(n, '1d', bars, seed, planted=False) closes",
                            "history_rows": HISTORY_ROWS, "covariance_lookback": COV_LOOKBACK, "window": WINDOW}
    for n_assets in QUICK_ASSETS if budget.quick else ASSETS:
        with tempfile.TemporaryDirectory(prefix="portfolio-bench-") as folder:
            measured = measure(n_assets, min(days, COV_BYTES // (8 * n_assets ** 2)), budget, module, Path(folder))
        details[f"n{n_assets}"] = measured
        figures.extend(_figures(n_assets, measured))
    return Report("portfolio_env", __doc__.splitlines()[0],
                  "trading/Portfolio-v0 (envs.portfolio.env.PortfolioEnv)",
                  "FinRL 0.3.7 StockPortfolioEnv (finrl.meta.env_portfolio_allocation.env_portfolio)", figures, details)
