"""The API returns data and prints nothing: what `experiments.run` shows comes from events (experiments/api/events.py)
that the command draws (experiments/api/console_view.py). A plan is built once: a capped batch edits the checked model
(the file is not read again) and the feature store is attached once. The API's names are real imports, which cost the
dry run no MLflow, scoring or verdict library."""
from __future__ import annotations

import ast
import io
import pickle
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest
from rich.console import Console
from rich.markup import escape

from envs import work_counts
from envs.errors import InputError
from experiments import api
from experiments.api.console_view import ConsoleView
from experiments.records.run_events import Line, Phase, Status, TrialUpdate, say, show_status
from tests.conftest import REPO

COINS = REPO / "conf" / "dqn_coins.yaml"
CRYPTO = REPO / "conf" / "ppo_portfolio_crypto.yaml"
# What a dry run must not import: MLflow (its model code), the scoring and verdict modules and their libraries.
NOT_IN_A_DRY_RUN = ("mlflow", "purgedcv", "sklearn", "experiments.results.scoring", "experiments.results.verdict",
                    "experiments.results.printing")


def missing_coin(folder) -> list[str]:
    """A coin with no local bars: the plan says it is missing (a run would fetch it)."""
    return ["environment.env_config.source=file", f"environment.env_config.data_dir={folder}",
            "environment.env_config.symbol=XYZ-USD"]


def test_a_plan_prints_nothing_and_hands_what_it_says_to_on_event(tmp_path, capsys):
    options = api.RunOptions(smoke_test=True, output=tmp_path)
    api.plan(COINS, missing_coin(tmp_path), options)
    assert capsys.readouterr() == ("", "")  # it used to print the missing coin's note on the terminal
    events: list = []
    api.plan(COINS, missing_coin(tmp_path), options, on_event=events.append)
    assert capsys.readouterr() == ("", "")
    assert [type(event) for event in events] == [Line]
    assert events[0].plain.startswith("note: no local 1h data for XYZ-USD; the run will fetch them")


def test_the_command_draws_the_events_as_it_always_printed(tmp_path, capsys):
    from experiments.run import main

    sets = [word for setting in missing_coin(tmp_path) for word in ("--set", setting)]
    assert main([str(COINS), "--dry-run", "--smoke-test", "--output", str(tmp_path), *sets]) == 0
    out = capsys.readouterr().out
    assert "note: no local 1h data for XYZ-USD" in out and "resolved experiment:" in out
    assert out.startswith("note: no local") and "\ndqn_coins: dqn on trading/Spot-v0 (" in out


def test_helpers_that_report_in_text_and_spinners_send_events_and_write_nothing(capsys):
    """Registration and starting Ray take `log` (say), scoring takes `status` (show_status): each line is a `Line` of
    markup, a plain one escaped so its brackets stay; each long step a pair of `Status`, ended even when it raises."""
    from experiments.results.scoring import showing

    events: list = []
    say(events.append)("[yellow]refused[/yellow]")
    say(events.append, highlight=False)(escape("stopped [raylet] pid 12"))
    status = show_status(events.append)
    with showing(status, "backtesting 2 trial(s)"):
        pass
    with pytest.raises(KeyError), showing(status, "permuting each feature"):
        raise KeyError("lost")
    assert capsys.readouterr() == ("", "")
    assert events == [Line("[yellow]refused[/yellow]", markup=True, highlight=True),
                      Line(escape("stopped [raylet] pid 12"), markup=True, highlight=False),
                      Status("backtesting 2 trial(s)"), Status(None), Status("permuting each feature"), Status(None)]
    assert [event.plain for event in events[:2]] == ["refused", "stopped [raylet] pid 12"]


def test_the_console_view_prints_a_line_as_the_console_would():
    out = io.StringIO()
    view = ConsoleView(Console(file=out, width=240, soft_wrap=True))
    view(Line("[yellow]partial: 1 of 2 trial(s) failed[/yellow]", markup=True))
    view(Line("[kept] as written"))
    view(Phase("scoring"))  # a phase is for a parent's status file: nothing shown
    assert out.getvalue() == "partial: 1 of 2 trial(s) failed\n[kept] as written\n"


def test_a_childs_phases_and_trial_rows_go_to_its_status_file(tmp_path):
    from experiments.api.pipeline import with_status_file
    from experiments.sweep.run_status import read_status

    seen: list = []
    emit = with_status_file(tmp_path / "child.status.json", seen.append)
    emit(Phase("training", {"parent_run_id": "abc123"}))
    emit(TrialUpdate("started", "t1", {"t1": {"trial": "t1", "status": "RUNNING"}}, 1.0))
    status = read_status(tmp_path / "child.status.json")
    assert status["phase"] == "training" and status["parent_run_id"] == "abc123"
    assert status["rows"] == [{"trial": "t1", "status": "RUNNING"}]
    assert len(seen) == 2  # and the caller's callback saw both


