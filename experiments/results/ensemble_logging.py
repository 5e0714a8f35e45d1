"""What a run logs of its ensembles (`ensemble:` in the experiment file), beside experiments/results/mlflow_logging.py,
whose report and verdict files it reuses: per group one MLflow run of the ensemble under the sweep's parent (the
deployed fold's test-part scores and report, which its registered model is attached to, and its verdict's files and
metrics), the verdict's metrics and tags on the parent under `ensemble/`, and the ensemble's attempt in the trials
ledger: one more attempt, of its own, under `ensemble_attempt_id`."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from mlflow.entities import RunTag
from mlflow.tracking import MlflowClient

from experiments.results.ensembles import ENSEMBLE, EnsembleOutcome
from experiments.results.mlflow_logging import log_report, log_verdict
from experiments.results.scoring import Judgement
from experiments.results.trials import ALL
from experiments.results.trials_ledger import LedgerRun, ensemble_attempt_id
from experiments.results.verdict import ScoredTrial
from experiments.tracking.runs import log_metrics, sanitize_key

if TYPE_CHECKING:
    from experiments.storage.sweep_state import SweepState


def log_ensembles(client: MlflowClient, state: "SweepState", judgement: Judgement, out_dir: Path,
                  ledger: LedgerRun | None) -> dict[str, str]:
    """Log each group's ensemble (module docstring); returns each group's ensemble run id, which registration attaches
    the ensemble's model to."""
    runs: dict[str, str] = {}
    for group, outcome in judgement.groups.items():
        ensemble = outcome.ensemble
        if ensemble is None or ensemble.deployed is None:
            continue
        named = None if group == ALL else group
        suffix = "" if named is None else f"/{named}"
        run_id = _ensemble_run(client, state, ensemble, named)
        runs[group] = run_id
        folder = out_dir / f"{ENSEMBLE}{suffix}"
        log_report(client, [run_id], ensemble.deployed.report, folder / "evaluation")
        verdict = ensemble.verdict
        if verdict is not None:
            scored = [(ScoredTrial(fold, 0, ENSEMBLE, float("nan"), made.report), made.report)
                      for fold, made in ensemble.folds.items()]
            log_verdict(client, run_id, verdict, scored, folder / "verdict", None)
            prefix = f"{ENSEMBLE}/{'' if named is None else named + '/'}"
            log_metrics(client, state.parent_run_id, {sanitize_key(prefix + key): value
                                                      for key, value in verdict.metrics().items()}, step=0)
            client.log_batch(state.parent_run_id, tags=[
                RunTag(f"{ENSEMBLE}.{'' if named is None else named + '.'}{tag}", value)
                for tag, value in verdict.tags().items() if tag.startswith("verdict.")])
            if ledger is not None and outcome.ledger_key is not None:
                own = dataclasses.replace(ledger, run_id=ensemble_attempt_id(state.parent_run_id, named))
                own.record(outcome.ledger_key, ensemble.configurations, verdict.returns)
        client.set_terminated(run_id, "FINISHED")
    return runs


def _ensemble_run(client: MlflowClient, state: "SweepState", ensemble: EnsembleOutcome, group: str | None) -> str:
    """A child run of the sweep's parent for the group's ensemble, tagged with what it is and who its members are."""
    deployed = ensemble.deployed
    members = "; ".join(f"fold {fold}: " + ", ".join(f"{t.point} seed {t.seed}" for t in made.members)
                        for fold, made in ensemble.folds.items())
    tags = {"mlflow.parentRunId": state.parent_run_id, "role": ENSEMBLE, "ensemble.over": ensemble.over,
            "ensemble.decision": deployed.policy.describe(), "ensemble.members": members[:5000],
            "fold": str(deployed.fold)}
    name = f"{ENSEMBLE}-{ensemble.over}" + ("" if group is None else f"-{group}")
    return client.create_run(state.experiment_id, run_name=name, tags=tags).info.run_id
