"""One execution agent for every CI history: portable features, pooled histories, a cycle's table through the
model's reader, and the transfer table's guard and catch-up columns."""
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from envs.agents.testprio.baselines import BASELINES
from envs.agents.testprio.config import parse_config
from envs.agents.testprio.cycle_reader import CycleReader, PairwiseCycleReader
from envs.agents.testprio.data import load_history, parse_retecs
from envs.agents.testprio.dataset import prepare
from envs.agents.testprio.features import CLIP, build_portable
from envs.agents.testprio.synthetic import generate_frame
from envs.agents.testprio.transfer import ahead_from, score_history, summary
from envs.errors import InputError

DATA = Path(__file__).resolve().parents[2] / "data/testprio"
BUNDLED = [str(DATA / name) for name in ("iofrol.csv", "Commons_codec.csv", "Commons_imaging.csv")]


def pooled(**extra):
    return prepare(parse_config({"data_paths": BUNDLED, "features": "portable", "validation_fraction": 0.15, **extra}))


def test_portable_features_need_no_statistics_of_the_history():
    """Pooled with others, cut short, or alone: a history's rows get the same portable features."""
    data = pooled()
    start = 0
    for path in BUNDLED:
        alone = prepare(parse_config({"data_path": path, "features": "portable", "history_window": 10}))
        rows = alone.features.matrix.shape[0]
        assert np.array_equal(data.features.matrix[start:start + rows], alone.features.matrix)
        start += rows
        head = build_portable(load_history(path).head(20), 10).matrix
        assert np.array_equal(head, alone.features.matrix[: len(head)])
    assert start == data.features.matrix.shape[0]
    assert np.abs(data.features.matrix).max() <= CLIP and np.isfinite(data.features.matrix).all()


def test_portable_features_never_read_the_cycles_verdicts():
    frame = generate_frame(n_cycles=30, n_tests=12, seed=3)
    flipped = frame.copy()
    in_cycle = flipped["Cycle"] == 20
    flipped.loc[in_cycle, "Verdict"] = 1 - flipped.loc[in_cycle, "Verdict"]
    original = build_portable(parse_retecs(frame, "a"), 10).matrix
    assert np.array_equal(original, build_portable(parse_retecs(flipped, "b"), 10).matrix)


def test_pooled_histories_are_split_in_time_each_on_its_own():
    data = pooled()
    history = data.history
    assert history.n_cycles == sum(load_history(path).n_cycles for path in BUNDLED)
    owner = np.array([str(cycle).split(":")[0] for cycle in history.cycle_ids])
    for stem in ("iofrol", "Commons_codec", "Commons_imaging"):
        own = np.flatnonzero(owner == stem)
        train, validation, test = (np.intersect1d(data.cycles(s), own) for s in ("train", "validation", "test"))
        assert train.max() < validation.min() <= validation.max() < test.min()  # time order within the history
        assert len(train) + len(validation) + len(test) == len(own)
        assert abs(len(test) - 0.3 * len(own)) <= 1 and abs(len(validation) - 0.15 * len(own)) <= 1
    assert data.features.names[-1] == "cycle_size" and not any("Avg" in name for name in data.features.names)


@pytest.mark.parametrize("config, fix", [
    ({"data_paths": BUNDLED[:2], "features": "extended"}, "needs features: portable"),
    ({"data_paths": BUNDLED[:2], "data_path": BUNDLED[0], "features": "portable"}, "both data_path and data_paths"),
    ({"data_paths": [], "features": "portable"}, "data_paths"),
    ({"data_path": BUNDLED[0], "features": "portable", "synthetic_histories": 2}, "set data_paths too"),
])
def test_pooling_refuses_what_it_cannot_do(config, fix):
    with pytest.raises(InputError, match=fix):
        parse_config(config)


