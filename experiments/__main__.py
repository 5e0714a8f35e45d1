"""`python -m experiments`: the platform's commands, one entry each (name, module, what it does).

A new command is one row here plus its module; tests/unit/test_commands.py holds every row to the house rules:
`python -m MODULE --help` works, and the command ends through `experiments.shell.exit_code` (one line and exit 2
for bad input, 4 for a fault outside the run, 130 for Ctrl-C).
"""
from __future__ import annotations

import sys
from typing import NamedTuple


class Command(NamedTuple):
    name: str
    module: str
    help: str


COMMANDS = (
    Command("run", "experiments.run",
            "run an experiment file: sweep, MLflow, verdict, registered model (--dry-run checks)"),
    Command("data", "experiments.data", "fetch, import, update and inspect bar files"),
    Command("compare", "experiments.compare", "an MLflow experiment's sweeps, trials and out-of-sample tables"),
    Command("retrain", "experiments.retrain", "a challenger on fresh bars, a forward test and the promotion gate"),
    Command("serve", "experiments.serve", "serve a registered model over HTTP (mlflow models serve)"),
    Command("paper", "experiments.paper", "paper-trade a served or registered model on live or replayed bars"),
    Command("transfer", "experiments.transfer", "score a registered execution agent on CI histories it never saw"),
    Command("hardware", "experiments.hardware", "list, detect and check hardware presets"),
    Command("benchmark", "experiments.benchmark", "measure speed against a peer in the same run"),
    Command("cross_cpu", "experiments.cross_cpu", "check that a run gives the same numbers on another CPU"),
    Command("config", "experiments.config", "explain any key of an experiment file; write its JSON Schema"),
    Command("study-checkpoint-rules", "experiments.studies.checkpoint_rules",
            "study: which checkpoint of a trial to keep, on held-out validation data of other markets"),
    Command("study-hypotheses", "experiments.studies.hypotheses",
            "study: a table of hypotheses tried through the trials ledger"),
    Command("study-leave-one-out", "experiments.studies.leave_one_out",
            "study: leave-one-project-out: the execution agent on a CI history it never saw"),
    Command("study-ledger-canary", "experiments.studies.ledger_canary",
            "study: the trials ledger's canary: noise hypotheses on a random walk"),
    Command("study-olps-goals", "experiments.studies.olps_goals",
            "study: the direct learner against OLMAR and UCRP on NYSE(O), TSE and DJIA (issue 52's goal)"),
    Command("study-portfolio-accounting", "experiments.studies.portfolio_accounting",
            "study: the portfolio book replays universal-portfolios' weights on NYSE(O) to its wealth"),
    Command("study-portfolio-gpu-timing", "experiments.studies.portfolio_gpu_timing",
            "study: one PPO minibatch vs one direct-learner update of the per-asset network at N = 500"),
    Command("study-portfolio-scale", "experiments.studies.portfolio_scale",
            "study: what one portfolio model costs as its universe grows from 5 to 500 coins"),
    Command("study-portfolio-zero-shot", "experiments.studies.portfolio_zero_shot",
            "study: a registered portfolio model on a universe it never saw"),
)


def main(argv: list[str] | None = None) -> int:
    from experiments.shell import python_command

    args = sys.argv[1:] if argv is None else argv
    width = max(len(command.name) for command in COMMANDS)
    print(f"usage: {python_command()} -m MODULE ... (each takes --help)\n")
    for command in COMMANDS:
        print(f"  {command.name:<{width}}  {python_command()} -m {command.module}\n  {'':<{width}}  {command.help}")
    return 0 if not args or args[0] in ("-h", "--help") else 2


if __name__ == "__main__":
    sys.exit(main())
