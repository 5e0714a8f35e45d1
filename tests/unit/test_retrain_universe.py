"""What a retrain of a universe reads (envs.portfolio.retrain_data), without Ray or MLflow: every file through the
files' common end, said in one line; the challenger's files cut at one calendar time; the forward window on the
newest calendar rows after the champion's data, refused in one line when too few are fresh; and a forward test that
replays a served model and the baselines exactly as their backtest does on the same rows.
tests/integration/test_universe_retrain_loop.py runs the command end to end."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from envs import ENVIRONMENTS
from envs.abilities import Retrains
from envs.errors import InputError
from envs.portfolio.backtest import evaluate_policy
from envs.portfolio.env import PortfolioEnv
from envs.portfolio.universe import load_universe
from envs.portfolio.universe_reader import UniverseReader
from envs.trading.data import load_bars, save_bars
from experiments.storage.filesystem import resolve_storage
from tests.conftest import REPO

PORTFOLIO = ENVIRONMENTS["trading/Portfolio-v0"]
BITFINEX = REPO / "data" / "raw" / "bitfinex"
BARS = 3000
SHORT = 7  # ETH-USD's file ends this many bars before the others: it was not updated yet
COMMON = {"window": 6, "decision_interval": 24, "fee_bps": 10.0, "slippage_bps": 5.0}


@pytest.fixture(scope="module")
def universe(tmp_path_factory) -> SimpleNamespace:
    """Three coins' first 3,000 hourly bars in files of their own, ETH-USD's ending 7 bars early; the retrain data
    of an env_config that names them."""
    folder = tmp_path_factory.mktemp("universe")
    paths = []
    for coin in ("BTC", "ETH", "LTC"):
        bars = load_bars(BITFINEX / f"{coin}-USD_1h.parquet").iloc[:BARS - (SHORT if coin == "ETH" else 0)]
        paths.append(str(save_bars(bars, folder / f"{coin}-USD_1h.parquet", f"{coin}-USD", "1h")))
    env_config = {**COMMON, "data_paths": paths}
    return SimpleNamespace(paths=paths, env_config=env_config, folder=folder,
                           data=PORTFOLIO.retrain_data(env_config, "universe.yaml"))


def test_both_trading_families_retrain_and_the_others_do_not():
    assert {env_id for env_id, family in ENVIRONMENTS.items() if isinstance(family, Retrains)} == {
        "trading/Spot-v0", "trading/Portfolio-v0"}


def test_files_that_end_at_different_times_are_read_through_their_common_end_said_in_one_line(universe):
    data = universe.data
    eth = load_bars(universe.paths[1])
    assert data.index[-1] == eth.index[-1] < load_bars(universe.paths[0]).index[-1]
    assert len(data.index) == BARS - SHORT  # the three coins share their hourly calendar from the first bar
    [note] = data.notes
    assert "\n" not in note and note.startswith("environment.env_config.data_paths: the files end at different times")
    assert f"({universe.paths[1]} at {eth.index[-1]}, 2 of 3 later" in note
    assert f"the retrain reads every file through {eth.index[-1]}, their common end" in note


def test_files_that_end_together_are_read_whole_and_say_nothing(universe):
    data = PORTFOLIO.retrain_data({**universe.env_config, "data_paths": universe.paths[::2]}, "universe.yaml")
    assert data.notes == () and len(data.index) == BARS


def test_the_challengers_files_are_every_file_cut_at_one_calendar_time(universe, tmp_path):
    data, stop = universe.data, len(universe.data.index) - 240
    storage = resolve_storage(None, None, tmp_path, "test")
    cut = data.cut(stop, storage, ("u", "retrain"), tmp_path / "retrain")
    assert list(cut) == ["data_paths"] and len(cut["data_paths"]) == 3
    last = data.index[stop - 1]
    assert [load_bars(path).index[-1] for path in cut["data_paths"]] == [last] * 3
    assert load_universe(cut["data_paths"], None, None, None).timestamps.equals(data.index[:stop])
    # The refit's copy: every file through the common end, BTC-USD's and LTC-USD's 7 newer bars left out
    whole = data.cut(len(data.index), storage, ("u", "retrain"), tmp_path / "retrain")["data_paths"]
    assert [len(load_bars(path)) for path in whole] == [BARS - SHORT] * 3
    assert data.current == {"data_paths": universe.paths}


def test_the_forward_window_is_the_newest_rows_after_the_champions_data(universe):
    data, n = universe.data, len(universe.data.index)
    assert data.forward_rows(240, None) == range(n - 240, n)
    assert data.forward_rows(240, {"data_end": str(data.index[-241])}) == range(n - 240, n)


@pytest.mark.parametrize("tags, says", [
    ({"forward_end": "END"}, "the forward test needs 240 bars after the champion's data ended (END, the end of the "
                             "window it was promoted on); the data has 100: append bars with python -m "
                             "experiments.data update --universe universe.yaml --from TABLE (or --fetch EXCHANGE; "
                             "or update PATH --from FILE for each of its 3 files), or lower retrain.forward_bars"),
    ({"data_end": "END"}, "(END, the end of its data); the data has 100"),
])
def test_too_few_fresh_rows_for_the_forward_window_are_refused_in_one_line(universe, tags, says):
    data = universe.data
    end = data.index[-101]
    with pytest.raises(InputError) as caught:
        data.forward_rows(240, {key: str(end) for key in tags})
    message = str(caught.value)
    assert message.startswith("environment.env_config.data_paths (3 files, on their calendar): ")
    assert "\n" not in message
    assert says.replace("END", str(end)) in message


def test_a_calendar_too_short_for_the_forward_window_is_refused_in_one_line(universe):
    with pytest.raises(InputError, match=r"\(3 files, on their calendar\): 2993 bars cannot hold a forward window of "
                                         r"retrain.forward_bars 2993 and data to train on"):
        universe.data.forward_rows(2993, None)


def test_a_file_that_starts_after_the_common_end_is_refused_in_one_line(universe, tmp_path):
    late = save_bars(load_bars(BITFINEX / "XRP-USD_1h.parquet").iloc[BARS:BARS + 500], tmp_path / "XRP-USD_1h.parquet",
                     "XRP-USD", "1h")
    with pytest.raises(InputError) as caught:
        PORTFOLIO.retrain_data({**universe.env_config, "data_paths": [*universe.paths, str(late)]}, "universe.yaml")
    assert str(caught.value).startswith(f"{late}: its first bar (2018-02-03 00:00:00+00:00) comes after ")
    assert f"where {universe.paths[1]} ends: read through their common end, the universe would lack" in str(
        caught.value)


@pytest.mark.parametrize("env_config, says", [
    ({"source": "synthetic"}, "this experiment reads a synthetic universe"),
    ({"table_path": "closes.csv"}, "this experiment reads a wide table (table_path)"),
])
def test_a_universe_without_one_file_per_asset_is_refused_in_one_line(env_config, says):
    with pytest.raises(InputError) as caught:
        PORTFOLIO.retrain_data({**COMMON, **env_config}, "universe.yaml")
    assert str(caught.value).startswith("universe.yaml: environment.env_config.data_paths: a retrain appends to one "
                                        "bars file per asset") and says in str(caught.value)


def test_a_refits_universe_names_only_the_part_it_trains_on(universe):
    """The plan, the run's MLflow datasets and the registered reader of a refit (protocol type refit: nothing held
    out) name its fold's train part and no empty one."""
    refit = {**universe.env_config, "data_paths": universe.paths[::2], "protocol": {"type": "refit"}}
    assert PortfolioEnv(refit).split_periods() == {"train": ("2017-10-05", "2018-02-02")}  # after the warm-up
    [train] = PORTFOLIO.data_parts(refit)
    assert (train.part, train.rows) == ("train", BARS)
    reader = UniverseReader.for_env_config(refit)
    assert (reader.data_end, reader.test_start, reader.test_end) == ("2018-02-02T23:00:00+00:00", "", "")


