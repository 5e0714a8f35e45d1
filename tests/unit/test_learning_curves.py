"""Budgets from learning curves: the rule that says whether a trial's validation curve had flattened when it stopped,
the `tune.plateau` stopper that shares its notion of a new best, the key's validation, and the verdict's note."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from experiments.records.learning_curves import (
    CurveJudgement,
    iterations_since_best,
    judge_curve,
    not_flattened_note,
    validation_curve,
)

EVAL = "evaluation/env_runners/episode_return_mean"
NAN = float("nan")


# The rule: flattened iff no new best over the last third (n // 3) of its iterations; < 3 iterations: too short.

def test_a_curve_whose_best_is_older_than_its_last_third_has_flattened():
    curve = judge_curve([1.0, 5.0, 4.0, 4.5, 3.0, 4.9, 4.0, 4.2, 4.1], "max")  # best at iteration 2 of 9
    assert curve.since_best == 7 and curve.flattened and curve.word() == "flattened"


def test_a_new_best_inside_the_last_third_means_not_flattened():
    curve = judge_curve([1.0, 2.0, 3.0, 2.5, 2.0, 2.2, 3.5, 3.0, 3.1], "max")  # best at iteration 7 of 9
    assert curve.since_best == 2 and not curve.flattened and curve.word() == "still improving"


def test_the_last_third_is_n_floor_3_iterations():
    assert judge_curve([0, 1, 2, 3, 4, 5, 9, 8, 7], "max").since_best == 2  # 9 iterations: the last 3 count
    assert not judge_curve([0, 1, 2, 3, 4, 5, 9, 8, 7], "max").flattened
    assert judge_curve([0, 1, 2, 3, 4, 9, 8, 7, 6], "max").flattened      # best 3 iterations before the end
    assert judge_curve([1.0, 2.0, 1.5], "max").flattened                   # 3 iterations: the last 1 counts
    assert not judge_curve([1.0, 1.5, 2.0], "max").flattened


def test_fewer_than_three_iterations_or_no_score_is_too_short_to_tell_and_not_flattened():
    for values in ([5.0, 1.0], [3.0], [], [NAN, NAN, NAN, NAN]):
        curve = judge_curve(values, "max")
        assert curve.too_short and not curve.flattened and curve.word() == "too short to tell", values


def test_an_iteration_without_a_score_makes_no_new_best():
    assert iterations_since_best([NAN, 2.0, NAN, None, NAN], "max") == 3
    assert judge_curve([NAN, 2.0, NAN, NAN, NAN, NAN], "max").flattened


def test_min_delta_a_gain_of_at_most_min_delta_is_no_new_best():
    values = [1.0, 1.25, 1.75, 2.0, 2.5, 2.75]  # binary fractions: no rounding at the boundary
    assert iterations_since_best(values, "max") == 0
    assert iterations_since_best(values, "max", min_delta=0.5) == 1        # 1.0 -> 1.75 -> 2.5, then 2.75 is +0.25
    assert iterations_since_best([1.0, 1.5, 1.25], "max", min_delta=0.5) == 2  # exactly 0.5 is not more than 0.5


def test_mode_min_a_lower_value_is_better():
    assert iterations_since_best([5.0, 3.0, 4.0, 3.5], "min") == 2
    assert iterations_since_best([5.0, 3.0, 4.0, 3.5], "max") == 3


def test_the_curve_is_read_once_per_iteration_as_last_reported():
    """A trial retried from its checkpoint at iteration 2 reports iterations 3 and 4 again: the second report counts."""
    rows = pd.DataFrame({"training_iteration": [1, 2, 3, 4, 3, 4, 5], EVAL: [1.0, 2.0, 9.0, 9.5, 3.0, 2.0, NAN]})
    assert validation_curve(rows, EVAL)[:4] == [1.0, 2.0, 3.0, 2.0]
    assert math.isnan(validation_curve(rows, EVAL)[4])
    assert [math.isnan(v) for v in validation_curve(rows, "evaluation/other")] == [True] * 5
    assert validation_curve(pd.DataFrame(), EVAL) == [] and validation_curve(None, EVAL) == []


def test_the_note_counts_the_trials_that_had_not_flattened():
    flat, rising, short = CurveJudgement(9, 5), CurveJudgement(9, 0), CurveJudgement(2, 0)
    assert not_flattened_note([flat, flat]) == ""
    assert not_flattened_note([flat, rising, short, flat]) == (
        "2 of 4 trial(s) had not flattened when they stopped (1 made a new best in the last third of their iterations; "
        "1 too short to tell: fewer than 3 iterations, or never scored): their budget may be short (tune.stop, "
        "tune.plateau)")
    assert not_flattened_note([rising, flat]).startswith("1 of 2 trial(s) had not flattened when they stopped (1 made "
                                                         "a new best in the last third of their iterations): ")
    assert not_flattened_note([short]).startswith("1 of 1 trial(s) had not flattened when they stopped (1 too short")


# The stopper: stops after `patience` iterations without a new best, not before.

def _result(iteration: int, value: float) -> dict:
    return {"training_iteration": iteration, "evaluation": {"env_runners": {"episode_return_mean": value}}}


def _stops_at(stopper, values, trial="t1") -> int | None:
    for iteration, value in enumerate(values, start=1):
        if stopper(trial, _result(iteration, value)):
            return iteration
    return None


def test_the_plateau_stops_after_patience_iterations_without_a_new_best_and_not_before():
    from experiments.sweep.plateau import PlateauStopper

    assert _stops_at(PlateauStopper(EVAL, "max", patience=3), [1, 2, 2, 1.5, 2, 5, 6]) == 5
    assert _stops_at(PlateauStopper(EVAL, "max", patience=4), [1, 2, 2, 1.5, 2, 5, 6]) is None
    assert _stops_at(PlateauStopper(EVAL, "max", patience=1), [1, 2, 3, 4, 4]) == 5
    assert _stops_at(PlateauStopper(EVAL, "max", patience=2), [NAN, NAN, NAN, 1.0]) is None  # nothing scored yet


def test_the_plateau_respects_min_delta_and_mode_min():
    from experiments.sweep.plateau import PlateauStopper

    creeping = [1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5]
    assert _stops_at(PlateauStopper(EVAL, "max", patience=2), creeping) is None
    assert _stops_at(PlateauStopper(EVAL, "max", patience=2, min_delta=0.5), creeping) == 3  # +0.5 is not more
    assert _stops_at(PlateauStopper(EVAL, "max", patience=2, min_delta=0.25), creeping) is None  # every other one
    assert _stops_at(PlateauStopper(EVAL, "max", patience=1, min_delta=0.25), creeping) == 2
    assert _stops_at(PlateauStopper(EVAL, "min", patience=2), [5.0, 4.0, 3.0, 3.5, 3.2, 1.0]) == 5
    assert _stops_at(PlateauStopper(EVAL, "max", patience=2), [5.0, 4.0, 3.0, 3.5, 3.2, 1.0]) == 3


def test_the_plateau_keeps_each_trial_apart_and_counts_a_replayed_iteration_once():
    from experiments.sweep.plateau import PlateauStopper

    stopper = PlateauStopper(EVAL, "max", patience=2)
    assert not stopper("a", _result(1, 5.0)) and not stopper("b", _result(1, 1.0))
    assert not stopper("a", _result(2, 4.0)) and not stopper("b", _result(2, 2.0))
    # Trial a's worker died after iteration 2; retried from its checkpoint at 1, it reports iteration 2 again.
    assert not stopper("a", _result(2, 4.5))
    assert stopper("a", _result(3, 4.0))      # iterations 2 and 3 without a new best: 2, not 3 counted
    assert not stopper("b", _result(3, 3.0))


def test_the_threshold_stopper_says_what_tunes_stop_dict_says():
    """With a plateau the dict becomes a Stopper: on every result it must agree with Tune's own Trial.should_stop."""
    from ray.tune.experiment import Trial
    from ray.tune.utils import flatten_dict

    from experiments.sweep.plateau import ThresholdStopper

    criteria = {"training_iteration": 3, EVAL: 10.0}
    tune_trial = Trial("stub", stub=True, stopping_criterion=criteria)
    stopper = ThresholdStopper(criteria)
    for result in (_result(1, 2.0), _result(3, 2.0), _result(2, 10.0), _result(2, 9.99), {"training_iteration": 2},
                   {"training_iteration": 4}, {"time_total_s": 1.0}):
        assert stopper("t", result) == tune_trial.should_stop(flatten_dict(result)), result


