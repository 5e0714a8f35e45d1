"""After the sweep: score out of sample, per group (e.g. coin), judge, and register the policy to deploy.

Env families that report per-period returns (trading) get a verdict: every trial's best checkpoint
(by validation) is backtested once on its own fold's test part, per fold the configuration with the
best mean validation score over seeds is the agent, and `experiments.results.verdict` judges the agent across
folds and seeds against every baseline. Other families (test prioritization, any Gymnasium id) score
the best trial on the held-out part, as one split and one seed.

In both cases the registered model is the one you would deploy: the configuration chosen on the most
recent fold's validation part, its seed with the best validation score.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from rich.console import Console
from rich.markup import escape

import envs
from envs.report import EvaluationReport
from experiments.config.experiment import ExperimentConfig
from experiments.plan.provenance import git_commit
from experiments.results.evaluate import evaluate_checkpoint, log_report, print_frame, print_report
from experiments.results.importance import describe as describe_importance
from experiments.results.importance import feature_importance, log_importance
from experiments.results.policy import load_module_policy
from experiments.results.registry import model_meaning, name_for_meaning, register_policy, registered_name
from experiments.results.report import group_table, log_verdict, print_verdict
from experiments.results.trials import (
    ALL,
    CheckpointReader,
    Trial,
    deployable,
    missing_groups,
    missing_trials,
    planned_folds,
    trials_by_group,
)
from experiments.results.trials_ledger import LedgerKey, LedgerRun
from experiments.results.verdict import ScoredTrial, Verdict, build_verdict, family_threshold
from experiments.shell import runnable
from experiments.storage.filesystem import Storage
from experiments.sweep.tuner import ParamSpace
from experiments.tracking.runs import log_metrics, run_of_trial

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

    from experiments.storage.sweep_state import SweepState

def score(trial: Trial, exp: ExperimentConfig, reader: CheckpointReader) -> EvaluationReport:
    """The trial's best checkpoint on its fold's test part (the scorer always uses the test part)."""
    policy = load_module_policy(reader.module(trial.checkpoint), exp.spec.greedy)
    return evaluate_checkpoint(policy, exp.family, trial.env_config)


@dataclass
class GroupOutcome:
    """What scoring one group produced."""

    group: str
    chosen: Trial                                  # the one to register and deploy
    report: EvaluationReport                       # the chosen trial on its test part
    scored: list[tuple[Trial, EvaluationReport]]   # every trial scored (only the chosen one without a verdict)
    verdict: Verdict | None                        # None for families that report no returns
    importance: pd.DataFrame | None = None         # feature x fold: validation return drop when permuted


def judge_group(trials: list[Trial], exp: ExperimentConfig, console: Console, threshold: float,
                reader: CheckpointReader, ledger: LedgerRun | None = None) -> GroupOutcome:
    """Score a group's trials and, where the family reports returns, build its verdict (an edge needs a
    DSR of at least `threshold`), deflated for every configuration the trials ledger holds on the same data and
    windows; the attempt is recorded there."""
    if not exp.family.folds:
        chosen = deployable(trials, exp.tune.mode)
        report = score(chosen, exp, reader)
        return GroupOutcome(chosen.group, chosen, report, [(chosen, report)], None)
    with console.status(f"backtesting {len(trials)} trial(s) on their folds' test parts"):
        scored = [(t, score(t, exp, reader)) for t in sorted(trials, key=lambda t: (t.fold, t.point, t.seed))]
    first = scored[0][1]
    key = (LedgerKey(first.data_digest, first.windows, first.data_label, first.file_digest or "")
           if first.data_digest and ledger else None)
    prior = ledger.prior(key) if key else None
    verdict = build_verdict([ScoredTrial(t.fold, t.seed, t.point, t.checkpoint.score, r) for t, r in scored],
                            exp.tune.mode, first.periods_per_year, threshold, prior, missing_trials(trials, exp))
    if key:
        verdict.ledger_key = key.id
        ledger.record(key, sorted({t.point for t in trials}), verdict.returns)
    chosen = deployable(trials, exp.tune.mode, verdict.selected[max(t.fold for t in trials)])
    report = next(r for t, r in scored if t is chosen)
    per_fold = {fold: [t for t in trials if t.fold == fold and t.point == point] for fold, point in verdict.selected.items()}
    with console.status("permuting each feature on the validation parts"):
        importance = feature_importance(exp, per_fold, reader)
    return GroupOutcome(chosen.group, chosen, report, scored, verdict, importance)


def score_sweep(exp: ExperimentConfig, results: Any, params: ParamSpace, client: "MlflowClient",
                state: "SweepState", storage: Storage, out_dir: Path, console: Console,
                ledger: LedgerRun | None = None) -> list[str]:
    """Score every group, print and log its verdict (or report), record it in the trials ledger, and register
    its deployable policy. Returns what is missing from the plan (failed trials, lost folds, seeds or groups,
    models not registered): nothing when the run is whole."""
    groups = trials_by_group(results, params, exp)
    failed = [r for r in results if r.error is not None]
    partial = [f"{len(failed)} of {len(results)} trial(s) failed: "
               f"{'; '.join(str(r.error).strip().splitlines()[-1][:160] for r in failed[:3])}"] if failed else []
    partial += [f"{exp.tune.group_by.split('.')[-1]} {group}: no trial scored" for group in missing_groups(groups, exp)]
    for line in partial:
        console.print(f"[yellow]partial: {escape(line)}[/yellow]")
    verdicts: dict[str, Verdict] = {}
    threshold = family_threshold(len(groups))  # 0.95 for one group; stricter when many are judged at once
    reader = CheckpointReader(storage, out_dir / "downloaded")
    for group, trials in groups.items():
        outcome = judge_group(trials, exp, console, threshold, reader, ledger)
        named = None if group == ALL else group
        suffix = "" if named is None else f"/{named}"
        for trial, report in outcome.scored:  # each child run gets its own test-part scores
            run_id = run_of_trial(client, state.experiment_id, state.parent_run_id, trial.trial_id)
            if run_id:
                log_metrics(client, run_id, report.agent_metrics, step=0)
        chosen_run = run_of_trial(client, state.experiment_id, state.parent_run_id, outcome.chosen.trial_id)
        if outcome.verdict is not None:
            verdicts[group] = outcome.verdict
            market = outcome.report.data_label or exp.family.data_label(outcome.chosen.env_config)
            if len(groups) == 1:
                print_verdict(console, outcome.verdict, market)
            else:
                console.print(escape(f"{group} ({market}, {outcome.verdict.scope()}): {outcome.verdict.lines()[0]}"))
            log_verdict(client, state.parent_run_id, outcome.verdict, outcome.scored, out_dir / f"verdict{suffix}",
                        named)
        if outcome.importance is not None:
            if len(groups) == 1:
                console.print(escape(describe_importance(outcome.importance)))
            log_importance(client, state.parent_run_id, outcome.importance, out_dir / f"importance{suffix}", named)
        else:
            print_report(console, outcome.report)
        log_report(client, [r for r in (state.parent_run_id, chosen_run) if r], outcome.report,
                   out_dir / f"evaluation{suffix}", artifact_path=f"evaluation{suffix}",
                   parent_prefix=f"eval{suffix}", parent_run_id=state.parent_run_id)
        if outcome.verdict is not None and outcome.verdict.missing:
            partial.append(f"{'' if named is None else named + ': '}{outcome.verdict.missing}")
        refused = _register(exp, outcome, client, state, chosen_run, suffix, reader, console)
        partial += [refused] if refused else []
    if len(verdicts) > 1:
        table = group_table(verdicts)
        headline = next(iter(verdicts.values())).edges[0].baseline
        path = out_dir / "per_group.csv"
        table.to_csv(path)
        client.log_artifact(state.parent_run_id, str(path), "verdict")
        print_frame(console, table, first_column=exp.tune.group_by.split(".")[-1],
                    title=f"Verdict per {exp.tune.group_by.split('.')[-1]} (agent vs {headline} over its folds; "
                          f"an edge needs DSR >= {threshold:.4g}: 0.95 adjusted for {len(verdicts)} verdicts at once)")
    return partial


def _register(exp: ExperimentConfig, outcome: GroupOutcome, client: "MlflowClient", state: "SweepState",
              chosen_run: str | None, suffix: str, reader: CheckpointReader, console: Console) -> str:
    """Register the group's deployable policy; the parent run records which checkpoint it is. The plan deploys
    the most recent fold: when that fold has no scored trial nothing is registered, and the reason is returned
    ("" when registered)."""
    chosen = outcome.chosen
    group = None if outcome.group == ALL else outcome.group
    promised = max(planned_folds(exp))
    if chosen.fold != promised:
        refused = (f"{'' if group is None else group + ': '}no model registered: fold {promised}, the most recent, "
                   f"which the plan deploys, has no scored trial (fold {chosen.fold} has; it is not deployed in its "
                   "place)")
        console.print(f"[yellow]{escape(refused)}[/yellow]")
        return refused
    env_id = exp.environment.env
    model_name, reasons = registered_name(exp.name, exp.overridden, chosen.env_config, group, exp.smoke_test,
                                          exp.family.data_keys)
    observations, action_space = example_observations(exp.family, chosen.env_config)
    meaning = model_meaning(exp.algorithm, observations.shape[1:], action_space, chosen.env_config)
    model_name, conflict = name_for_meaning(client, model_name, meaning)
    reasons += [conflict] if conflict else []
    tags = {"smoke_test": str(exp.smoke_test), "experiment": exp.name, "algorithm": exp.algorithm, "env": env_id,
            "data": exp.family.data_label(chosen.env_config), "fold": str(chosen.fold), "seed": str(chosen.seed),
            "parent_run_id": state.parent_run_id, "git_commit": git_commit(), **meaning,
            **outcome.report.model_tags}
    input_reader = exp.family.input_reader
    inputs = exp.family.reader_class().for_env_config(chosen.env_config) if input_reader else None
    uri = register_policy(state.tracking_uri, chosen_run or state.parent_run_id, reader.module(chosen.checkpoint),
                          model_name, observations, tags, exp.spec.greedy, inputs, input_reader)
    client.set_tag(state.parent_run_id, f"best_checkpoint{suffix}", reader.storage.display(chosen.checkpoint.path))
    client.set_tag(state.parent_run_id, f"best_checkpoint_iteration{suffix}", str(chosen.checkpoint.iteration))
    client.set_tag(state.parent_run_id, f"best_checkpoint_score{suffix}", repr(chosen.checkpoint.score))
    client.log_artifacts(state.parent_run_id, str(reader.whole(chosen.checkpoint)), f"best_checkpoint{suffix}")
    console.print(escape(f"registered {uri}: fold {chosen.fold}'s chosen configuration ({chosen.point}), seed "
                         f"{chosen.seed}, checkpoint of iteration {chosen.checkpoint.iteration} "
                         f"({exp.tune.metric} = {chosen.checkpoint.score:.4g})"))
    if reasons:
        console.print(escape(f"  named {model_name}, not {exp.name}: {'; '.join(reasons)} (--set name=... "
                             "chooses the name)"))
    if inputs is not None:
        serve = runnable(f"python -m experiments.serve {uri}")
        console.print(escape(f"  it {inputs.describe()}; serve it: {serve}"))
    return ""


def example_observations(family: envs.EnvFamily, env_config: dict[str, Any]) -> tuple[np.ndarray, str]:
    """A few real observations, to give the registered model an input signature and example, and the env's
    action space (what the model's outputs mean)."""
    env = family.make(env_config)
    obs, _ = env.reset(seed=0)
    batch = [obs]
    for _ in range(3):
        obs, *_ = env.step(env.action_space.sample())
        batch.append(obs)
    return np.asarray(batch, dtype=np.float32), str(env.action_space)
