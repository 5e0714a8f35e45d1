"""A universe retrains on real Ray, Tune and MLflow (issue 53): champion and challenger on one calendar cut of every
file, the forward test on the newest rows, the gate, the aliases and the refit.

The smallest universe: two coins (the bundled Bitfinex BTC-USD and ETH-USD hourly bars, their last 4,240), each in
a file of its own with its newest 240 bars held back; conf/ppo_portfolio_crypto.yaml on a smoke budget, one fold,
one seed, a forward window of 200 bars. A first retrain (`--mode full --promote`) makes the champion (version 1).
The held-back bars then arrive with `experiments.data update`, all 240 for BTC-USD and 230 for ETH-USD (its feed is
behind), and a second retrain (incremental, `--refit`) reads both files through ETH-USD's last bar, said in one line,
trains its challenger (version 2) on both cut at one calendar time, forward-tests it against the champion on the
newest 200 rows, is not promoted (by the gate, or else by the smoke rule), and refits the champion it kept through
ETH-USD's last bar (version 3).
tests/unit/test_retrain_universe.py holds the cut, the window and the forward test without Ray.
"""
from __future__ import annotations

import subprocess
from dataclasses import dataclass, field

import pandas as pd
import pytest

from tests.conftest import REPO
from tests.integration.conftest import OperationsLoop
from tests.servers import joining

CONF = REPO / "conf" / "ppo_portfolio_crypto.yaml"
COINS = ("BTC", "ETH")
KEPT, FUTURE, BEHIND, FORWARD = 4240, 240, 10, 200  # ETH-USD's update is BEHIND bars short of BTC-USD's
RETRAIN_FOLDER = ("runs", "ppo_portfolio_crypto", "retrain")  # --output/<the experiment>/retrain


@dataclass
class UniverseLoop(OperationsLoop):
    """The loop on a universe: `updates` holds each file's `experiments.data update`."""

    updates: list[subprocess.CompletedProcess] = field(default_factory=list)


@pytest.fixture(scope="module")
def universe_loop(tmp_path_factory, ray_cluster) -> UniverseLoop:
    """`first`: the retrain that makes the champion; `updates`: the held-back bars appended to each file; `second`:
    the incremental retrain with --refit. Both retrains join the session's Ray."""
    from envs.trading.data import load_bars, save_bars

    root = tmp_path_factory.mktemp("universe")
    paths, futures = [], []
    for coin in COINS:
        bars = load_bars(REPO / "data" / "raw" / "bitfinex" / f"{coin}-USD_1h.parquet").iloc[-KEPT:]
        paths.append(save_bars(bars.iloc[:-FUTURE], root / f"{coin}-USD_1h.parquet", f"{coin}-USD", "1h"))
        arriving = bars.iloc[-FUTURE:] if coin != "ETH" else bars.iloc[-FUTURE:-BEHIND]
        futures.append(save_bars(arriving, root / f"{coin}-USD_new.parquet", f"{coin}-USD", "1h"))
    loop = UniverseLoop(root, f"sqlite:///{root / 'mlflow.db'}", root, *([None] * 4),
                        model="ppo_portfolio_crypto-smoke")
    retrain = ["experiments.retrain", CONF, "--smoke-test", "--no-dashboard", "--output", root / "runs",
               "--set", f"environment.env_config.data_paths=[{', '.join(map(str, paths))}]",
               "--set", "evaluation.protocol.folds=1", "--set", "tune.seeds=[0]",
               "--set", f"retrain.forward_bars={FORWARD}"]
    with joining(ray_cluster) as joined:
        loop.first = loop.call(*retrain, "--mode", "full", "--promote", *joined)
    loop.updates = [loop.call("experiments.data", "update", path, "--from", future)
                    for path, future in zip(paths, futures, strict=True)]
    with joining(ray_cluster) as joined:
        loop.second = loop.call(*retrain, "--refit", *joined)
    return loop


def calendar(root) -> pd.DatetimeIndex:
    """The calendar of both coins' files as they are now (after the updates)."""
    from envs.portfolio.universe import load_universe

    return load_universe([str(root / f"{coin}-USD_1h.parquet") for coin in COINS], None, None, None).timestamps


def last_bar(root, coin: str) -> pd.Timestamp:
    from envs.trading.data import load_bars

    return load_bars(root / f"{coin}-USD_1h.parquet").index[-1]


