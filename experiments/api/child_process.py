"""Start one run in its own process: experiments/api/child.py with the experiment file as its one argument, handed
its overrides and typed `RunOptions` as JSON on stdin (no command line to rebuild or to parse again)."""
from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from experiments.api.options import RunOptions


def start(conf: str | Path, overrides: Sequence[str], options: RunOptions, output: IO[str],
          environment: dict[str, str] | None = None) -> subprocess.Popen:
    """One run in its own process (this interpreter, experiments.api.child, the file as its argument), handed its
    overrides and typed options on stdin; its output goes to `output`. For a run whose failure or memory must stay its
    own: a side-by-side experiment, or a study that measures the run's processes."""
    handed = json.dumps({"overrides": list(overrides), "options": json.loads(options.to_json())})
    process = subprocess.Popen([sys.executable, "-m", "experiments.api.child", str(conf)], stdout=output,
                               stderr=subprocess.STDOUT, stdin=subprocess.PIPE, text=True, env=environment)
    process.stdin.write(handed)
    process.stdin.close()
    return process
