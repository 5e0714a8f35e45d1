"""Loading both CSV formats, their input errors, and features that never see the cycle's verdicts."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from envs.agents.testprio.data import load_history, parse_enriched, parse_retecs
from envs.agents.testprio.features import CLIP, build_features
from envs.agents.testprio.synthetic import generate_frame, generate_history
from envs.errors import InputError

REAL_DATA = Path(__file__).resolve().parents[2] / "data/testprio"  # bundled: the shipped confs use it

RETECS_OK = (
    "Id;Name;Duration;CalcPrio;LastRun;LastResults;Verdict;Cycle\n"
    "1;10;57;0;2015-02-13 16:13:00;[];1;1\n"
    "2;11;30;0;2015-02-13 16:13:00;[0, 1];0;1\n"
    "3;10;55;0;2015-02-14 10:00:00;[1];0;2\n"
)


def write(tmp_path: Path, text: str, name: str = "history.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def without_column(text: str, column: str) -> str:
    lines = [line.split(";") for line in text.splitlines()]
    drop = lines[0].index(column)
    return "".join(";".join(v for k, v in enumerate(line) if k != drop) + "\n" for line in lines)


def enriched_frame(n_cycles: int = 12, seed: int = 0) -> pd.DataFrame:
    """A small enriched table derived from a synthetic history, including the leaky `failures_%`."""
    retecs = generate_frame(n_cycles=n_cycles, n_tests=8, seed=seed)
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "test_class_name": "org/example/T" + retecs["Name"].astype(str) + "Test.java",
            "cycle_id": retecs["Cycle"].map(lambda c: f"{c * 7919:040x}"),
            "tests": 4,
            "current_failures": retecs["Verdict"] * 2,
            "time": retecs["Duration"] / 100.0,
            "time_since": rng.uniform(0, 3, len(retecs)),
            "AvgCyclomatic": rng.integers(1, 9, len(retecs)),
            "CountLine": rng.integers(10, 900, len(retecs)),
        }
    )
    frame.insert(5, "failures_%", frame["current_failures"] / frame["tests"])
    return frame


def test_retecs_file_loads_in_cycle_order(tmp_path):
    history = load_history(write(tmp_path, RETECS_OK))
    assert history.format == "retecs"
    assert history.cycle_ids.tolist() == [1, 2]
    assert history.offsets.tolist() == [0, 2, 3]
    assert history.verdicts.tolist() == [True, False, False]
    assert history.history[1, :3].tolist() == [0, 1, -1]
    assert history.prior_runs.tolist() == [0, 2, 1]
    assert np.isnan(history.days_since_last_run[0])
    assert history.days_since_last_run[2] == 0.0
    assert history.default_history_window == 10


def test_enriched_history_is_recomputed_from_the_sequence():
    frame = enriched_frame()
    history = parse_enriched(frame.astype(str), "enriched.csv")
    assert history.format == "enriched"
    assert history.static_feature_names == ("tests", "AvgCyclomatic", "CountLine")
    assert history.default_history_window == 4
    for name in np.unique(history.test_ids):
        rows = np.flatnonzero(history.test_ids == name)
        verdicts = history.verdicts[rows]
        for position, row in enumerate(rows):
            past = verdicts[:position][::-1].astype(int).tolist()[:5]
            assert history.history[row, : len(past)].tolist() == past
            assert history.prior_runs[row] == position
            if position:
                assert history.duration_estimates[row] == history.durations[rows[position - 1]]
            else:
                assert np.isnan(history.duration_estimates[row])


def test_synthetic_history_round_trips_through_a_retecs_file(tmp_path):
    path = tmp_path / "synthetic.csv"
    generate_frame(30, 12, 4).to_csv(path, sep=";", index=False)  # the RETECS layout: `;`-delimited
    loaded = load_history(path)
    generated = generate_history(n_cycles=30, n_tests=12, seed=4)
    assert loaded.n_cycles == generated.n_cycles == 30
    for name in ("offsets", "verdicts", "durations", "history", "prior_runs"):
        assert np.array_equal(getattr(loaded, name), getattr(generated, name))
    assert generate_frame(30, 12, 4).equals(generate_frame(30, 12, 4))
    assert 0.0 < generated.verdicts.mean() < 0.5


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (RETECS_OK.replace(";", ","), "delimited by ',', not ';'"),
        (without_column(RETECS_OK, "Verdict"), "missing column(s) Verdict"),
        (RETECS_OK.replace("[0, 1]", "[0, x]"), "column LastResults, row 3"),
        (RETECS_OK.replace("[0, 1]", "0 1"), "column LastResults, row 3"),
        (RETECS_OK.replace(";0;2\n", ";0;\n"), "column Cycle, row 4 is empty"),
        (RETECS_OK.replace(";30;", ";fast;"), "column Duration, row 3: 'fast' is not a non-negative number"),
        (RETECS_OK.replace(";1;1\n", ";2;1\n", 1), "column Verdict, row 2"),
        (RETECS_OK.replace("2015-02-14 10:00:00", "yesterday"), "column LastRun, row 4"),
        (RETECS_OK.splitlines()[0] + "\n", "no test verdicts"),
        ("a;b;c\n1;2;3\n", "unrecognized header"),
    ],
)
def test_malformed_retecs_files_raise_input_errors(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(InputError) as error:
        load_history(path)
    assert message in str(error.value)
    assert str(path) in str(error.value)
    assert "\n" not in str(error.value)


def test_enriched_errors_name_the_column_and_row(tmp_path):
    frame = enriched_frame()
    bad_delimiter = write(tmp_path, frame.to_csv(sep=";", index=False), "semicolons.csv")
    with pytest.raises(InputError, match="delimited by ';', not ','"):
        load_history(bad_delimiter)
    missing = write(tmp_path, frame.drop(columns="time").to_csv(index=False), "missing.csv")
    with pytest.raises(InputError, match=r"missing column\(s\) time"):
        load_history(missing)
    blank = frame.astype(str)
    blank.loc[3, "cycle_id"] = ""
    with pytest.raises(InputError, match="column cycle_id, row 5 is empty"):
        load_history(write(tmp_path, blank.to_csv(index=False), "blank.csv"))
    twice = pd.concat([frame, frame.iloc[[0]]], ignore_index=True)
    with pytest.raises(InputError, match="appears twice in cycle"):
        load_history(write(tmp_path, twice.to_csv(index=False), "twice.csv"))


def test_missing_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_history(tmp_path / "absent.csv")


def test_flipping_a_retecs_cycles_verdicts_changes_no_feature():
    frame = generate_frame(n_cycles=40, n_tests=15, seed=1)
    flipped = frame.copy()
    in_cycle = flipped["Cycle"] == 25
    flipped.loc[in_cycle, "Verdict"] = 1 - flipped.loc[in_cycle, "Verdict"]
    original = build_features(parse_retecs(frame, "a"), window=10, train_cycles=28)
    changed = build_features(parse_retecs(flipped, "b"), window=10, train_cycles=28)
    assert np.array_equal(original.matrix, changed.matrix)


@pytest.mark.parametrize("flip_cycle", [3, 8])  # a training and a test cycle
def test_flipping_an_enriched_cycles_verdicts_leaves_its_features_unchanged(flip_cycle):
    frame = enriched_frame()
    flipped = frame.copy()
    in_cycle = flipped["cycle_id"] == frame["cycle_id"].unique()[flip_cycle]
    flipped.loc[in_cycle, "current_failures"] = np.where(flipped.loc[in_cycle, "current_failures"] > 0, 0, 1)
    flipped["failures_%"] = flipped["current_failures"] / flipped["tests"]
    original_history = parse_enriched(frame, "a")
    original = build_features(original_history, window=4, train_cycles=7)
    changed = build_features(parse_enriched(flipped, "b"), window=4, train_cycles=7)
    up_to_cycle = slice(0, int(original_history.offsets[flip_cycle + 1]))
    assert np.array_equal(original.matrix[up_to_cycle], changed.matrix[up_to_cycle])
    assert not np.array_equal(original.matrix, changed.matrix)  # later cycles do see it as history


def test_scaling_uses_training_cycles_only():
    history = generate_history(n_cycles=40, n_tests=15, seed=2)
    train_cycles = 28
    end_of_train = int(history.offsets[train_cycles])
    stretched = history.durations.copy()
    stretched[end_of_train:] *= 1000.0
    changed = type(history)(**{**vars(history), "duration_estimates": stretched})
    original = build_features(history, window=10, train_cycles=train_cycles)
    altered = build_features(changed, window=10, train_cycles=train_cycles)
    assert np.array_equal(original.matrix[:end_of_train], altered.matrix[:end_of_train])
    assert np.abs(altered.matrix).max() <= CLIP


def test_real_retecs_file_loads():
    history = load_history(REAL_DATA / "iofrol.csv")
    assert (history.n_cycles, len(history.test_ids)) == (320, 32260)
    assert int(history.verdicts.sum()) == 9289
    features = build_features(history, window=10, train_cycles=224)
    assert features.dim == 15 and np.isfinite(features.matrix).all()


def test_real_enriched_file_loads_and_matches_its_precomputed_history():
    history = load_history(REAL_DATA / "Commons_codec.csv")
    assert (history.n_cycles, len(history.test_ids)) == (615, 3170)
    assert (
        "AvgCyclomatic" in history.static_feature_names and "failures_%" not in history.static_feature_names
    )
    frame = pd.read_csv(REAL_DATA / "Commons_codec.csv")
    codes, _ = pd.factorize(frame["cycle_id"])
    frame = frame.iloc[np.argsort(codes, kind="stable")]
    for lag, column in enumerate(["failures_3", "failures_2", "failures_1", "failures_0"]):
        assert np.array_equal(history.history[:, lag] == 1, frame[column].to_numpy() > 0)


def test_every_shipped_testprio_conf_reads_bundled_data_with_source_and_license():
    """A fresh clone has data/ but not ../shared: every data file a shipped conf reads is under data/,
    and data/testprio/README.md names each bundled file with its source and license."""
    from experiments.config.load import load_experiment
    from tests.conftest import REPO

    readme = (REPO / "data/testprio/README.md").read_text()
    for conf in sorted((REPO / "conf").glob("dqn_testprio_*.yaml")):
        env_config = load_experiment(conf).environment.env_config
        for data_path in map(Path, env_config.get("data_paths") or [env_config["data_path"]]):
            assert data_path.is_relative_to(REPO / "data") and data_path.is_file(), conf.name
    for bundled in sorted((REPO / "data/testprio").glob("*.csv")):
        section = readme[readme.index(bundled.name):]
        assert "Source:" in section.split("\n## ")[0] and "License:" in section.split("\n## ")[0], bundled.name
