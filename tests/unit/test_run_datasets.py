"""The data a run used as MLflow dataset inputs: which parts each env config reads, their digests, and what the
tracking store keeps."""
from __future__ import annotations

import shutil

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

import envs
from envs.datasets import DIGEST_CHARS, whole_file
from experiments.tracking.datasets import CONTEXT_TAG, log_data_parts
from tests.conftest import REPO

BARS = REPO / "data/raw/BTC-USD_1h.parquet"
WALK_FORWARD = {"type": "walk_forward", "folds": 3, "test_size": 2000, "validation_size": 1000}


def _trading(**config):
    return envs.family("trading/Spot-v0").data_parts({"data_path": str(BARS), "timeframe": "1h", **config})


def test_a_trading_fold_is_three_parts_of_its_bars_in_time_order():
    parts = _trading(protocol=WALK_FORWARD, fold=1)
    assert [p.name for p in parts] == ["BTC-USD_1h[train]", "BTC-USD_1h[validation]", "BTC-USD_1h[test]"]
    assert [p.rows for p in parts[1:]] == [1000, 2000] and {p.fold for p in parts} == {1}
    assert pd.Timestamp(parts[0].last) < pd.Timestamp(parts[1].first) <= pd.Timestamp(parts[1].last) < pd.Timestamp(
        parts[2].first)
    assert all(len(p.digest) == DIGEST_CHARS <= 36 for p in parts) and parts[0].source == str(BARS)


def test_digests_tell_other_rows_and_other_data_apart(tmp_path):
    folds = [_trading(protocol=WALK_FORWARD, fold=k) for k in range(3)]
    assert len({p.digest for parts in folds for p in parts}) == 9
    assert [p.digest for p in _trading(protocol=WALK_FORWARD, fold=2)] == [p.digest for p in folds[2]]
    # Another exchange's export: other bytes, another name, other digests for the same rows.
    other = tmp_path / "kraken_XBT-USD_1h.parquet"
    bars = pd.read_parquet(BARS)
    bars[["open", "high", "low", "close"]] = bars[["open", "high", "low", "close"]] * 1.001
    bars.to_parquet(other)
    theirs = envs.family("trading/Spot-v0").data_parts({"data_path": str(other), "timeframe": "1h",
                                                         "protocol": WALK_FORWARD, "fold": 2})
    assert theirs[0].name == "kraken_XBT-USD_1h[train]"
    assert not {p.digest for p in theirs} & {p.digest for p in folds[2]}
    # The same bytes under another name: the same content, the same digests.
    copy = tmp_path / "copy.parquet"
    shutil.copy(BARS, copy)
    same = envs.family("trading/Spot-v0").data_parts({"data_path": str(copy), "timeframe": "1h",
                                                       "protocol": WALK_FORWARD, "fold": 2})
    assert [p.digest for p in same] == [p.digest for p in folds[2]]


def test_a_synthetic_market_says_how_it_was_generated():
    [train, *_] = envs.family("trading/Spot-v0").data_parts({"source": "synthetic", "symbol": "SYN",
                                                              "synthetic_seed": 3, "synthetic_bars": 2000})
    assert train.name == "SYN_1h-regimes-3[train]" and train.source.startswith("synthetic:regimes:SYN")


def test_pooled_ci_histories_are_split_each_on_its_own(tmp_path):
    data = REPO / "data/testprio"
    family = envs.family("agents/TestPrioritizationPairwise-v0")
    config = {"data_paths": [str(data / "Commons_codec.csv"), str(data / "Commons_imaging.csv")],
              "features": "portable", "validation_fraction": 0.15, "max_cycles": 60}
    parts = family.data_parts(config)
    assert [p.name for p in parts] == [f"{stem}[{part}]" for stem in ("Commons_codec", "Commons_imaging")
                                       for part in ("train", "validation", "test")]
    assert [p.rows for p in parts[:3]] == [33, 9, 18]  # 60 cycles: 70% before the test part, 15% of all validate
    # No validation fraction: no validation part; a synthetic history is named by its seed.
    assert [p.name for p in family.data_parts({})] == ["synthetic-ci-7[train]", "synthetic-ci-7[test]"]


def test_a_family_without_data_logs_none():
    assert envs.family("CartPole-v1").data_parts({}) == []


def test_the_store_keeps_each_part_once_with_its_part_and_fold(tmp_path):
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run_id = client.create_run(client.create_experiment("x")).info.run_id
    parts = _trading(protocol=WALK_FORWARD, fold=1)
    log_data_parts(client, run_id, parts)
    log_data_parts(client, run_id, parts + _trading(protocol=WALK_FORWARD, fold=2))  # a resumed sweep, one more fold
    inputs = client.get_run(run_id).inputs.dataset_inputs
    assert len(inputs) == 6
    tags = {(i.dataset.name, i.dataset.digest): {t.key: t.value for t in i.tags} for i in inputs}
    assert tags[(parts[2].name, parts[2].digest)] == {CONTEXT_TAG: "test", "fold": "1"}
    profile = next(i.dataset.profile for i in inputs if i.dataset.digest == parts[1].digest)
    assert '"rows": 1000' in profile


def test_a_whole_file_is_named_by_its_bytes(tmp_path):
    history = tmp_path / "other_ci.csv"
    history.write_text("Id;Name;Duration;CalcPrio;LastRun;NumRuns;Verdict;Cycle;LastResults\n")
    part = whole_file(str(history), "transfer", 12)
    assert part.name == "other_ci[transfer]" and part.rows == 12 and len(part.digest) == DIGEST_CHARS
    history.write_text(history.read_text() + "1;a;1;0;2020-01-01;1;0;1;[]\n")
    assert whole_file(str(history), "transfer", 12).digest != part.digest


@pytest.mark.parametrize("config", [{"protocol": {**WALK_FORWARD, "folds": 50}, "fold": 0}])
def test_a_fold_that_does_not_fit_is_refused_in_one_line(config):
    from envs.errors import InputError

    with pytest.raises(InputError, match="BTC-USD_1h: protocol"):
        _trading(**config)


def test_bars_appended_to_a_file_are_other_bars(tmp_path):
    """A process that reads a file again after `experiments.data update` appended to it sees the new content."""
    path = tmp_path / "BTC-USD_1h.parquet"
    bars = pd.read_parquet(BARS)
    bars.iloc[:-500].to_parquet(path)
    family = envs.family("trading/Spot-v0")
    config = {"data_path": str(path), "timeframe": "1h"}
    before = family.data_parts(config)
    bars.to_parquet(path)
    after = family.data_parts(config)
    assert after[2].rows == before[2].rows + 75 and after[2].digest != before[2].digest  # 15% of 500 more bars


def test_a_rewritten_ci_history_is_read_again(tmp_path):
    history = tmp_path / "ci.csv"
    lines = (REPO / "data/testprio/Commons_codec.csv").read_text().splitlines(keepends=True)
    history.write_text("".join(lines[: len(lines) // 2]))
    family = envs.family("agents/TestPrioritization-v0")
    before = family.data_parts({"data_path": str(history)})
    history.write_text("".join(lines))
    after = family.data_parts({"data_path": str(history)})
    assert after[-1].rows > before[-1].rows and after[0].digest != before[0].digest