def test_a_resumed_sweeps_progress_reports_to_the_run_that_restored_it():
    """Tune pickles its callbacks into tuner.pkl without their listener (a function of the first process); the one
    `Tuner.restore` unpickles reports to the resuming run's."""
    from experiments.sweep.progress import TrialProgress, restored_progress_reports_to

    first: list = []
    saved = pickle.dumps(TrialProgress(first.append, {}))
    second: list = []
    with restored_progress_reports_to(second.append):
        restored = pickle.loads(saved)
    restored.on_trial_start(0, [], SimpleNamespace(trial_id="e5a84_00001", evaluated_params={}))
    assert first == [] and [event.kind for event in second] == ["started"]


def test_a_capped_batch_edits_the_checked_plan_and_the_store_is_attached_once(monkeypatch, tmp_path):
    """The cap used to read the file again with a --set of the capped batch, and attach the feature store again."""
    from envs.abilities import CachesFeatures

    attached = []
    attach = CachesFeatures.attach_store
    monkeypatch.setattr(CachesFeatures, "attach_store",
                        lambda family, config, uri: attached.append(uri) or attach(family, config, uri))
    user = ["environment.env_config.window=400", "training.train_batch_size_per_learner=400000"]
    start = work_counts.snapshot()
    found = api.plan(CRYPTO, user, api.RunOptions(output=tmp_path, hardware="cpu"))
    assert work_counts.since(start)["override_parses"] == len(user)
    assert any(line.startswith("batch CAPPED by memory") for line in found.lines)
    exp = found.checked.exp
    assert exp.training.train_batch_size_per_learner < 400000
    assert exp.training.minibatch_size <= exp.training.train_batch_size_per_learner  # validated again
    assert len(attached) == 1 and exp.environment.env_config[exp.family.store_key] == attached[0]


def test_a_capped_value_is_validated_as_a_set_would_be():
    from experiments.api.preflight import load, with_training

    exp = load(REPO / "conf" / "ppo_portfolio_crypto.yaml", [], smoke_test=False)
    with pytest.raises(InputError, match=r"training\.train_batch_size_per_learner"):
        with_training(exp, {"train_batch_size_per_learner": 0}, "conf/ppo_portfolio_crypto.yaml")


def test_the_default_algorithm_is_one_constant():
    spelled = [f"{path.relative_to(REPO)}:{number}" for package in ("experiments", "algos", "envs")
               for path in (REPO / package).rglob("*.py")
               for number, line in enumerate(path.read_text().splitlines(), 1)
               if re.search(r"""get\(\s*["']algorithm["']\s*,\s*["']|default\s*=\s*["']dqn["']""", line)]
    assert spelled == []


def test_the_apis_names_are_real_imports():
    import experiments.api as package

    assert "__getattr__" not in vars(package)  # no lazy table a type checker reads as Any
    assert [name for name in package.__all__ if name not in vars(package)] == []
    assert package.run.__module__ == "experiments.api.runs" and package.Plan.__module__ == "experiments.api.result"


def test_a_dry_run_imports_no_mlflow_scoring_or_verdict_library():
    code = ("import sys\nfrom experiments.run import main\n"
            f"code = main([{str(REPO / 'conf' / 'dqn_btc.yaml')!r}, '--dry-run'])\n"
            f"print('\\nimported:', code, sorted(m for m in sys.modules if m.split('.')[0] in {NOT_IN_A_DRY_RUN!r} "
            f"or m in {NOT_IN_A_DRY_RUN!r}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "imported: 0 []"


# The modules of a run that print nothing: each reports through events.
SILENT = ("runs.py", "pipeline.py", "sweep_steps.py", "preflight.py", "side_by_side.py", "events.py")


@pytest.mark.parametrize("module", SILENT)
def test_the_run_modules_of_the_api_print_nothing(module):
    tree = ast.parse((REPO / "experiments" / "api" / module).read_text())
    calls = [ast.unparse(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)]
    assert [call for call in calls if call == "print" or call.endswith("console.print")] == []
    assert "terminal_console" not in (REPO / "experiments" / "api" / module).read_text()


@pytest.mark.parametrize("module", ["pipeline.py", "sweep_steps.py"])
def test_the_pipeline_is_named_steps_of_at_most_40_lines(module):
    tree = ast.parse((REPO / "experiments" / "api" / module).read_text())
    lengths = {node.name: node.end_lineno - node.lineno + 1 for node in ast.walk(tree)
               if isinstance(node, ast.FunctionDef)}
    assert {name: length for name, length in lengths.items() if length > 40} == {}


def test_the_sweep_steps_do_not_import_the_pipeline_back():
    """pipeline.py drives a run around sweep_steps.py; a step that reached back for a pipeline helper would tie the
    two into one module again (helpers both need live in options.py)."""
    tree = ast.parse((REPO / "experiments" / "api" / "sweep_steps.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert "experiments.api.pipeline" not in imported