def test_synthetic_histories_join_the_pool_split_like_the_others():
    real, mixed = pooled(), pooled(synthetic_histories=2)
    extra = mixed.history.n_cycles - real.history.n_cycles
    assert extra == 2 * 160 and np.array_equal(mixed.features.matrix[: len(real.features.matrix)], real.features.matrix)
    assert len(mixed.test_cycles) - len(real.test_cycles) == 2 * (160 - int(160 * 0.7))
    assert mixed.history.verdicts[len(real.history.verdicts):].mean() > 0.01  # the synthetic ones fail


def test_a_missing_pooled_file_is_named():
    with pytest.raises(InputError, match=r"data_paths\[1\]: .*nowhere.csv does not exist"):
        prepare(parse_config({"data_paths": [BUNDLED[0], "/nowhere.csv"], "features": "portable"}))


def iofrol_cycle(position: int) -> pd.DataFrame:
    """The rows of one IOF/ROL cycle, as a CI server would send them (no verdict)."""
    frame = pd.read_csv(BUNDLED[0], sep=";", dtype=str, keep_default_na=False)
    cycle = sorted(frame["Cycle"].astype(int).unique())[position]
    return frame[frame["Cycle"].astype(int) == cycle].drop(columns=["Verdict"]).reset_index(drop=True)


def test_a_cycle_table_gets_the_features_the_model_trained_on():
    """The reader of a served model featurizes a lone cycle exactly as training featurized the same cycle."""
    config = {"data_path": BUNDLED[0], "features": "portable", "history_window": 10}
    data = prepare(parse_config(config))
    reader = PairwiseCycleReader.for_env_config(config)
    seen: list[np.ndarray] = []

    def policy(observations):
        seen.append(observations)
        return np.zeros(len(observations), dtype=np.int64)

    position = next(c for c in range(150, data.history.n_cycles) if data.history.cycle_sizes[c] >= 20)
    table = iofrol_cycle(position)
    order = reader.decide(table, policy)
    assert sorted(order["row"]) == list(range(len(table))) and list(order["position"]) == list(range(1, len(table) + 1))
    assert list(order["Name"]) == list(table["Name"].iloc[order["row"]])
    width = data.features.dim
    cycle_rows = data.features.matrix[data.history.rows(position)]
    left = seen[0][:, :width]  # the round robin's left tests, every test appears
    assert {row.tobytes() for row in left} <= {row.tobytes() for row in cycle_rows}
    assert {row.tobytes() for row in seen[0][:, width:]} | {row.tobytes() for row in left} == {
        row.tobytes() for row in cycle_rows}


def test_the_reader_round_trips_and_refuses_what_it_cannot_read(tmp_path):
    reader = PairwiseCycleReader.for_env_config({"data_paths": BUNDLED, "features": "portable"})
    assert reader.mode == "pairwise" and reader.window == 10 and len(reader.training_data) == 3
    reader.save(tmp_path / "reader.json")
    assert asdict(CycleReader.load(tmp_path / "reader.json")) == asdict(reader)
    assert "Commons_codec.csv" in reader.tags()["training_histories"]
    trained_on = prepare(parse_config(reader.training_config()))  # the model's own training data, as it saw it
    assert np.array_equal(trained_on.features.matrix, pooled(history_window=10).features.matrix)
    moved = PairwiseCycleReader(**{**asdict(reader), "training_data": (*reader.training_data[:2], "/gone.csv")})
    assert moved.training_config() is None  # another machine: the learned baseline is left out, not guessed
    with pytest.raises(InputError, match="missing: LastResults"):
        reader.decide(iofrol_cycle(3).drop(columns=["LastResults"]), lambda obs: np.zeros(len(obs), dtype=np.int64))
    scaled = CycleReader.for_env_config({"data_path": BUNDLED[0], "features": "extended"})
    assert scaled.mode == "pointwise" and "features: portable" in scaled.refusal
    with pytest.raises(InputError, match="cannot rank a cycle's table"):
        scaled.decide(iofrol_cycle(3), lambda obs: np.zeros(len(obs), dtype=np.int64))
    (tmp_path / "other.json").write_text('{"format": "something else"}')
    with pytest.raises(InputError, match="not a cycle reader"):
        CycleReader.load(tmp_path / "other.json")


