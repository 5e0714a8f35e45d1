"""The leave-one-project-out study's verdict lines (each goal of issue 41 met or missed), its mean over the held-out
histories and its paired test against the heuristic, from hand-made tables; and its held-out synthetic histories whose
failures recur at 5-20 runs (issue 51)."""
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import wilcoxon

from envs.agents.testprio.data import load_history
from envs.agents.testprio.synthetic import RECURRENCE_RUNS
from experiments.studies.leave_one_out import (
    main,
    markdown,
    mean_over_histories,
    paired_tests,
    synthetic_held_out,
    targets,
)

CONF = Path(__file__).resolve().parents[2] / "conf/dqn_testprio_cross.yaml"


def table(agent: tuple[float, float, float], heuristic: tuple[float, float, float],
          online_ahead_from: str | None = None) -> pd.DataFrame:
    """(APFDc, APFD, NRPA) of the zero-shot agent and the heuristic."""
    rows = {"agent (zero-shot)": agent, "recent_failures": heuristic}
    frame = pd.DataFrame({name: {"paper_apfdc": v[0], "paper_apfd": v[1], "paper_nrpa": v[2], "ahead_from": ""}
                          for name, v in rows.items()}).T
    if online_ahead_from is not None:
        frame.loc["online (from the cross-project model)"] = [0.7, 0.7, 0.9, online_ahead_from]
    return frame


def test_each_goal_is_met_or_missed_against_the_heuristic_and_the_best_published_agent():
    # IOF/ROL: the paper's NRPA 0.770 is below the heuristic's, so the heuristic sets the bar
    lines = targets("iofrol", table((0.64, 0.63, 0.85), (0.63, 0.63, 0.83), online_ahead_from="7"))
    assert lines == ["APFDc on failing cycles 0.6400 >= heuristic 0.6300: met",
                     "APFD on failing cycles 0.6300 >= heuristic 0.6300: met",
                     "NRPA 0.8500 >= max(heuristic, paper) 0.8300: met",
                     "online running APFDc strictly above the heuristic's from cycle 7 on (stricter: by cycle 10): met"]
    assert targets("iofrol", table((0.6, 0.6, 0.9), (0.6, 0.6, 0.8), online_ahead_from="11"))[-1].endswith("MISSED")
    assert targets("iofrol", table((0.6, 0.6, 0.9), (0.6, 0.6, 0.8), online_ahead_from="never"))[-1].endswith(
        "MISSED")
    # codec: no failing cycles, so no failure lines; the paper's 0.975 is above the heuristic's
    nan = float("nan")
    assert targets("Commons_codec", table((nan, nan, 0.97), (nan, nan, 0.95))) == [
        "NRPA 0.9700 >= max(heuristic, paper) 0.9750: MISSED"]
    # an unknown history has no published number: the heuristic alone; APFD below it is missed
    lines = targets("other", table((0.7, 0.5, 0.9), (0.6, 0.6, 0.8)))
    assert lines[0].endswith(": met") and lines[1].endswith("MISSED") and lines[2].endswith(": met")


def test_online_is_judged_on_the_failing_cycles_after_the_first_ten():
    online = "online (from the cross-project model)"
    rows = [{"position": k, "strategy": name, "tests": 8 if k != 12 else 3,
             "apfdc": value if k % 3 else float("nan")}
            for k in range(1, 16) for name, value in ((online, 0.1 if k <= 10 else 0.7), ("recent_failures", 0.6))]
    per_cycle = pd.DataFrame(rows)
    # cycles 11, 13, 14 fail (12 has too few tests, 15 no failure): 0.7 against 0.6
    lines = targets("iofrol", table((0.6, 0.6, 0.9), (0.6, 0.6, 0.8), online_ahead_from="never"), per_cycle)
    assert "online APFDc after 10 cycles 0.7000 > heuristic 0.6000 on the same cycles: met" in lines
    assert lines[-1].endswith("MISSED")  # the stricter running mean is still behind


