"""After the sweep: score out of sample, per group (e.g. coin), and judge; values only, no side effects.

Env families that report per-period returns (trading) get a verdict: every trial's best checkpoint
(by validation) is backtested once on its own fold's test part, per fold the configuration with the
best mean validation score over seeds is the agent, and `experiments.results.verdict` judges the agent across
folds and seeds against every baseline. Other families (test prioritization, any Gymnasium id) score
the best trial on the held-out part, as one split and one seed.

In both cases the chosen model is the one you would deploy: the configuration chosen on the most
recent fold's validation part, its seed with the best validation score. With `ensemble:` in the file, each fold's
chosen trials also make one more strategy, their mean decision, scored and judged beside it
(experiments/results/ensembles.py).

`judge_sweep` returns a `Judgement`; experiments/results/printing.py prints it, mlflow_logging.py logs it (and
records the attempt in the trials ledger), registry.py registers each group's chosen model.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from envs.abilities import Backtests
from envs.report import EvaluationReport
from experiments.config.experiment import ExperimentConfig
from experiments.records.params import ParamSpace
from experiments.results.ensembles import EnsembleOutcome, judge_ensemble
from experiments.results.evaluate import evaluate_checkpoint
from experiments.results.importance import feature_importance
from experiments.results.trials import (
    CheckpointReader,
    Trial,
    deployable,
    missing_groups,
    missing_trials,
    trials_by_group,
)
from experiments.results.trials_ledger import LedgerKey, LedgerRun
from experiments.results.verdict import ScoredTrial, Verdict, build_verdict, family_threshold

# What scoring says of a long step: its text when it begins (a terminal shows a spinner), None when it ends.
ShowStatus = Callable[[str | None], None]


@contextmanager
def showing(status: ShowStatus, text: str) -> Iterator[None]:
    """`text` is the status while the block runs, and ends with it, raised or not."""
    status(text)
    try:
        yield
    finally:
        status(None)


def score(trial: Trial, exp: ExperimentConfig, reader: CheckpointReader) -> EvaluationReport:
    """The trial's best checkpoint on its fold's test part (the scorer always uses the test part)."""
    return evaluate_checkpoint(reader.policy(trial.checkpoint, exp.spec), exp.family, trial.env_config)


@dataclass
class GroupOutcome:
    """What scoring one group produced."""

    group: str
    chosen: Trial                                  # the one to register and deploy
    report: EvaluationReport                       # the chosen trial on its test part
    scored: list[tuple[Trial, EvaluationReport]]   # every trial scored (only the chosen one without a verdict)
    verdict: Verdict | None                        # None for families that report no returns
    importance: pd.DataFrame | None = None         # feature x fold: validation return drop when permuted
    market: str = ""                               # what the group's data is, e.g. "BTC-USD 1h (Bitstamp)"
    ledger_key: LedgerKey | None = None            # where the trials ledger records this verdict's attempt
    points: list[str] = field(default_factory=list)  # the searched configurations the verdict tried
    ensemble: EnsembleOutcome | None = None        # `ensemble:` in the file: its members' mean decision, judged too


@dataclass
class Judgement:
    """Every group's outcome, what is missing from the plan, and the DSR an edge needed."""

    groups: dict[str, GroupOutcome]
    partial: list[str]  # failed trials and groups with no scored trial
    threshold: float

    def verdicts(self) -> dict[str, Verdict]:
        return {group: outcome.verdict for group, outcome in self.groups.items() if outcome.verdict is not None}


def judge_group(trials: list[Trial], exp: ExperimentConfig, status: ShowStatus, threshold: float,
                reader: CheckpointReader, ledger: LedgerRun | None = None) -> GroupOutcome:
    """Score a group's trials and, where the family reports returns, build its verdict (an edge needs a
    DSR of at least `threshold`), deflated for every configuration the trials ledger already holds on the same data
    and windows (read, not written: logging records this attempt). Each long step is said to `status`."""
    if not isinstance(exp.family, Backtests):
        chosen = deployable(trials, exp.tune.mode)
        report = score(chosen, exp, reader)
        ensemble = (judge_ensemble(exp, trials, {chosen.fold: chosen.point}, reader, threshold, None, None, "")
                    if exp.ensemble else None)
        return GroupOutcome(chosen.group, chosen, report, [(chosen, report)], None,
                            market=report.data_label or exp.family.data_label(chosen.env_config), ensemble=ensemble)
    with showing(status, f"backtesting {len(trials)} trial(s) on their folds' test parts"):
        scored = [(t, score(t, exp, reader)) for t in sorted(trials, key=lambda t: (t.fold, t.point, t.seed))]
    first = scored[0][1]
    key = (LedgerKey(first.data_digest, first.windows, first.data_label, first.file_digest or "")
           if first.data_digest and ledger else None)
    prior = ledger.prior(key) if key else None
    verdict = build_verdict([ScoredTrial(t.fold, t.seed, t.point, t.checkpoint.score, r, t.curve) for t, r in scored],
                            exp.tune.mode, first.periods_per_year, threshold, prior, missing_trials(trials, exp))
    if key:
        verdict.ledger_key = key.id
    chosen = deployable(trials, exp.tune.mode, verdict.selected[max(t.fold for t in trials)])
    report = next(r for t, r in scored if t is chosen)
    per_fold = {fold: [t for t in trials if t.fold == fold and t.point == point]
                for fold, point in verdict.selected.items()}
    with showing(status, "permuting each feature on the validation parts"):
        importance = feature_importance(exp, per_fold, reader)
    ensemble = None
    if exp.ensemble:
        with showing(status, f"backtesting the ensemble over {exp.ensemble.over} of each fold"):
            ensemble = judge_ensemble(exp, trials, verdict.selected, reader, threshold, verdict, prior,
                                      missing_trials(trials, exp))
    return GroupOutcome(chosen.group, chosen, report, scored, verdict, importance,
                        market=report.data_label or exp.family.data_label(chosen.env_config), ledger_key=key,
                        points=sorted({t.point for t in trials}), ensemble=ensemble)


def judge_sweep(exp: ExperimentConfig, results: Any, params: ParamSpace, reader: CheckpointReader, status: ShowStatus,
                ledger: LedgerRun | None = None) -> Judgement:
    """Score and judge every group of the sweep's results. `partial` lists what is missing from the plan (failed
    trials, lost folds, seeds or groups); registration adds a model it could not register."""
    groups = trials_by_group(results, params, exp)
    failed = [r for r in results if r.error is not None]
    partial = [f"{len(failed)} of {len(results)} trial(s) failed: "
               f"{'; '.join(str(r.error).strip().splitlines()[-1][:160] for r in failed[:3])}"] if failed else []
    partial += [f"{exp.tune.group_by.split('.')[-1]} {group}: no trial scored" for group in missing_groups(groups, exp)]
    threshold = family_threshold(len(groups))  # 0.95 for one group; stricter when many are judged at once
    outcomes = {group: judge_group(trials, exp, status, threshold, reader, ledger) for group, trials in groups.items()}
    return Judgement(outcomes, partial, threshold)
