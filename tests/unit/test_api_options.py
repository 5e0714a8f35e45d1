"""The typed options a run is handed (experiments/api/options.py) and the once-only steps of a plan: each --set is
parsed once and each fold's env is built once (envs.work_counts), whatever the smoke budget adds."""
from __future__ import annotations

from pathlib import Path

import pytest

from envs import work_counts
from envs.errors import InputError
from experiments import api
from experiments.api.preflight import SMOKE_OVERRIDES
from experiments.records.exits import ExitCode
from tests.conftest import REPO


def test_options_travel_to_a_child_process_as_json_and_back():
    options = api.RunOptions(smoke_test=True, output=Path("/tmp/out"), status_file=Path("/tmp/s.json"),
                             hardware="cpu", dashboard=False, run_group="agents-1")
    assert api.RunOptions.from_json(options.to_json()) == options


def test_unknown_options_and_an_empty_ledger_reason_are_refused_in_one_line():
    with pytest.raises(InputError, match="unknown colour"):
        api.RunOptions.from_json('{"colour": "red"}')
    with pytest.raises(InputError, match="--fresh-ledger: give the reason"):
        api.RunOptions(fresh_ledger="  ")


def test_exit_codes_are_one_vocabulary():
    assert [int(code) for code in ExitCode] == [0, 1, 2, 3, 4, 130]
    assert ExitCode.PARTIAL.status == "partial"


def test_a_smoke_plan_parses_each_override_once_and_builds_each_fold_once():
    import algos
    import envs

    user = ["training.lr=0.0003", "tune.seeds=[0, 1]"]
    start = work_counts.snapshot()
    plan = api.plan(REPO / "conf/dqn_btc.yaml", user, api.RunOptions(smoke_test=True))
    work = work_counts.since(start)
    exp = plan.checked.exp
    budget = [*SMOKE_OVERRIDES, *algos.algorithm("dqn").smoke_overrides,
              *envs.family(exp.environment.env).smoke_overrides]
    assert work["override_parses"] == len(user) + len(budget)
    folds = exp.tune.search_space["environment.env_config.fold"]
    searched = folds["grid"] if "grid" in folds else folds["choice"]
    assert work["env_builds"] == len(searched) == len(plan.checked.examples)
    assert exp.training.lr == 0.0003
    observations, action_space = next(iter(plan.checked.examples.values()))
    assert observations.shape[0] == 4 and "Discrete" in action_space


def test_the_dry_run_refuses_an_algorithm_it_could_not_register(monkeypatch, capsys):
    """Registration comes after the whole sweep; an algorithm whose policy it would refuse is refused by the dry run."""
    import algos
    from experiments.run import main

    monkeypatch.setattr(algos.algorithm("dqn").learner, "numpy_layouts", None)
    assert main([str(REPO / "conf/dqn_cartpole.yaml"), "--dry-run"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: algorithm: dqn could not be registered") and error.count("\n") == 1


def test_a_key_a_gymnasium_evaluation_env_refuses_is_refused_by_the_dry_run(capsys):
    """A Gymnasium id has no config model: its one build per fold carries the evaluation's keys, so a keyword its
    evaluation env would refuse ends the dry run in one line, not every trial after training."""
    from experiments.run import main

    assert main([str(REPO / "conf/dqn_cartpole.yaml"), "--dry-run", "--set", "evaluation.env_config.bogus=1"]) == 2
    error = capsys.readouterr().err
    assert "unexpected keyword argument 'bogus'" in error and error.count("\n") == 1
