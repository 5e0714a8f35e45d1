"""The ensemble of a group's chosen trials (`ensemble:` in the experiment file), judged as one more strategy; values
only, like experiments/results/scoring.py, which calls it.

Per fold, its members are the trials the single chosen trial comes from: the seeds of the configuration chosen on the
fold's validation part (`over: seeds`), or every configuration and seed of the fold (`over: configurations`); their
checkpoints are the ones already scored and exported (CheckpointReader keeps each export). The ensemble's decision is
the mean of its members' (algos/export/ensemble_policy.py); it is scored by the family's scorer on the same test
part, and its
verdict (families with folds) is built by experiments/results/verdict.py as for any strategy: its walk-forward returns,
a DSR over every baseline, deflated by every configuration the trials ledger holds, this run's trials and the ensemble
itself (one more attempt: logging records it as its own), with the caveat "one seed" read from its members' seeds.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from algos.export.ensemble_policy import EnsemblePolicy, ensemble_for
from envs.errors import InputError
from envs.report import EvaluationReport
from experiments.config.experiment import ExperimentConfig
from experiments.results.evaluate import evaluate_checkpoint
from experiments.results.trials import CheckpointReader, Trial
from experiments.results.verdict import PriorTrials, ScoredTrial, Verdict, build_verdict, configuration_series

ENSEMBLE = "ensemble"  # its configuration's name in the verdict and the trials ledger, its alias in the registry


@dataclass(frozen=True)
class FoldEnsemble:
    """One fold's ensemble: its members, its policy and its score on the fold's test part."""

    fold: int
    members: list[Trial]
    policy: EnsemblePolicy
    report: EvaluationReport

    @property
    def env_config(self) -> dict:
        return self.members[0].env_config

    def describe(self) -> str:
        """E.g. 'fold 2: the mean of 2 members' weights (seeds 0, 1 of lr=0.0003)'."""
        points = sorted({t.point for t in self.members})
        seeds = ", ".join(str(s) for s in sorted({t.seed for t in self.members}))
        return f"fold {self.fold}: {self.policy.describe()} (seeds {seeds} of {'; '.join(points)})"


@dataclass
class EnsembleOutcome:
    """A group's ensemble per fold, its verdict (None for families that report no returns), and what was left out."""

    over: str
    folds: dict[int, FoldEnsemble] = field(default_factory=dict)
    verdict: Verdict | None = None
    refused: str = ""                               # why no ensemble was made ("" when one was)
    left_out: list[str] = field(default_factory=list)  # folds with fewer than two members

    @property
    def deployed(self) -> FoldEnsemble | None:
        """The most recent fold's ensemble, which is registered (None when that fold has none)."""
        return self.folds[max(self.folds)] if self.folds else None

    @property
    def configurations(self) -> list[str]:
        """What the trials ledger records this attempt's one configuration as."""
        return [f"{ENSEMBLE} over {self.over}"]

    def sharpe(self) -> tuple[float, float]:
        """Its test Sharpe's mean and spread over folds."""
        values = [fold.report.table.loc["agent", "sharpe"] for fold in self.folds.values()]
        return float(np.mean(values)), float(np.std(values))


def ensemble_members(trials: list[Trial], over: str, selected: dict[int, str], mode: str) -> dict[int, list[Trial]]:
    """Per fold, the trials an ensemble averages: the seeds of the fold's selected configuration, or all its trials;
    one per configuration and seed (a point the search drew twice is one member: its best by validation)."""
    pick = max if mode == "max" else min
    members: dict[int, list[Trial]] = {}
    for fold, point in sorted(selected.items()):
        repeats: dict[tuple[str, int], list[Trial]] = {}
        for t in trials:
            if t.fold == fold and (over == "configurations" or t.point == point):
                repeats.setdefault((t.point, t.seed), []).append(t)
        members[fold] = [pick(same, key=lambda t: t.checkpoint.score) for _, same in sorted(repeats.items())]
    return members


def with_this_run(prior: PriorTrials | None, verdict: Verdict) -> PriorTrials:
    """What the ensemble's verdict deflates by before itself: the ledger's earlier attempts and this run's trials (the
    single chosen trial's verdict is this run's attempt; the ensemble is one more)."""
    prior = prior or PriorTrials()
    own = verdict.returns.add_prefix("this run: ")
    return PriorTrials(trial_returns=pd.concat([prior.trial_returns, own], axis=1),
                       configuration_returns=pd.concat([prior.configuration_returns, configuration_series(own)],
                                                       axis=1),
                       configurations=prior.configurations + verdict.n_configurations, attempts=prior.attempts + 1,
                       note=prior.note)


def judge_ensemble(exp: ExperimentConfig, trials: list[Trial], selected: dict[int, str], reader: CheckpointReader,
                   threshold: float, single: Verdict | None, prior: PriorTrials | None,
                   missing: str) -> EnsembleOutcome:
    """Make, score and (with `single`, the single chosen trial's verdict) judge the group's ensemble per fold of
    `selected` (fold -> the configuration chosen on its validation part). A member numpy cannot run, or members that
    read different inputs, leave the group without an ensemble, said in `refused`."""
    over = exp.ensemble.over
    outcome = EnsembleOutcome(over)
    for fold, members in ensemble_members(trials, over, selected, exp.tune.mode).items():
        if len(members) < 2:
            outcome.left_out.append(f"fold {fold}: {len(members)} member(s) scored, an ensemble needs two")
            continue
        try:
            policy = ensemble_for([reader.numpy_policy(t.checkpoint, exp.spec) for t in members],
                                  members[0].env_config)
        except InputError as refusal:
            outcome.refused = f"no ensemble: {refusal}"
            return outcome
        report = evaluate_checkpoint(policy, exp.family, members[0].env_config)
        outcome.folds[fold] = FoldEnsemble(fold, members, policy, report)
    if not outcome.folds:
        outcome.refused = f"no ensemble: {'; '.join(outcome.left_out)}"
    elif single is not None:
        scored = [ScoredTrial(fold, 0, ENSEMBLE, float(np.mean([t.checkpoint.score for t in made.members])),
                              made.report) for fold, made in outcome.folds.items()]
        seeds = len({t.seed for made in outcome.folds.values() for t in made.members})
        left_out = "; ".join(outcome.left_out)
        outcome.verdict = build_verdict(scored, exp.tune.mode, scored[0].report.periods_per_year, threshold,
                                        with_this_run(prior, single), "; ".join(p for p in (missing, left_out) if p),
                                        seeds_spanned=seeds)
    return outcome
