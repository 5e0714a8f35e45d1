"""What the API returns to Python: a dry run's `Plan`; for a run, the verdict as data, the scored trials with their
checkpoints, the registered models, the MLflow ids and the timings, so a notebook uses a run's result without parsing
printed tables or searching MLflow. `experiments.run` prints the same run; its exit code is `RunResult.exit_code`."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from experiments.records.exits import ExitCode

if TYPE_CHECKING:  # what a finished run holds; imported by the run that fills it, not by a dry run
    from experiments.api.preflight import Checked
    from experiments.plan.cluster import RayTarget
    from experiments.results.registry import Registered
    from experiments.results.scoring import GroupOutcome
    from experiments.results.verdict import Verdict


@dataclass
class Plan:
    """What `--dry-run` prints: the checked experiment (its resolved file, hardware plan, search space and RLlib
    param space) and the Ray cluster it would run on."""

    checked: Checked
    ray_target: RayTarget
    lines: list[str]

    @property
    def experiment(self) -> dict:
        """The resolved experiment file, as it will run."""
        return self.checked.exp.model_dump(mode="json")


@dataclass
class RunResult:
    experiment: str
    exit_code: ExitCode
    partial: list[str] = field(default_factory=list)       # what is missing from the plan (exit 3), or why it failed
    groups: dict[str, "GroupOutcome"] = field(default_factory=dict)  # per group (coin; "all" without one)
    models: list["Registered"] = field(default_factory=list)  # one per group: its URI and version, or why not
    ensembles: list["Registered"] = field(default_factory=list)  # with `ensemble:`, one per group: alias ensemble
    tracking_uri: str = ""
    experiment_id: str = ""
    parent_run_id: str = ""
    output_dir: Path | None = None                          # evaluation, verdict and importance files
    timings: dict[str, float] = field(default_factory=dict)  # seconds: plan, train, score, total
    work: dict[str, int] = field(default_factory=dict)       # override parses, env builds, checkpoint exports

    @property
    def status(self) -> str:
        return self.exit_code.status

    @property
    def ok(self) -> bool:
        return self.exit_code == ExitCode.OK

    def verdict(self, group: str | None = None) -> "Verdict | None":
        """The verdict of `group` (the only one when None); None for families that report no returns."""
        outcome = self._group(group)
        return outcome.verdict if outcome else None

    def verdict_table(self) -> pd.DataFrame:
        """One row per group and baseline: the agent's edge over it (DSR, at the effective N too, excess Sharpe
        against what luck reaches, folds won), PBO, the ledger's attempt and effective N, missing folds."""
        rows = []
        for group, outcome in self.groups.items():
            verdict = outcome.verdict
            if verdict is None:
                continue
            pbo = verdict.pbo.pbo if verdict.pbo is not None else math.nan
            for edge in verdict.edges:
                rows.append({"group": group, "baseline": edge.baseline, "dsr": edge.dsr,
                             "dsr_effective": edge.dsr_effective, "excess_sharpe": edge.sharpe,
                             "sharpe_luck": edge.sharpe_star, "wins": edge.wins, "folds": edge.folds,
                             "supported": edge.supported, "pbo": pbo, "attempt": verdict.attempt,
                             "configurations_tried": verdict.n_tried, "effective_n": verdict.n_effective,
                             "missing": verdict.missing})
        return pd.DataFrame(rows)

    def fold_table(self, group: str | None = None) -> pd.DataFrame:
        """Each fold's test part per strategy (agent and baselines): the verdict's per-fold rows."""
        verdict = self.verdict(group)
        return verdict.per_fold if verdict is not None else pd.DataFrame()

    def trials(self) -> pd.DataFrame:
        """Every scored trial: its group, fold, seed, configuration, checkpoint and test-part metrics."""
        rows = []
        for group, outcome in self.groups.items():
            for trial, report in outcome.scored:
                rows.append({"group": group, "trial_id": trial.trial_id, "fold": trial.fold, "seed": trial.seed,
                             "configuration": trial.point, "checkpoint": trial.checkpoint.path,
                             "iteration": trial.checkpoint.iteration, "validation": trial.checkpoint.score,
                             "chosen": trial is outcome.chosen, **report.agent_metrics})
        return pd.DataFrame(rows)

    def model_uri(self, group: str | None = None) -> str | None:
        """The registered model of `group` (the only one when None), e.g. models:/dqn_btc-smoke/3."""
        models = [m for m in self.models if m.uri and (group is None or m.group == group)]
        return models[0].uri if len(models) == 1 or (models and group is not None) else None

    def _group(self, group: str | None) -> "GroupOutcome | None":
        if group is None:
            return next(iter(self.groups.values())) if len(self.groups) == 1 else None
        return self.groups.get(group)


@dataclass
class RetrainResult:
    """A retrain's challenger run, the forward test of champion and challenger, and the gate's decision."""

    exit_code: ExitCode
    challenger: RunResult | None = None
    champion_version: str | None = None
    challenger_version: str | None = None
    refit_version: str | None = None   # the champion's refit through the newest bar (--refit), its `refit` alias
    promoted: bool = False
    decision: str = ""        # the gate's line
    forward: pd.DataFrame | None = None  # the forward window's table: champion, challenger, baselines

    @property
    def status(self) -> str:
        return self.exit_code.status
