"""Checkpoints are pruned only once no saved state can still name them.

Tune deletes a trial's checkpoints beyond `num_to_keep` as soon as a newer one is registered, but saves the
experiment state, which names each trial's latest checkpoint (the one a resume restores from), only every few
seconds. A crash in between leaves a state that names a deleted checkpoint: measured after an S3 outage, the
resumed trial ended in ERROR. So Tune keeps every checkpoint, and this callback prunes: a checkpoint goes when
it is not among its trial's `keep` best by the selection score, not its newest, and older than the checkpoint
that the state saved in the storage names for the trial. No state saved before or after that one restores
from it.
"""
from __future__ import annotations

import math
import time
from typing import Any

from ray.tune import Callback

from algos.rllib.config import SELECTION_SCORE
from experiments.storage.filesystem import Storage
from experiments.storage.resume_check import newest_state_file, trial_checkpoints

PRUNE_INTERVAL_S = 10.0  # reading the saved state costs a few ms per trial: at most this often while training


def _name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]  # checkpoint_000012: the names sort in the order they were written


class CheckpointPruner(Callback):
    def __init__(self, storage: Storage, tune_dir: str, keep: int, mode: str) -> None:
        self.storage = storage
        self.tune_dir = tune_dir
        self.keep = keep
        self.mode = mode
        self.deleted: set[str] = set()
        self.pruned_at = 0.0

    def _saved_names(self) -> dict[str, str]:
        """Trial id -> the checkpoint name the newest saved state resumes it from ({} before the first save)."""
        newest = newest_state_file(self.storage, self.tune_dir)
        if newest is None:
            return {}
        try:
            named = trial_checkpoints(self.storage, newest)
        except (ValueError, KeyError, TypeError, EOFError, AttributeError, OSError):
            return {}  # being rewritten, or damaged: prune nothing this time
        return {trial_id: _name(path) for trial_id, _, path in named if path}

    def removable(self, trial: Any, saved: str | None, keep_newest: bool = True) -> list[str]:
        """Paths of `trial`'s checkpoints that no resume can need and that are not among its best."""
        results = [r for r in trial.run_metadata.checkpoint_manager.best_checkpoint_results
                   if r.checkpoint.path not in self.deleted]
        if len(results) <= self.keep or saved is None:
            return []
        newest = max(results, key=lambda r: _name(r.checkpoint.path)) if keep_newest else None

        def score(result: Any) -> float:
            value = float(result.metrics.get(SELECTION_SCORE, math.nan))
            return -math.inf if math.isnan(value) else (value if self.mode == "max" else -value)

        best = {r.checkpoint.path for r in sorted(results, key=score, reverse=True)[:self.keep]}
        return [r.checkpoint.path for r in results
                if r.checkpoint.path not in best and r is not newest and _name(r.checkpoint.path) < saved]

    def prune(self, trials: list, final: bool = False) -> None:
        """Delete what no resume can need. At the end of a sweep Tune has saved the state that names every
        trial's newest checkpoint: the best stay, and the newest of a trial that did not finish (a resume
        restarts it from there), as Tune's own pruning leaves them."""
        self.pruned_at = time.monotonic()
        saved = {} if final else self._saved_names()
        for trial in trials:
            name = "~" if final else saved.get(trial.trial_id)  # "~" sorts after every checkpoint name
            for path in self.removable(trial, name, keep_newest=not final or trial.status != "TERMINATED"):
                try:
                    self.storage.filesystem.delete_dir(path)
                except OSError:
                    continue  # gone already, or the storage is down: the next prune tries again
                self.deleted.add(path)

    def on_checkpoint(self, iteration: int, trials: list, trial: Any, checkpoint: Any, **info: Any) -> None:
        if time.monotonic() - self.pruned_at >= PRUNE_INTERVAL_S:
            self.prune(trials)

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        self.prune(trials, final=True)
