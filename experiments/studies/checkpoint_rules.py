"""Which checkpoint of a trial to keep: rules compared on held-out validation data of markets nobody reports.

Picking a trial's checkpoint as the best of N noisy single walks of a validation window is a winner's-curse
pick: early checkpoints, with exploration still high, win by luck. This study compares selection rules
(`tune.checkpoint.select`, algos.inputs.SelectionRule) without touching a test window:

1. sweeps score every iteration on the first half of each fold's validation part only
   (`--set evaluation.env_config.split=validation_a`) and keep every checkpoint;
2. each rule picks a checkpoint per trial from those scores (the rule's own code, replayed over the history);
3. the picked checkpoint walks the second half (`validation_b`), which no rule saw: its return there is the rule's
   score. Also shown: the last checkpoint, and the best on validation_b (an oracle, the ceiling).

    .venv/bin/python -m experiments.studies.checkpoint_rules runs/study/dqn_coins runs/study/canary_noise ...

(each argument: an `--output` folder plus experiment name, i.e. where `latest_sweep.json` is). The sweeps are in
docs/verdicts.md, "Which checkpoint", with the result.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

import algos
import envs
from algos.inputs import SelectionRule
from algos.rllib.config import lookup
from envs.trading.importance import greedy_return
from experiments.results.policy import MODULE_SUBPATH, load_module_policy
from experiments.shell import exit_code

METRIC = "evaluation/env_runners/episode_return_mean"


@dataclass(frozen=True)
class Rule:
    name: str
    smooth: int = 1
    after_exploration: bool = False


RULES = (Rule("best (raw)"), Rule("smoothed over 3", smooth=3), Rule("after exploration", after_exploration=True),
         Rule("smoothed over 3, after exploration", smooth=3, after_exploration=True))


@dataclass
class TrialRecord:
    market: str
    scores: list[float]          # validation_a return per iteration
    env_steps: list[float]
    held_out: list[float]        # validation_b return of each iteration's checkpoint
    explore_until: int


def _trial(trial_dir: Path, explore_until: int, market: str) -> TrialRecord | None:
    lines = [json.loads(line) for line in (trial_dir / "result.json").read_text().splitlines() if line.strip()]
    checkpoints = sorted(trial_dir.glob("checkpoint_*"))
    if not lines or len(checkpoints) != len(lines):
        return None  # a checkpoint per iteration is the study's premise
    config = lines[0]["config"]
    env_id, env_config = config["env"], dict(config["env_config"])
    held_out = []
    for checkpoint in checkpoints:
        policy = load_module_policy(checkpoint / MODULE_SUBPATH, algos.algorithm("dqn"))
        env = envs.make_env(env_id, {**env_config, "split": "validation_b", "episode_length": None})
        held_out.append(greedy_return(policy, env.unwrapped))
    return TrialRecord(market, [_number(lookup(r, METRIC)) for r in lines],
                       [_number(lookup(r, "num_env_steps_sampled_lifetime")) for r in lines], held_out, explore_until)


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) else float("nan")


def pick(record: TrialRecord, rule: Rule) -> int:
    """The iteration `rule` keeps: the best selection score, replayed as the callback computes it iteration by
    iteration (algos.rllib.config.copy_selection_score)."""
    selection = SelectionRule(rule.smooth, record.explore_until if rule.after_exploration else 0)
    scores = [selection.score(record.scores[:i + 1], record.env_steps[i], "max") for i in range(len(record.scores))]
    return int(np.argmax(scores))


def study(folders: list[Path]) -> pd.DataFrame:
    records = []
    for folder in folders:
        state = json.loads((folder / "latest_sweep.json").read_text())
        tune_dir = Path(state["tune_dir"])
        for trial_dir in sorted(p for p in tune_dir.iterdir() if (p / "result.json").exists()):
            params = json.loads((trial_dir / "params.json").read_text())
            epsilon = params.get("epsilon") or [[0, 0]]
            record = _trial(trial_dir, int(max(step for step, _ in epsilon)), folder.name)
            if record:
                records.append(record)
    rows = []
    for record in records:
        row = {"market": record.market}
        for rule in RULES:
            row[rule.name] = record.held_out[pick(record, rule)]
        row["last"] = record.held_out[-1]
        row["oracle (best on validation_b)"] = max(record.held_out)
        rows.append(row)
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    return exit_code(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.studies.checkpoint_rules", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path, help="<--output>/<experiment name> of each study sweep")
    parser.add_argument("--csv", type=Path, help="also write the per-trial table here")
    args = parser.parse_args(argv)
    table = study(args.folders)
    if args.csv:
        table.to_csv(args.csv, index=False)
    columns = [c for c in table.columns if c != "market"]
    summary = table.groupby("market")[columns].mean()
    summary.loc["all trials"] = table[columns].mean()
    summary.loc["standard error (all)"] = table[columns].std(ddof=1) / np.sqrt(len(table))
    best = table[columns].sub(table["best (raw)"], axis=0)
    summary.loc["paired diff vs best (raw), mean"] = best.mean()
    summary.loc["paired diff vs best (raw), s.e."] = best.std(ddof=1) / np.sqrt(len(table))
    print(f"validation_b return of the checkpoint each rule keeps ({len(table)} trials)")
    print(summary.round(3).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
