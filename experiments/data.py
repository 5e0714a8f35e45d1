"""`python -m experiments.data [--env ID] SUBCOMMAND ...`: fetch, import, update and inspect an env family's data
files (today the trading families' bars files). Each subcommand takes --help.

A thin shell over `experiments.api.data` (which says which family it acts for and how a file is replaced): the
family's subcommands parse their flags into its typed request, `api.data` does it, and the lines it returns are
printed. Exit codes: 0 done, 2 bad input (one line on stderr, nothing written).
"""
from __future__ import annotations

import argparse
import sys

from experiments import api
from experiments.api.data import DataOptions, data_family
from experiments.shell import exit_code

ENV_HELP = "the env family whose data files these are (default: the one kind of data files the families keep)"


def parse_options(argv: list[str] | None) -> DataOptions:
    """The flags as one DataOptions: --env first (it decides which subcommands there are), then the family's."""
    chooser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    chooser.add_argument("--env")
    env = chooser.parse_known_args(argv)[0].env
    family = data_family(env)
    parser = argparse.ArgumentParser(prog="python -m experiments.data", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", metavar="ID", help=ENV_HELP)
    commands = parser.add_subparsers(dest="command", required=True)
    for command in family.data_commands():
        subcommand = commands.add_parser(command.name, help=command.help, description=command.help)
        command.add_flags(subcommand)
        subcommand.set_defaults(make_request=command.request)
    args = parser.parse_args(argv)
    return DataOptions(args.make_request(args), env)


def main(argv: list[str] | None = None) -> int:
    def run() -> int:
        for line in api.data(parse_options(argv)):
            print(line)
        return 0

    return exit_code(run)


if __name__ == "__main__":
    sys.exit(main())
