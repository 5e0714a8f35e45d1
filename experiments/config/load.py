"""Load an experiment file: its `extends:` chain and --set overrides, validated by the strict model, then every
check that needs no Ray (search paths and values, batch searches, result keys, the protocol, env_config files
and the env family's own model). `experiments.api.preflight` builds on this for --dry-run.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

import algos
from algos.tree_path import value_at
from envs.errors import InputError
from envs.validation import describe_validation_error
from experiments.config.checks import (
    check_batch_search,
    check_result_keys,
    check_search_paths,
    check_search_values,
)
from experiments.config.experiment import DEFAULT_ALGORITHM, ExperimentConfig, experiment_model
from experiments.config.files import (
    Override,
    absolute_paths,
    apply_overrides,
    check_files_exist,
    parse_overrides,
    pin_overridden_searches,
    read_experiment,
    switch_algorithm,
)
from experiments.config.protocol import apply_protocol
from experiments.storage.filesystem import explicit_endpoints


def load_experiment(path: str | Path, overrides: Sequence[str | Override] | None = None,
                    raw: dict[str, Any] | None = None) -> ExperimentConfig:
    """Read (with its `extends:` chain), override, validate and check everything that needs no Ray.
    Relative `*_path`/`*_dir` values resolve against the folder of the file that wrote them, and against
    the working directory when they come from --set (as any path typed in a shell). `raw`: the file as
    `read_experiment` read it, when the caller has it already (it is changed here)."""
    path = Path(path)
    source = str(path)
    raw = read_experiment(path) if raw is None else raw
    overrides = parse_overrides(overrides or ())
    notes: list[str] = []
    set_keys = {override.key for override in overrides}
    for override in overrides:  # --set algorithm=... starts training afresh, as extends: does
        value = override.value
        switches = isinstance(value, str) and value != raw.get("algorithm", DEFAULT_ALGORITHM)
        if override.path == ("algorithm",) and switches:
            notes = [note for setting, note in switch_algorithm(raw, value, source).items()
                     if setting == "algorithm" or setting not in set_keys]
            notes += ready_made(path, raw, value) if value in algos.ALGORITHMS else []
    raw = apply_overrides(raw, overrides)
    pinned = pin_overridden_searches(raw, overrides)
    name = raw.get("algorithm", DEFAULT_ALGORITHM)
    if not isinstance(name, str):
        raise InputError(f"{source}: algorithm: write one name, e.g. algorithm: dqn "
                         f"(known: {', '.join(algos.ALGORITHMS)})")
    algos.algorithm(name, where=f"{source}: ")
    model = experiment_model(name)
    try:
        config = model.model_validate(raw)
    except ValidationError as error:
        raise InputError(describe_validation_error(error, source, model)) from None
    check_search_paths(config, source)
    check_search_values(config, source)
    check_batch_search(config, source)
    check_result_keys(config, source)
    apply_protocol(config, source)
    family = config.family
    named = family.path_keys
    for env_config in (config.environment.env_config, config.evaluation.env_config):
        absolute_paths(env_config, Path.cwd(), named=named)
        explicit_endpoints(env_config, f"{source}: environment.env_config")
        check_files_exist(env_config, source)
    family.check_config(config.environment.env_config, source)
    family.check_config({**config.environment.env_config, **config.evaluation.env_config},
                          f"{source}: evaluation")
    dumped = config.model_dump()
    config._pinned = {key: value_at(dumped, key) for key in pinned}  # as validated: 1e-4 is a float here
    config._overridden = [override.key for override in overrides]
    config._notes = notes
    return config


def ready_made(path: Path, raw: dict[str, Any], algorithm: str) -> list[str]:
    """The shipped experiment files next to `path` that run `algorithm` on the same env: a switch by --set is
    a start, theirs is tuned."""
    env = (raw.get("environment") or {}).get("env")
    found = []
    for other in sorted(path.resolve().parent.glob("*.yaml")):
        try:
            theirs = read_experiment(other)
        except InputError:
            continue
        same_env = (theirs.get("environment") or {}).get("env") == env
        if theirs.get("algorithm", DEFAULT_ALGORITHM) == algorithm and same_env:
            found.append(str(other.relative_to(Path.cwd()) if other.is_relative_to(Path.cwd()) else other))
    return [f"ready-made for {algorithm} on {env}: {', '.join(found)}"] if found else []