def test_ahead_from_is_where_the_running_apfdc_over_failing_cycles_stays_strictly_above_the_heuristics():
    nan = float("nan")
    scores = {"learner": [nan, 0.1, 0.2, nan, 0.9, 0.9, 0.9], "recent_failures": [nan, 0.5, 0.5, nan, 0.5, 0.5, 0.5]}
    per_cycle = pd.DataFrame([{"position": k + 1, "strategy": name, "apfdc": values[k], "nrpa": 0.9}
                              for name, values in scores.items() for k in range(7)])
    # running means over the failing cycles: -, 0.1, 0.15, 0.15, 0.4, 0.525, 0.6 against 0.5: ahead from cycle 6
    assert ahead_from(per_cycle, "learner") == "6"
    per_cycle.loc[(per_cycle["strategy"] == "learner") & (per_cycle["position"] == 7), "apfdc"] = 0.0
    assert ahead_from(per_cycle, "learner") == "never"
    # level with the heuristic is not ahead on a history with failures
    level = per_cycle.assign(apfdc=per_cycle["apfdc"].where(per_cycle["apfdc"].isna(), 0.5))
    assert ahead_from(level, "learner") == "never"
    # a history without failures: NRPA, at or above
    assert ahead_from(per_cycle.assign(apfdc=nan), "learner") == "1"


def test_the_guard_flags_nrpa_without_failures_first():
    """A strategy that orders by duration can earn NRPA while running the failures last: it is flagged."""
    rows = []
    for position in range(1, 4):
        for strategy, apfd in (("agent (zero-shot)", 0.1), ("recent_failures", 0.9), ("random", 0.5)):
            rows.append({"position": position, "cycle": position, "strategy": strategy, "tests": 8, "apfd": apfd,
                         "apfdc": apfd, "ttff": 1 - apfd, "napfd": apfd,
                         "nrpa": 0.95 if strategy != "random" else 0.8})
    table = summary(pd.DataFrame(rows), learners=[])
    assert table.loc["agent (zero-shot)", "below_heuristic"] and table.loc["random", "below_heuristic"] is not True
    assert not table.loc["recent_failures", "below_heuristic"]


def test_a_history_scored_zero_shot_and_online_has_every_strategy_on_every_cycle():
    """A prefix of a bundled history: the policy, a learner and the baselines each rank every cycle once, and a
    learner ranks a cycle before it learns its verdicts."""
    ranked_before_update: list[bool] = []

    class Learner:
        def __init__(self):
            self.updates = 0
            self.calls_since_update = 0

        def __call__(self, observations):
            self.calls_since_update += 1
            return np.zeros(len(observations), dtype=np.int64)

        def update(self, features, verdicts, durations, rng):
            ranked_before_update.append(self.calls_since_update > 0)
            self.calls_since_update = 0
            self.updates += 1

    config = {"data_path": BUNDLED[0], "features": "portable", "mode": "pairwise", "max_cycles": 40}
    training = {"data_path": BUNDLED[1], "features": "portable", "history_window": 10, "max_cycles": 60}
    report = score_history(lambda obs: np.zeros(len(obs), dtype=np.int64), config, {"learner": Learner}, training)
    counts = report.per_cycle.groupby("strategy").size()
    assert set(counts.index) == {"agent (zero-shot)", "learner", "learning_to_rank", *(b.name for b in BASELINES)}
    assert counts.nunique() == 1 and all(ranked_before_update) and len(ranked_before_update) == counts.iloc[0]
    assert report.table.loc["optimal", "paper_apfd"] >= report.table["paper_apfd"].max() - 1e-12
    assert report.table.loc["optimal", "paper_ttff"] <= report.table["paper_ttff"].min() + 1e-12
    assert report.table.loc["learner", "ahead_from"] != "" and report.table.loc["random", "ahead_from"] == ""
