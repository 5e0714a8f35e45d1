"""`python -m experiments.config`: the experiment file described from its models.

`explain KEY` says what a key does, its type, bounds, default and which algorithms or env families have it;
`schema` prints the JSON Schema editors validate experiment files with (conf/experiment.schema.json is its output).
Both read the pydantic models, so neither can drift from what a file accepts. A thin shell over `api.explain` and
`api.experiment_schema` (experiments/api/describing.py).
"""
from __future__ import annotations

import argparse
import sys

from experiments import api
from experiments.shell import exit_code


def parser() -> argparse.ArgumentParser:
    """The command line: one subcommand per question."""
    top = argparse.ArgumentParser(prog="python -m experiments.config",
                                  description="Describe the keys of an experiment file (conf/*.yaml).")
    commands = top.add_subparsers(dest="command", required=True, metavar="{explain,schema}")
    explain = commands.add_parser(
        "explain", help="what a key does: type, bounds, default and its algorithms or env families",
        description="Explain a dotted key of an experiment file (training.n_step, tune.checkpoint.select.smooth, "
                    "environment.env_config.KEY); a section lists its keys; no key lists the sections.")
    explain.add_argument("key", nargs="?", default="", help="a dotted key or section, e.g. training.n_step")
    commands.add_parser(
        "schema", help="print the JSON Schema of an experiment file (for editors)",
        description="Print the JSON Schema (draft-07) of an experiment file: python -m experiments.config schema > "
                    "conf/experiment.schema.json")
    return top


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand, ending as every command does (experiments.shell.exit_code: bad input is one line and 2)."""
    return exit_code(lambda: _answer(parser().parse_args(argv)))


def _answer(args: argparse.Namespace) -> int:
    if args.command == "explain":
        print(api.explain(args.key))
    else:
        sys.stdout.write(api.experiment_schema())
    return 0


if __name__ == "__main__":
    sys.exit(main())
