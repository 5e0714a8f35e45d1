"""One experiment of a side-by-side run, in its own process (failure and memory isolation): `python -m
experiments.api.child FILE` reads its overrides and typed `RunOptions` as JSON on stdin, runs `api.run` on FILE, and
exits with the run's code. The file is the one argument, so `ps` shows which experiment each child is. The parent
(experiments/api/side_by_side.py, through experiments/api/child_process.py) reads its progress from the status file
named in its options."""
from __future__ import annotations

import json
import sys


def main() -> int:
    from experiments.api.console_view import events_to_console
    from experiments.api.options import RunOptions
    from experiments.api.runs import run
    from experiments.shell import exit_code, terminal_console

    def run_handed() -> int:
        handed = json.loads(sys.stdin.read())
        options = RunOptions.from_json(json.dumps(handed["options"]))
        view = events_to_console(terminal_console())  # into the child's log file, as a single run prints
        try:
            return int(run(sys.argv[1], handed["overrides"], options, on_event=view).exit_code)
        finally:
            view.close()

    return exit_code(run_handed)


if __name__ == "__main__":
    sys.exit(main())
