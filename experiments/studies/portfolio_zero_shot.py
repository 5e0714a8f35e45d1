"""Zero-shot: a registered portfolio model scored, without retraining, on a universe it never saw.

`python -m experiments.studies.portfolio_zero_shot "models:/NAME/VERSION" conf/TARGET.yaml [--set KEY=VALUE ...]`

The model's exported numpy policy runs one network on every asset's row (training.model: shared_assets), so a
model trained on three coins scores five, or 20 synthetic ones. It is not restored into an env of another size: the
target experiment file says the universe, its walk-forward folds and its costs; the model's own window, features
and decision interval are kept (its rows must have the width it was trained on). Each fold's test part is scored
next to the family's baselines, and the folds are judged by the platform's verdict as one configuration and one
seed: a zero-shot number is one model, never a search, so nothing deflates it for trials it did not have.

Out of sample means out of sample in time too: a target fold whose test window starts before the end of the
model's own validation part, on a universe that shares an asset with the model's, is left out and said so (the
model has seen those bars). A universe with none of its assets (another synthetic seed) keeps every fold.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from envs.errors import InputError
from envs.portfolio.env import PortfolioEnv
from experiments.shell import exit_code, terminal_console
from experiments.tracking.store import default_tracking_uri

# What the model was trained with and must see again: the width of its rows and when it decides.
MODEL_KEYS = ("window", "features", "decision_interval", "weights", "kappa", "gross_cap")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m experiments.studies.portfolio_zero_shot", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help='a registered portfolio model, e.g. "models:/ppo_portfolio_3coins/1"')
    parser.add_argument("target", type=Path, help="an experiment file whose universe and folds to score it on")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a key of the target file, e.g. environment.env_config.synthetic_seed=7")
    parser.add_argument("--tracking-uri", default=None, help="default MLFLOW_TRACKING_URI, else ./mlruns")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    return exit_code(lambda: zero_shot(parse_args(argv)))


def zero_shot(args: argparse.Namespace) -> int:
    import mlflow
    import yaml

    import envs
    from algos.tree_path import set_value
    from experiments.config.load import load_experiment
    from experiments.config.protocol import fold_indices
    from experiments.results.printing import print_verdict
    from experiments.results.promotion import resolve_version
    from experiments.results.verdict import ScoredTrial, build_verdict
    from experiments.tracking.runs import make_client

    target = load_experiment(args.target, args.overrides)
    tracking_uri = args.tracking_uri or default_tracking_uri()
    client = make_client(tracking_uri)
    mlflow.set_tracking_uri(tracking_uri)
    version = resolve_version(client, args.model)
    if version.tags.get("env") != target.environment.env:
        raise InputError(f"{args.model}: a model of {version.tags.get('env') or 'unknown env'}, and {args.target} is "
                         f"an experiment of {target.environment.env}: score it on a universe of its own family")
    prefix = "environment.env_config."
    params: dict = {}
    for key, value in client.get_run(version.run_id).data.params.items():
        if key.startswith(prefix):  # logged flat (protocol.type, ...) as strings (None as "None"): read back
            set_value(params, key[len(prefix):], None if value == "None" else yaml.safe_load(value), create=True)
    trained = {key: params[key] for key in MODEL_KEYS if key in params}
    seen_symbols, seen_until = seen_by_model(params)
    policy = mlflow.pyfunc.load_model(f"models:/{version.name}/{version.version}").unwrap_python_model().policy
    score = envs.family(target.environment.env).evaluator()
    console = terminal_console()
    trials = []
    for fold in fold_indices(target):
        config = {**target.environment.env_config, **trained, "fold": fold}
        env = PortfolioEnv({**config, "split": "test", "episode_length": None})
        start = env.market.timestamps[env.market.bounds["test"][0]]
        shared = sorted(set(env.market.universe.symbols) & seen_symbols)
        if shared and start <= seen_until:
            console.print(f"fold {fold} left out: its test window starts {start:%Y-%m-%d}, before the end of the "
                          f"model's validation part ({seen_until:%Y-%m-%d}) on {', '.join(shared)}", markup=False)
            continue
        trials.append(ScoredTrial(fold=fold, seed=0, point="default", validation=0.0, report=score(policy, config)))
    if not trials:
        raise InputError(f"{args.target}: every test window starts before the end of the model's validation part "
                         f"({seen_until:%Y-%m-%d}) on assets it trained on: score it on later bars or other assets")
    verdict = build_verdict(trials, "max", trials[0].report.periods_per_year)
    kept = ", ".join(f"{key}={value}" for key, value in trained.items())
    print_verdict(console, verdict, f"{version.name} version {version.version}, zero-shot on {args.target} "
                                    f"({trials[0].report.data_label}); kept from the model: {kept}")
    return 0


def seen_by_model(env_config: dict) -> tuple[set[str], pd.Timestamp]:
    """The assets a model trained on and the last bar of its fold's validation part (what it has seen)."""
    env = PortfolioEnv({**env_config, "split": "validation", "episode_length": None})
    market = env.market
    return set(market.universe.symbols), market.timestamps[market.bounds["validation"][1] - 1]


if __name__ == "__main__":
    sys.exit(main())
