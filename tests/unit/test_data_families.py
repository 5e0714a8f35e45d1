"""`python -m experiments.data` acts for the env family that keeps the data files (envs.abilities.UpdatesData):
`update --universe CONF` extends every bars file of a universe or refuses them all, the platform keeps a file's old
version and refuses one that changed since it was read, and the command picks its family without spelling an id."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import envs
from envs.abilities import UpdatesData
from envs.errors import InputError
from envs.families import GymFamily
from envs.trading.data import load_bars, save_bars
from experiments import data as data_cli
from experiments.api.data import data_family
from experiments.storage.dataset_versions import locate, replace_dataset
from tests.conftest import REPO, random_walk_bars

ASSETS = {"BTC": random_walk_bars(300, seed=1), "ETH": random_walk_bars(300, seed=2)}
STORED = 200


def _universe(tmp_path: Path) -> tuple[Path, dict[str, Path]]:
    """Two assets' bars files of 200 bars and an experiment file whose universe reads them."""
    files = {asset: save_bars(bars.iloc[:STORED], tmp_path / "data" / f"{asset}-USD_1h.parquet", f"{asset}-USD",
                              "1h") for asset, bars in ASSETS.items()}
    conf = tmp_path / "universe.yaml"
    conf.write_text("name: u\nalgorithm: ppo\nenvironment:\n  env: trading/Portfolio-v0\n  env_config:\n"
                    "    data_paths: [data/BTC-USD_1h.parquet, data/ETH-USD_1h.parquet]\n")
    return conf, files


def _table(tmp_path: Path, rows: slice, assets: tuple[str, ...] = ("BTC", "ETH")) -> Path:
    """The new bars of every asset as one wide CSV (ASSET:field columns), as a data vendor exports a universe."""
    table = pd.concat({asset: ASSETS[asset].iloc[rows] for asset in assets}, axis=1)
    table.columns = [f"{asset}:{field}" for asset, field in table.columns]
    path = tmp_path / "new.csv"
    table.rename_axis("timestamp").to_csv(path)
    return path


def test_update_universe_appends_to_every_file_of_the_universe(tmp_path, capsys):
    conf, files = _universe(tmp_path)
    assert data_cli.main(["update", "--universe", str(conf), "--from", str(_table(tmp_path, slice(190, 300)))]) == 0
    out = capsys.readouterr().out
    for asset, path in files.items():
        assert f"{path}:\n  appended 100 1h bars" in out
        assert load_bars(path).index.equals(ASSETS[asset].index)
        assert len(list(path.parent.glob(f"{asset}-USD_1h.*Z.parquet"))) == 1  # the previous version, kept


def test_update_universe_reads_the_table_once_for_every_file(tmp_path, capsys, monkeypatch):
    import envs.trading.csv_import as csv_import

    conf, files = _universe(tmp_path)
    read, read_text = [], csv_import.read_user_text
    monkeypatch.setattr(csv_import, "read_user_text", lambda path, *rest: read.append(path) or read_text(path, *rest))
    table = _table(tmp_path, slice(190, 300))
    assert data_cli.main(["update", "--universe", str(conf), "--from", str(table)]) == 0
    assert read == [table] and len(files) == 2


def test_update_universe_writes_no_file_unless_every_file_can_be_updated(tmp_path, capsys):
    conf, files = _universe(tmp_path)
    before = {path: path.read_bytes() for path in files.values()}
    code = data_cli.main(["update", "--universe", str(conf), "--from", str(_table(tmp_path, slice(190, 300),
                                                                                  ("BTC",)))])
    error = capsys.readouterr().err
    assert code == 2 and "no columns for ETH-USD" in error and len(error.strip().splitlines()) == 1
    assert {path: path.read_bytes() for path in files.values()} == before  # BTC's bars were fine, and not written
    assert sorted(p.name for p in files["BTC"].parent.iterdir()) == ["BTC-USD_1h.parquet", "ETH-USD_1h.parquet"]


def test_a_universe_read_from_a_wide_table_is_refused_with_how_to_replace_it(tmp_path, capsys):
    conf = tmp_path / "table.yaml"
    conf.write_text("name: t\nalgorithm: ppo\nenvironment:\n  env: trading/Portfolio-v0\n  env_config:\n"
                    f"    table_path: {REPO / 'data/portfolio/SP500-20_1d.parquet'}\n")
    assert data_cli.main(["update", "--universe", str(conf), "--fetch", "binance"]) == 2
    assert "a wide table is replaced whole: import the newer table with" in capsys.readouterr().err


def test_a_dataset_changed_since_it_was_read_is_not_overwritten(tmp_path):
    path = save_bars(random_walk_bars(50), tmp_path / "X-USD_1h.parquet", "X-USD", "1h")
    read_digest = load_bars(path).attrs["digest"]
    save_bars(random_walk_bars(60), path, "X-USD", "1h")  # another update, in between
    changed = path.read_bytes()
    with pytest.raises(InputError, match="changed while it was being updated"):
        replace_dataset(locate(str(path)), b"new", read_digest)
    assert path.read_bytes() == changed and list(tmp_path.iterdir()) == [path]
    kept = replace_dataset(locate(str(path)), b"new", load_bars(path).attrs["digest"])
    assert path.read_bytes() == b"new" and Path(kept).read_bytes() == changed


class OtherFiles(GymFamily, UpdatesData):
    """A family with data files of another kind than the trading families' bars files."""

    data_kind = "histories"

    def data_commands(self):
        return ()

    def run_data(self, request, files):
        return []

    def data_files(self, env_config, source):
        return []

    def update_request(self, paths, feed):
        return None


def test_the_command_acts_for_the_one_kind_of_data_files_or_asks_which(monkeypatch):
    bars_families = [family.env_id for family in envs.FAMILIES if isinstance(family, UpdatesData)]
    assert data_family() is envs.family(bars_families[0]) and len(bars_families) == 2  # both keep bars files
    other = OtherFiles("Other-v0")
    monkeypatch.setattr(envs, "FAMILIES", (*envs.FAMILIES, other))
    monkeypatch.setitem(envs.ENVIRONMENTS, other.env_id, other)
    with pytest.raises(InputError, match=r"keep 2 \(bars files: .*; histories: Other-v0\): pass --env"):
        data_family()
    assert data_family("Other-v0") is other
    with pytest.raises(InputError, match=rf"--env CartPole-v1: keeps no data files .*those that do: "
                                         rf"{bars_families[0]}"):
        data_family("CartPole-v1")
