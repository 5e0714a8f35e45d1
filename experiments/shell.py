"""Commands we print must run as printed, in a plain shell where the venv is not activated.

`python -m experiments.run ...` fails there with "No module named 'rich'" and `mlflow ui` with "command
not found": the printed form names the interpreter and tools of the venv we run in (`.venv/bin/python`,
`.venv/bin/mlflow`), relative to the working directory when the venv is below it.
"""
from __future__ import annotations

import atexit
import os
import re
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from envs.errors import InputError, RunFault
from experiments.records.exits import ExitCode

# Piped output (CI logs, `| tee`, nohup) is not cut into the terminal's 80 columns: text lines keep their
# length (soft wrap) and a table gets the width it needs up to this.
PIPED_TABLE_WIDTH = 240

_MODULE_COMMAND = re.compile(r"(?<![\w/.-])python -m (?=experiments\.)")


def _shown(path: Path) -> str:
    """`path` relative to the working directory when below it (shorter to read and to paste), else absolute."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def in_virtualenv() -> bool:
    return sys.prefix != sys.base_prefix


def python_command() -> str:
    """How to start this interpreter: `.venv/bin/python` in a venv, else `python` (on the PATH)."""
    return _shown(Path(sys.executable)) if in_virtualenv() else "python"


def tool_command(name: str) -> str:
    """How to start a console script installed beside this interpreter, e.g. `.venv/bin/mlflow`."""
    if not in_virtualenv():
        return name
    return _shown(Path(sys.executable).parent / (f"{name}.exe" if os.name == "nt" else name))


def runnable(text: str) -> str:
    """`text` with each `python -m experiments.…` made runnable as printed (`.venv/bin/python -m …`)."""
    return _MODULE_COMMAND.sub(f"{python_command()} -m ", text)


def terminal_console() -> Console:
    """The console of our CLIs: the terminal's width on a TTY; unwrapped lines when piped."""
    if sys.stdout.isatty():
        return Console()
    return Console(width=PIPED_TABLE_WIDTH, soft_wrap=True)


def exit_code(command: Callable[[], int], interrupted: str = "interrupted") -> int:
    """A CLI's exit code: its body's; bad input (an InputError) is one line on stderr and 2, a fault outside it
    (a RunFault) one line and 4, Ctrl-C 130 (experiments/records/exits.py). Every command ends through this
    (tests/unit/test_commands.py)."""
    try:
        return command()
    except (InputError, RunFault) as error:
        return ended_by(error)
    except KeyboardInterrupt:
        print(interrupted, file=sys.stderr)
        return ExitCode.INTERRUPTED


def leave(code: int) -> None:
    """End the process with `code` as Python's exit does (atexit handlers run, stdout and stderr flushed) but without
    tearing the interpreter down: unloading torch and RLlib (freeing their objects, their C++ static destructors)
    costs a `--dry-run` about a fifth of its time, for a command that holds nothing needing it. Returns, for the usual
    exit, while a non-daemon thread runs (Python would wait for it) or when flushing fails (Python says so)."""
    if any(thread is not threading.main_thread() and not thread.daemon for thread in threading.enumerate()):
        return
    atexit._run_exitfuncs()  # and unregisters them: the usual exit, if it comes, does not run them twice
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(code)


def ended_by(error: InputError | RunFault) -> ExitCode:
    """Say bad input (`error: ...`, exit 2) or a fault outside the run (`fault: ...`, exit 4) in its one line on
    stderr, with the commands in it runnable as printed; the exit code it ends with."""
    if isinstance(error, InputError):
        print(f"error: {runnable(str(error))}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    print(f"fault: {runnable(str(error))}", file=sys.stderr)
    return ExitCode.FAULT
