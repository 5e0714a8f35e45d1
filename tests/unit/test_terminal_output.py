"""What the terminal shows: progress when piped, table cells, commands that run as printed."""
from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from experiments import shell
from experiments.api.console_view import events_to_console
from experiments.results.printing import format_cell, print_frame
from experiments.sweep import progress
from tests.conftest import REPO


def _trial(number: int) -> SimpleNamespace:
    return SimpleNamespace(trial_id=f"e5a84_{number:05d}", evaluated_params={"training/n_step": 3, "fold": number})


def _result(iteration: int, episode_return: float | None) -> dict:
    runners = {"num_env_steps_sampled_lifetime": 256 * iteration}
    if episode_return is not None:
        runners["episode_return_mean"] = episode_return
    return {"training_iteration": iteration, "time_total_s": iteration, "env_runners": runners,
            "evaluation": {"env_runners": {"episode_return_mean": 1.5 * iteration}}}


def _piped_progress(monkeypatch) -> tuple[progress.TrialProgress, io.StringIO]:
    """The sweep's callback, its events drawn as `experiments.run` draws them on a piped console."""
    out = io.StringIO()
    clock = iter(np.arange(0.0, 1000.0, 10.0))  # each call of the clock: 10 s later
    monkeypatch.setattr(progress.time, "monotonic", lambda: float(next(clock)))
    view = events_to_console(Console(file=out, width=240, soft_wrap=True))
    return progress.TrialProgress(view, {"training/n_step": "training.n_step"}), out


def test_piped_progress_prints_plain_lines_at_an_interval_and_keeps_the_last_return(monkeypatch):
    tracker, out = _piped_progress(monkeypatch)
    assert tracker.on_event.trials.is_live is False  # not a terminal: no live display
    trial = _trial(2)
    tracker.on_trial_start(0, [], trial)
    for iteration, value in enumerate([60.9, None, float("nan"), 73.1, None, None, None], start=1):
        tracker.on_trial_result(0, [], trial, _result(iteration, value))
    tracker.on_trial_complete(0, [], trial)
    tracker.on_experiment_end([])
    lines = out.getvalue().splitlines()
    events = [line.split(") ")[1].split(":")[0] for line in lines if line.startswith("[")]
    # 10 s per clock call: a "training" line at most every 30 s, not one per iteration.
    assert events[0] == "started" and events[-1] == "finished" and 1 <= events.count("training") < 7
    assert lines[0].startswith("[00:10] trial e5a84_00002 (n_step=3 fold=2) started")
    assert "episode return 73.1" in lines[-1 - lines[::-1].index(next(x for x in lines[::-1] if "finished" in x))]
    table = out.getvalue()[out.getvalue().index("Ray Tune sweep"):]
    assert "e5a84_00002" in table and "73.1" in table and "nan" not in table


def test_a_terminal_gets_the_live_table_and_no_lines(monkeypatch):
    console = Console(file=io.StringIO(), force_terminal=True, width=120)
    view = events_to_console(console)
    tracker = progress.TrialProgress(view, {})
    tracker.on_trial_start(0, [], _trial(1))
    assert view.trials.live is not None
    tracker.on_trial_result(0, [], _trial(1), _result(1, 5.0))
    view.close()
    assert "started" not in console.file.getvalue()


def test_without_a_view_the_sweep_reports_events_and_prints_nothing(capsys):
    events: list = []
    tracker = progress.TrialProgress(events.append, {"training/n_step": "training.n_step"})
    tracker.on_trial_start(0, [], _trial(3))
    tracker.on_trial_result(0, [], _trial(3), _result(1, 5.0))
    tracker.on_experiment_end([])
    assert capsys.readouterr() == ("", "")
    assert [type(event).__name__ for event in events] == ["TrialUpdate", "TrialUpdate", "TrialsEnded"]
    assert events[1].rows["e5a84_00003"]["episode return"] == "5"


@pytest.mark.parametrize("column, value, shown", [
    ("total_return", -0.2273, "-22.73%"), ("max_drawdown", 0.2895, "28.95%"), ("return_mean", 0.1538, "15.38%"),
    ("trades", 225.0, "225"), ("trades", 0.0, "0"), ("trades_median", 9.5, "9.5"), ("results", np.int64(2), "2"),
    ("trades_median", 23.75, "23.75"), ("agent_wins", 2.0, "2"), ("trades", 12345.0, "12,345"),
    ("sharpe", 3.72031, "3.720"), ("dsr_of_excess", float("nan"), "-"), ("episode_return_mean", 500.0, "500.000"),
    ("edge", "supported", "supported"),
])
def test_table_cells_are_formatted_by_what_the_column_holds(column, value, shown):
    assert format_cell(column, value) == shown


def test_a_frame_with_brackets_is_printed_verbatim():
    out = io.StringIO()
    frame = pd.DataFrame({"total_return": [0.1]}, index=["[agent]"])
    print_frame(Console(file=out, width=200), frame, title="scores [one seed]", first_column="strategy")
    assert "[agent]" in out.getvalue() and "[one seed]" in out.getvalue() and "10.00%" in out.getvalue()


def test_printed_commands_name_the_venv_when_it_is_not_activated(monkeypatch, tmp_path):
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setattr(sys, "executable", str(project / ".venv" / "bin" / "python"))
    monkeypatch.setattr(sys, "prefix", str(project / ".venv"))
    project.mkdir()
    monkeypatch.chdir(project)
    assert shell.python_command() == str(Path(".venv/bin/python"))
    assert shell.tool_command("mlflow") == str(Path(".venv/bin/mlflow"))
    text = "import it with python -m experiments.data import FILE, or `python -m experiments.run conf/x.yaml`"
    assert shell.runnable(text) == text.replace("python -m", ".venv/bin/python -m")
    assert shell.runnable("/usr/bin/python -m experiments.run") == "/usr/bin/python -m experiments.run"
    monkeypatch.chdir(elsewhere)  # outside the project: an absolute path
    assert shell.tool_command("mlflow") == str(project / ".venv" / "bin" / "mlflow")
    monkeypatch.setattr(sys, "prefix", sys.base_prefix)  # no venv: the PATH's python
    assert shell.python_command() == "python" and shell.tool_command("mlflow") == "mlflow"


LEAVING = """
import atexit, sys, threading, time
from experiments.shell import leave
atexit.register(lambda: print("atexit ran", file=sys.stderr))
if sys.argv[1] == "thread":
    threading.Thread(target=time.sleep, args=(0.3,)).start()
print("unflushed", end="")
leave(3)
print(" then the usual exit", end="")
sys.exit(4)
"""


@pytest.mark.parametrize("case, code, out", [("alone", 3, "unflushed"), ("thread", 4, "unflushed then the usual exit")])
def test_leave_ends_as_python_would_without_the_teardown(case, code, out):
    """`leave`: the code, the atexit handlers (once) and the buffered output; with a thread still running, Python's
    own exit (which waits for it)."""
    done = subprocess.run([sys.executable, "-c", LEAVING, case], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (code, out, "atexit ran\n")
