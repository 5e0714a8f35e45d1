"""An experiment's evaluation protocol becomes part of its sweep.

`evaluation.protocol` (envs.splits.Protocol) is handed to the env in `environment.env_config.protocol`,
and its folds become a grid over `environment.env_config.fold`, so Tune trains every
fold x seed x searched configuration as its own trial and every trial's env (training and RLlib's
validation runs alike) trades the rows of its own fold. The env resolves the fold against its own
data, so one protocol serves coins with histories of different lengths.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import envs
from envs.abilities import Backtests, able
from envs.errors import InputError
from envs.splits import Protocol

if TYPE_CHECKING:
    from experiments.config.experiment import ExperimentConfig

FOLD_KEY = "environment.env_config.fold"  # the search-space key of the fold, as among a trial's params


def apply_protocol(exp: "ExperimentConfig", source: str) -> None:
    """Put the protocol into the env config and its folds into the search space (in place)."""
    if exp.evaluation.protocol is None:
        return
    protocol = Protocol.from_dict(exp.evaluation.protocol, "evaluation.protocol")
    env_id, env_config, space = exp.environment.env, exp.environment.env_config, exp.tune.search_space
    envs.require_registered(env_id)  # an unknown id first gets its "did you mean"
    if not isinstance(exp.family, Backtests):
        with_folds = ", ".join(able(Backtests, envs.FAMILIES))
        raise InputError(f"{source}: evaluation.protocol: {env_id} has no time axis to cut into folds: remove "
                         f"evaluation.protocol (env families with folds: {with_folds})")
    for key in ("protocol", "fold"):
        if key in env_config or f"environment.env_config.{key}" in space:
            raise InputError(f"{source}: environment.env_config.{key} is set by evaluation.protocol: remove it")
    for key in exp.family.unused_with_protocol:
        if key in env_config or f"environment.env_config.{key}" in space:
            raise InputError(f"{source}: environment.env_config.{key} is not used when evaluation.protocol cuts the "
                             f"parts (type {protocol.type}): remove it, or drop evaluation.protocol to use it")
    env_config["protocol"] = protocol.as_dict()
    if protocol.num_folds > 1:
        if exp.tune.search_alg == "optuna":
            raise InputError(f"{source}: evaluation.protocol walk_forward trains every fold as its own trials, "
                             "which optuna cannot search: use tune.search_alg: random")
        space[FOLD_KEY] = {"grid": list(range(protocol.num_folds))}


def fold_indices(exp: "ExperimentConfig") -> list[int]:
    """The folds this experiment trains (one, index 0, without a protocol)."""
    domain = exp.tune.search_space.get(FOLD_KEY)
    return list(domain["grid"]) if domain else [int(exp.environment.env_config.get("fold", 0))]
