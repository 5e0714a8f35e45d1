"""The sweep's parameter space as both sides of a run read it: the sweep hands Tune its `space`, and scoring names
each trial's searched values by their YAML keys through `search_keys`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class ParamSpace:
    space: dict[str, Any]       # what Tune gets: an RLlib config dict with domains inside
    search_keys: dict[str, str]  # Tune's flattened key ("lr", "env_config/fee_bps") -> YAML key


def searched_values(config: dict[str, Any], params: ParamSpace) -> dict[str, Any]:
    """A trial's searched values under their YAML keys, e.g. {"training.lr": 3.1e-4, "seed": 1}."""
    from algos.rllib.config import lookup  # RLlib's: imported when a sweep's results are read, not by a dry run

    return {yaml_key: lookup(config, flat_key) for flat_key, yaml_key in params.search_keys.items()}