def test_the_paired_test_is_wilcoxon_over_the_failing_cycles_of_every_held_out_history():
    rows = []
    agent = [0.9, 0.8, 0.7, 0.95, 0.6]
    heuristic = [0.5, 0.6, 0.72, 0.5, 0.55]
    for k, (a, h) in enumerate(zip(agent, heuristic, strict=True)):
        history = "a" if k < 3 else "b"
        rows += [{"held_out": history, "cycle": k, "strategy": "agent (zero-shot)", "tests": 8, "apfdc": a},
                 {"held_out": history, "cycle": k, "strategy": "recent_failures", "tests": 8, "apfdc": h}]
    # neither a cycle without failures nor one with fewer than 6 tests enters the test
    rows += [{"held_out": "a", "cycle": 9, "strategy": s, "tests": 8, "apfdc": float("nan")}
             for s in ("agent (zero-shot)", "recent_failures")]
    rows += [{"held_out": "b", "cycle": 10, "strategy": s, "tests": 3, "apfdc": v}
             for s, v in (("agent (zero-shot)", 0.0), ("recent_failures", 1.0))]
    tests = paired_tests(pd.DataFrame(rows)).set_index("strategy")
    differences = [a - h for a, h in zip(agent, heuristic, strict=True)]
    assert tests.loc["agent (zero-shot)", "failing_cycles"] == 5
    assert tests.loc["agent (zero-shot)", "mean_apfdc_minus_heuristic"] == pytest.approx(sum(differences) / 5)
    assert tests.loc["agent (zero-shot)", "wilcoxon_p"] == pytest.approx(wilcoxon(differences).pvalue)
    tied = paired_tests(pd.DataFrame(rows).assign(apfdc=0.5)).set_index("strategy")
    assert math.isnan(tied.loc["agent (zero-shot)", "wilcoxon_p"])


def test_the_mean_over_histories_skips_histories_without_failures_in_the_failure_columns():
    frame = pd.DataFrame({"held_out": ["a", "b", "a"], "strategy": ["agent (zero-shot)", "agent (zero-shot)",
                                                                     "paper: best RL (their protocol)"],
                          "paper_apfdc": [0.6, float("nan"), float("nan")], "paper_ttff": [0.1, float("nan"), 0.0],
                          "paper_apfd": [0.5, float("nan"), 0.57], "paper_nrpa": [0.8, 0.9, 0.77]})
    means = mean_over_histories(frame).set_index("strategy")
    assert list(means.index) == ["agent (zero-shot)"]  # published numbers are not a strategy we scored
    assert means.loc["agent (zero-shot)", "paper_apfdc"] == pytest.approx(0.6)
    assert means.loc["agent (zero-shot)", "paper_nrpa"] == pytest.approx(0.85)
    assert means.loc["agent (zero-shot)", "histories_with_failures"] == 1


def test_the_markdown_table_leaves_missing_numbers_blank():
    frame = pd.DataFrame({"held_out": ["a", "a"], "strategy": ["agent", "paper"], "paper_apfd": [0.5, float("nan")]})
    assert markdown(frame).splitlines() == ["| held_out | strategy | paper_apfd |", "|---|---|---|",
                                            "| a | agent | 0.5000 |", "| a | paper |  |"]


def runs_between_failures(path: str) -> np.ndarray:
    """Per test, the runs from one failure to its next (from the verdict history each row carries)."""
    history = load_history(path)
    gaps = []
    for row in np.flatnonzero(history.verdicts):
        past = history.history[row][history.history[row] >= 0]  # its earlier runs, newest first
        if (past == 1).any():
            gaps.append(int(np.argmax(past == 1)) + 1)
    return np.array(gaps)


def test_the_study_holds_out_synthetic_histories_whose_failures_recur_at_5_to_20_runs(tmp_path):
    paths = synthetic_held_out(tmp_path / "synthetic", 2)
    assert [Path(path).name for path in paths] == ["recurring-2000.csv", "recurring-2001.csv"]
    for path in paths:
        history = load_history(path)  # a RETECS file, read as any user's history
        failing_cycles = np.add.reduceat(history.verdicts.astype(int), history.offsets[:-1]) > 0
        assert history.format == "retecs" and failing_cycles.mean() > 0.5
        gaps = runs_between_failures(path)
        low, high = RECURRENCE_RUNS
        assert len(gaps) > 100 and np.mean((gaps >= low) & (gaps <= high)) > 0.8
        assert np.mean((gaps > 4) & (gaps <= 10)) > 0.2  # the case: a failure 5-10 runs after the last one
    assert synthetic_held_out(tmp_path / "again", 1)[0].endswith("recurring-2000.csv")
    assert Path(paths[0]).read_bytes() == Path(tmp_path / "again" / "recurring-2000.csv").read_bytes()  # seeded


def test_a_negative_number_of_synthetic_histories_is_refused_before_training(tmp_path, capsys):
    assert main([str(CONF), "--output", str(tmp_path / "out"), "--synthetic", "-1"]) == 2
    err = capsys.readouterr().err
    assert "--synthetic -1" in err and err.count("\n") == 1 and not (tmp_path / "out").exists()
