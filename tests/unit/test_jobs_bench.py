"""`benchmark jobs`: where a run's time went, from its phase times and Tune's trial results (no run, no timing
asserts)."""
from __future__ import annotations

import json

import pytest

from experiments.benchmark.jobs_bench import TrialTimes, breakdown, describe, most_at_once, read_trials
from experiments.sweep.run_status import StatusFile, read_status


def _write_trial(folder, name, rows):
    trial = folder / "dqn_btc" / "tune" / "sweep" / name
    trial.mkdir(parents=True)
    (trial / "result.json").write_text("".join(json.dumps(row) + "\n" for row in rows))


def _row(timestamp, this_iter, total, steps):
    return {"timestamp": timestamp, "time_this_iter_s": this_iter, "time_total_s": total,
            "num_env_steps_sampled_lifetime": steps, "training_iteration": 1}


def test_read_trials_takes_each_trials_first_start_last_end_and_training_seconds(tmp_path):
    _write_trial(tmp_path, "a", [_row(110, 10.0, 10.0, 4000), _row(121, 10.0, 20.0, 8000)])
    _write_trial(tmp_path, "b", [_row(125, 5.0, 5.0, 4000)])
    a, b = read_trials(tmp_path)
    assert (a.name, a.start, a.end, a.train_s, a.iterations, a.env_steps) == ("a", 100.0, 121.0, 20.0, 2, 8000.0)
    assert a.span_s == 21.0 and (b.start, b.end) == (120.0, 125.0)


def test_most_at_once_counts_overlapping_spans_and_a_handover_as_one_slot():
    trials = [TrialTimes("a", 0, 10, 9, 1, 0), TrialTimes("b", 1, 11, 9, 1, 0), TrialTimes("c", 10, 20, 9, 1, 0)]
    assert most_at_once(trials) == 2  # c starts the second a ends: still two slots
    assert most_at_once(trials[:1]) == 1


def test_breakdown_adds_up_to_the_wall_time_and_splits_the_sweep_per_slot():
    phases = {"starting": 10.0, "training": 15.0, "scoring": 75.0, "done": 85.0}
    trials = [TrialTimes("a", 20, 45, 20, 1, 0), TrialTimes("b", 20, 45, 20, 1, 0),
              TrialTimes("c", 50, 74, 20, 1, 0), TrialTimes("d", 50, 74, 20, 1, 0)]
    rows = dict(breakdown(0.0, 90.0, phases, trials))
    assert sum(rows.values()) == pytest.approx(90.0)
    assert rows["plan: imports, checks, features"] == 10.0
    assert rows["Ray start, MLflow experiment and parent run"] == 5.0
    assert rows["trials' iterations (env steps, updates, per-iteration evaluation), per slot"] == 40.0
    assert rows["between iterations (checkpoints, results), per slot"] == 9.0   # (5 + 5 + 4 + 4) / 2
    assert rows["trial starts and ends (worker, imports, algorithm and env runners), Tune"] == 11.0
    assert rows["shutdown: Ray, MLflow runs closed, exit"] == 5.0
    assert "plan: imports, checks, features 10.0 s (11%)" in describe(list(rows.items()))


def test_breakdown_of_a_run_without_phase_times_is_the_whole_run():
    assert breakdown(0.0, 30.0, {"starting": 1.0}, []) == [("whole run (the run wrote no phase times)", 30.0)]


def test_status_file_stamps_when_each_phase_began(tmp_path):
    status = StatusFile(tmp_path / "status.json")
    status.update(phase="starting", name="x")
    status.update(parent_run_id="r")
    status.update(phase="training")
    written = read_status(tmp_path / "status.json")
    assert set(written["phase_started"]) == {"starting", "training"}
    assert written["phase_started"]["starting"] <= written["phase_started"]["training"]
    assert written["phase"] == "training" and written["parent_run_id"] == "r"