def _cartpole(tmp_path: Path, tune: str) -> Path:
    path = tmp_path / "cartpole.yaml"
    path.write_text("name: t\nenvironment: {env: CartPole-v1}\nevaluation: {evaluation_interval: 1}\n"
                    f"tune:\n  metric: {EVAL}\n  stop: {{training_iteration: 8}}\n{tune}")
    return path


def test_no_plateau_leaves_tunes_stop_dict_as_it_was_and_a_plateau_adds_a_stopper(tmp_path):
    from experiments.config.load import load_experiment
    from experiments.sweep.plateau import stop_rule

    plain = load_experiment(_cartpole(tmp_path, ""))
    assert stop_rule(plain) == {"training_iteration": 8}
    rule = stop_rule(load_experiment(_cartpole(tmp_path, "  plateau: {patience: 2, min_delta: 0.5}\n")))
    assert _stops_at(rule, [1.0, 1.4, 1.2, 3.0]) == 3          # 1.4 is no gain of more than 0.5: the plateau
    assert _stops_at(rule, list(range(20)), trial="rising") == 8  # always improving: tune.stop, the maximum


def test_the_plateau_defaults_to_tunes_metric_and_mode(tmp_path):
    from experiments.config.load import load_experiment

    tune = load_experiment(_cartpole(tmp_path, "  mode: min\n  plateau: {patience: 3}\n")).tune
    assert tune.plateau is not None and tune.plateau.metric is None  # resolved when read, so --set tune.metric follows
    assert tune.curve_rule() == (EVAL, "min", 0.0)
    tune = load_experiment(_cartpole(tmp_path, "  plateau: {patience: 3, metric: training_iteration, mode: min, "
                                               "min_delta: 2}\n")).tune
    assert tune.curve_rule() == ("training_iteration", "min", 2.0)
    assert load_experiment(_cartpole(tmp_path, "")).tune.curve_rule() == (EVAL, "max", 0.0)


