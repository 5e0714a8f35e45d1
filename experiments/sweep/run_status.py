"""What one experiment's run tells the run that started it (experiments/api/side_by_side.py), through a JSON file.

A run of several experiments starts each as its own `python -m experiments.run ... --status-file PATH`
process. The child keeps its phase (and when each phase began), its MLflow ids, its trial rows and, when it ends, its
evaluation files and timings in that file; the parent reads it to draw one live table for every experiment, to print
each evaluation, and to close the MLflow runs of a child that died without closing them. Writes replace the file whole,
so a reader never sees half of one.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

# How often trial rows are written at most (a result per trial per iteration would rewrite it constantly).
ROW_INTERVAL_S = 1.0


class StatusFile:
    """The child's side: `update(phase=..., ...)` merges fields and rewrites the file; no file, no effect."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.fields: dict[str, Any] = {}
        self.rows_written = 0.0

    def update(self, **fields: Any) -> None:
        if self.path is None:
            return
        if "phase" in fields:  # when each phase began (epoch seconds): where a run's time went (benchmark jobs)
            self.fields.setdefault("phase_started", {})[fields["phase"]] = time.time()
        self.fields.update(fields)
        temporary = self.path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps(self.fields, default=str))
        os.replace(temporary, self.path)

    def rows(self, rows: dict[str, dict[str, str]], force: bool = False) -> None:
        """The trial table's rows, at most every ROW_INTERVAL_S unless `force` (a trial started or ended)."""
        if self.path is None:
            return
        if force or time.monotonic() - self.rows_written >= ROW_INTERVAL_S:
            self.rows_written = time.monotonic()
            self.update(rows=list(rows.values()))


def read_status(path: Path) -> dict[str, Any]:
    """The parent's side: what the child wrote so far ({} before its first write)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
