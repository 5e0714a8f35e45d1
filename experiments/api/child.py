"""One experiment of a side-by-side run, in its own process (failure and memory isolation): it reads the file, its
overrides and its typed `RunOptions` as JSON on stdin, runs `api.run`, and exits with the run's code. The parent
(experiments/api/side_by_side.py, through experiments/api/child_process.py) reads its progress from the status file named in its options."""
from __future__ import annotations

import json
import sys


def main() -> int:
    from experiments.api.options import RunOptions
    from experiments.api.runs import run
    from experiments.shell import exit_code, terminal_console

    def run_handed() -> int:
        handed = json.loads(sys.stdin.read())
        options = RunOptions.from_json(json.dumps(handed["options"]))
        return int(run(handed["conf"], handed["overrides"], options, terminal_console()).exit_code)

    return exit_code(run_handed)


if __name__ == "__main__":
    sys.exit(main())
