"""One vocabulary for how a run ends: the exit code every command returns, the sweep's state-file status and the
MLflow run status, each named once here (docs/faults.md says what a user does about each).

0 done; 1 a failed run (no trial could be scored, every listed experiment failed); 2 bad input (one readable line,
nothing written); 3 a partial result (a trial failed, a planned fold or seed is missing, a model was not registered,
some listed experiments failed); 4 a fault outside the run (tracking server, storage, disk, a lost cluster); 130
interrupted (Ctrl-C).
"""
from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1
    BAD_INPUT = 2
    PARTIAL = 3
    FAULT = 4
    INTERRUPTED = 130

    @property
    def status(self) -> str:
        """The word a result and a parent run read: ok, failed, bad_input, partial, fault, interrupted."""
        return self.name.lower()


# The sweep's state file (experiments/storage/sweep_state.py): what `--resume` finds.
SWEEP_RUNNING, SWEEP_FINISHED, SWEEP_PARTIAL, SWEEP_FAILED, SWEEP_INTERRUPTED = (
    "running", "finished", "partial", "failed", "interrupted")
# MLflow's run statuses (mlflow.entities.RunStatus names), without importing MLflow where only the words are needed.
MLFLOW_FINISHED, MLFLOW_FAILED, MLFLOW_KILLED = "FINISHED", "FAILED", "KILLED"