@pytest.mark.parametrize("plateau, fragment", [
    ("{patience: 0}", "tune.plateau.patience: Input should be greater than or equal to 1 (got 0)"),
    ("{patience: 2, min_delta: -0.1}", "tune.plateau.min_delta: Input should be greater than or equal to 0"),
    ("{min_delta: 1}", "missing key 'tune.plateau.patience'"),
    ("{patience: 2, metric: evaluation/env_runners/episode_retrun_mean}",
     "tune.plateau.metric 'evaluation/env_runners/episode_retrun_mean' is not a result key dqn reports: did you mean "
     "'evaluation/env_runners/episode_return_mean'?"),
    ("{patience: 2, stop_after: 3}", "tune.plateau.stop_after"),
])
def test_a_bad_plateau_is_refused_in_one_line(capsys, tmp_path, plateau, fragment):
    from experiments.run import main

    conf = _cartpole(tmp_path, "")
    code = main([str(conf), "--dry-run", "--output", "/nonexistent-never-written", "--set", f"tune.plateau={plateau}"])
    err = capsys.readouterr().err
    assert code == 2 and fragment in err, err
    assert err.count("\n") == 1 and "Traceback" not in err and str(conf) in err


def test_a_patience_shorter_than_the_evaluation_interval_is_refused(tmp_path):
    from envs.errors import InputError
    from experiments.config.load import load_experiment

    conf = _cartpole(tmp_path, "  plateau: {patience: 2}\n")
    with pytest.raises(InputError, match="tune.plateau.patience 2 is shorter than evaluation.evaluation_interval 3"):
        load_experiment(conf, ["evaluation.evaluation_interval=3"])
    load_experiment(conf, ["evaluation.evaluation_interval=2"])
    load_experiment(conf, ["evaluation.evaluation_interval=3", "tune.plateau.metric=training_iteration"])


def test_the_plan_says_when_the_plateau_stops_a_trial(tmp_path):
    from experiments.api.preflight import describe_plateau
    from experiments.config.load import load_experiment

    assert describe_plateau(load_experiment(_cartpole(tmp_path, ""))) is None
    line = describe_plateau(load_experiment(_cartpole(tmp_path, "  plateau: {patience: 4, min_delta: 0.5}\n")))
    assert line == (f"plateau: a trial stops once {EVAL} (max) has not improved by more than 0.5 for 4 iteration(s), "
                    "else at tune.stop (training_iteration 8), the maximum the estimate counts")


# The verdict's notes, what it prints and what each trial's run gets.

def _scored(curves: list[CurveJudgement]):
    from envs.report import EvaluationReport
    from experiments.results.verdict import ScoredTrial

    rng = np.random.default_rng(0)
    trials = []
    for index, curve in enumerate(curves):
        fold, seed = divmod(index, 2)
        frame = pd.DataFrame({"agent": rng.normal(0, 0.01, 50), "flat": np.zeros(50)},
                             index=pd.date_range("2024-01-01", periods=50, freq="h", tz="UTC") + pd.Timedelta(
                                 hours=50 * fold))
        table = pd.DataFrame({name: {"total_return": float(np.expm1(frame[name].sum())), "sharpe": 0.1, "trades": 1.0}
                              for name in frame}).T
        report = EvaluationReport("made up", table, {}, np.exp(frame.cumsum()), "equity", returns=frame)
        trials.append(ScoredTrial(fold, seed, "default", 1.0, report, curve))
    return trials


def test_the_verdict_notes_count_the_trials_that_had_not_flattened():
    from rich.console import Console

    from experiments.results.printing import print_verdict
    from experiments.results.verdict import build_verdict

    flat, rising = CurveJudgement(10, 6), CurveJudgement(10, 1)
    verdict = build_verdict(_scored([flat, rising, rising, flat, flat, rising]), "max", periods_per_year=8760)
    assert verdict.notes() == [not_flattened_note([flat, rising, rising, flat, flat, rising])]
    assert verdict.notes()[0].startswith("3 of 6 trial(s) had not flattened when they stopped")
    console = Console(record=True, width=300)
    print_verdict(console, verdict, "made up")
    assert "note: 3 of 6 trial(s) had not flattened" in console.export_text()
    assert build_verdict(_scored([flat] * 4), "max", periods_per_year=8760).notes() == []


def test_each_trials_run_gets_its_curve_as_metrics():
    from experiments.results.mlflow_logging import curve_metrics

    assert curve_metrics(CurveJudgement(9, 4)) == {"curve_flattened": 1.0, "iterations_since_best": 4.0}
    assert curve_metrics(CurveJudgement(9, 0)) == {"curve_flattened": 0.0, "iterations_since_best": 0.0}
    assert curve_metrics(CurveJudgement(4, None)) == {"curve_flattened": 0.0}
    assert curve_metrics(None) == {}