def cut_files(root, last: pd.Timestamp) -> list:
    """The copies of both files a retrain cut through `last`, each checked to end there."""
    from envs.trading.data import load_bars

    files = [root.joinpath(*RETRAIN_FOLDER, f"{coin}-USD_1h_to_{last:%Y%m%dT%H%M}.parquet") for coin in COINS]
    return [load_bars(path).index[-1] for path in files]


def test_the_first_retrain_makes_a_champion_on_both_files_cut_at_one_calendar_time(universe_loop):
    from envs.trading.data import load_bars

    loop = universe_loop
    out = loop.first.stdout
    assert loop.first.returncode == 0, out[-3000:] + loop.first.stderr[-3000:]
    assert "the files end at different times" not in out  # both held back the same 240 bars
    assert "models:/ppo_portfolio_crypto-smoke/1 -> @champion: first champion, forced with --promote" in out
    champion = loop.client.get_model_version(loop.model, "1")
    trained = KEPT - FUTURE - FORWARD  # calendar rows before the forward window
    start = load_bars(REPO / "data" / "raw" / "bitfinex" / "BTC-USD_1h.parquet").index[-KEPT]
    assert pd.Timestamp(champion.tags["data_end"]) == start + pd.Timedelta(hours=trained - 1)
    assert pd.Timestamp(champion.tags["forward_start"]) == start + pd.Timedelta(hours=trained)
    last = start + pd.Timedelta(hours=trained - 1)
    assert cut_files(loop.root, last) == [last, last]  # the challenger's files, cut at one calendar time


def test_the_second_retrain_reads_every_file_through_their_common_end_and_is_judged_on_the_newest_rows(
        universe_loop):
    loop = universe_loop
    btc, eth = loop.updates
    assert btc.returncode == 0 and f"appended {FUTURE} 1h bars" in btc.stdout, btc.stdout + btc.stderr
    assert eth.returncode == 0 and f"appended {FUTURE - BEHIND} 1h bars" in eth.stdout, eth.stdout + eth.stderr
    out = loop.second.stdout
    assert loop.second.returncode == 0, out[-3000:] + loop.second.stderr[-3000:]
    eth_end = last_bar(loop.root, "ETH")
    [note] = [line for line in out.splitlines() if "the files end at different times" in line]
    assert f"the retrain reads every file through {eth_end}, their common end" in note
    assert "warm start from models:/ppo_portfolio_crypto-smoke/1's checkpoint" in out
    assert "forward test" in out and "ucrp" in out and "min_variance" in out
    challenger = loop.client.get_model_version(loop.model, "2")
    tags = challenger.tags
    assert tags["parent_version"] == "1" and tags["retrain/mode"] == "incremental"
    assert pd.Timestamp(tags["forward_end"]) == eth_end
    assert pd.Timestamp(tags["forward_start"]) == eth_end - pd.Timedelta(hours=FORWARD - 1)
    assert pd.Timestamp(tags["data_end"]) == eth_end - pd.Timedelta(hours=FORWARD)
    last = eth_end - pd.Timedelta(hours=FORWARD)
    assert cut_files(loop.root, last) == [last, last]  # BTC-USD's newer bars are not the challenger's
    assert "models:/ppo_portfolio_crypto-smoke/2 -> @challenger: not promoted: " in out  # the gate, or the smoke rule
    # The gate's numbers over the champion and each baseline are recorded on the version
    assert {"gate/excess_sharpe_vs_champion", "gate/excess_sharpe_vs_ucrp"} <= set(tags)


def test_the_refit_trains_the_kept_champion_through_the_common_end(universe_loop):
    loop = universe_loop
    client = loop.client
    assert client.get_registered_model(loop.model).aliases == {"champion": 1, "challenger": 2, "refit": 3}
    refit = client.get_model_version(loop.model, "3")
    eth_end = last_bar(loop.root, "ETH")
    assert refit.tags["refit_of"] == "1" and pd.Timestamp(refit.tags["refit/last_bar"]) == eth_end
    assert pd.Timestamp(refit.tags["refit/first_bar"]) == calendar(loop.root)[0]
    assert "models:/ppo_portfolio_crypto-smoke/3 -> @refit: version 1's configuration trained through" in (
        loop.second.stdout)
    assert cut_files(loop.root, eth_end) == [eth_end, eth_end]  # the refit's copy: every file through the common end