def policy(obs: np.ndarray) -> np.ndarray:
    """Scores from each asset's last log return and its held weight (so costs and holdings matter), cash 0.2."""
    return np.concatenate([[0.2], np.tanh(3.0 * obs[0, :, -8] - obs[0, :, -2])])[None]


class Served:
    """What the retrain loads of a registered model (an MLflow pyfunc model): `predict` and its reader."""

    def __init__(self, reader: UniverseReader) -> None:
        self.reader = reader

    def predict(self, frame):
        return self.reader.decide(frame, policy)

    def unwrap_python_model(self) -> SimpleNamespace:
        return SimpleNamespace(inputs=self.reader)


def test_the_forward_test_replays_the_served_model_and_the_baselines_as_their_backtest_on_those_rows(universe,
                                                                                                    tmp_path):
    """A model whose reader was fitted on the rows before the window is replayed over the window through its served
    code; its returns, and every baseline's, are the backtest's on the same rows to the last digit."""
    data, forward = universe.data, 240
    storage = resolve_storage(None, None, tmp_path, "test")
    whole = data.cut(len(data.index), storage, ("u",), tmp_path / "whole")
    backtest_config = {**universe.env_config, **whole, "protocol": {"type": "refit", "test_size": forward}}
    reader = UniverseReader.for_env_config(backtest_config)
    report = data.forward_test({"challenger": Served(reader)}, data.forward_rows(forward, None), tmp_path / "whole")
    backtest = evaluate_policy(policy, backtest_config)
    assert report.start == data.index[-forward] and report.window.endswith(f"({forward} bars)")
    assert list(report.table.index) == ["challenger", *backtest.returns.columns[1:]]
    assert np.array_equal(report.returns["challenger"].to_numpy(), backtest.returns["agent"].to_numpy())
    for baseline in backtest.returns.columns[1:]:
        assert np.array_equal(report.returns[baseline].to_numpy(), backtest.returns[baseline].to_numpy()), baseline
    assert report.table.loc["challenger", "trades"] == backtest.table.loc["agent", "trades"] > 0


def test_the_forward_test_writes_the_refits_files_once_and_reads_them_once(universe, tmp_path, monkeypatch):
    """The forward test writes the whole files under the retrain's folder, where the refit's cut finds them (it
    writes nothing), and each model's paper book trades the universe the backtest's env read (no file read again
    per model)."""
    import envs.portfolio.universe_files as universe_files
    import envs.trading.data as trading_data

    data, local = universe.data, tmp_path / "retrain"
    storage = resolve_storage(None, None, tmp_path, "test")
    cut = data.cut(len(data.index) - 240, storage, ("u",), tmp_path / "cut")
    reader = UniverseReader.for_env_config({**universe.env_config, **cut, "protocol": {"type": "refit"}})
    written, read = [], []
    save, load = trading_data.save_bars, universe_files.file_asset
    monkeypatch.setattr(trading_data, "save_bars", lambda *a, **k: written.append(a[1]) or save(*a, **k))
    monkeypatch.setattr(universe_files, "file_asset", lambda path: read.append(path) or load(path))
    data.forward_test({"challenger": Served(reader), "champion": Served(reader)}, data.forward_rows(240, None), local)
    assert len(written) == len(universe.paths) and read == []
    whole = data.cut(len(data.index), storage, ("u",), local)
    assert len(written) == len(universe.paths)  # the refit's cut reused the forward test's files
    assert sorted(Path(path).name for path in whole["data_paths"]) == sorted(path.name for path in local.iterdir())
