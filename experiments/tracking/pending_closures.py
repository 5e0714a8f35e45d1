"""MLflow runs a run could not close because the tracking server was the thing that failed.

They would stay RUNNING in the UI forever. The run records them in `<output>/<experiment>/pending_closures.json`;
the next run of that experiment with the same --output (`--resume` included) closes them as the failed run would
have, before it opens anything of its own.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from mlflow.tracking import MlflowClient

from experiments.tracking.runs import close_open_children


@dataclass(frozen=True)
class PendingClosures:
    folder: Path  # <output>/<experiment>

    @property
    def path(self) -> Path:
        return self.folder / "pending_closures.json"

    def _read(self) -> list[dict[str, str]]:
        try:
            return list(json.loads(self.path.read_text()))
        except (OSError, ValueError):
            return []

    def record(self, tracking_uri: str, experiment_id: str, parent_run_id: str, status: str) -> bool:
        """Add one sweep's parent run (its open children are found through it); False when even this file
        cannot be written (the disk may be the other thing that failed)."""
        entries = [e for e in self._read() if e["parent_run_id"] != parent_run_id]
        entries.append({"tracking_uri": tracking_uri, "experiment_id": experiment_id, "parent_run_id": parent_run_id,
                        "status": status})
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            temporary = self.path.with_suffix(f".{os.getpid()}.tmp")
            temporary.write_text(json.dumps(entries, indent=2))
            os.replace(temporary, self.path)
        except OSError:
            return False
        return True

    def apply(self, client: MlflowClient, tracking_uri: str) -> list[str]:
        """Close what earlier runs recorded for this tracking URI; one line per sweep closed. Entries for other
        tracking URIs stay."""
        entries = self._read()
        mine = [e for e in entries if e["tracking_uri"] == tracking_uri]
        if not mine:
            return []
        lines = []
        for entry in mine:
            close_open_children(client, entry["experiment_id"], entry["parent_run_id"], entry["status"])
            client.set_terminated(entry["parent_run_id"], status=entry["status"])
            lines.append(f"closed MLflow run {entry['parent_run_id']} and its open trials as {entry['status']} (an "
                         "earlier run could not: its tracking server was down)")
        rest = [e for e in entries if e["tracking_uri"] != tracking_uri]
        if rest:
            self.path.write_text(json.dumps(rest, indent=2))
        else:
            self.path.unlink()
        return lines
