"""The `ensemble:` section's checks, before Ray: an ensemble needs two members or more, and members that read the same
inputs. Both follow from the file (its seeds and its search space), so a run that would end in no ensemble, or in one
of members that see different observations, is refused in one line before anything trains."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from envs.errors import InputError
from experiments.config.checks import ENV_CONFIG_PREFIX
from experiments.config.protocol import FOLD_KEY

if TYPE_CHECKING:
    from experiments.config.experiment import ExperimentConfig


def searched_configuration_keys(exp: "ExperimentConfig") -> list[str]:
    """The search-space keys that make configurations (the fold and the group_by key make folds and groups)."""
    return [key for key in exp.tune.search_space if key not in (FOLD_KEY, exp.tune.group_by)]


def planned_members(exp: "ExperimentConfig") -> int:
    """How many trials an ensemble of one fold of one group averages: the seeds (over: seeds), or every configuration
    the search draws times the seeds (over: configurations)."""
    seeds = len(set(exp.tune.seeds))
    if exp.ensemble is None or exp.ensemble.over == "seeds":
        return seeds
    searched = searched_configuration_keys(exp)
    grids = math.prod(len(exp.tune.search_space[key].get("grid", [None])) for key in searched)
    return seeds * (exp.tune.num_samples * grids if searched else 1)


def check_ensemble(exp: "ExperimentConfig", source: str) -> None:
    """InputError in one line for an ensemble of one member, or over configurations that read different inputs (a
    searched env_config key: the observation, or the market the members are scored in, would differ)."""
    if exp.ensemble is None:
        return
    over = exp.ensemble.over
    where = f"{source}: ensemble.over: {over}"
    if over == "configurations":
        inputs = [key for key in searched_configuration_keys(exp) if key.startswith(ENV_CONFIG_PREFIX)]
        if inputs:
            raise InputError(f"{where}: tune.search_space searches {inputs[0]}, so the members would read different "
                             "inputs: an ensemble's members read one observation of one env; search it in "
                             "experiments of their own, or use ensemble.over: seeds")
    if planned_members(exp) < 2:
        more = "list two or more seeds in tune.seeds" + (", or search configurations in tune.search_space"
                                                         if over == "configurations" else "")
        raise InputError(f"{where}: an ensemble of one member (tune.seeds {exp.tune.seeds}"
                         f"{', one configuration' if over == 'configurations' else ''}) is that member: {more}, "
                         "or remove ensemble:")
