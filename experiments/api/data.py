"""`api.data` (and `python -m experiments.data`): make, inspect and extend an env family's data files.

The subcommands are the family's (`envs.abilities.UpdatesData`: today the trading families' bars files: import,
show, resample, features, fetch, update): each parses its flags into the family's typed request, which `data` hands
to the family with the platform's `DataFiles`: where a file is read from, how a new version replaces it (whole, the
previous one kept beside it, local or s3://, experiments.storage.dataset_versions), and which files an experiment
file reads (`update --universe CONF`).

Which family: `env` when given; else the families with the ability, when they keep one kind of data files (both
trading families keep bars files through one implementation, so either does the same). A second kind of data files
makes `env` needed, and the refusal says which ids there are.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envs.abilities import UpdatesData, able
from envs.errors import InputError


@dataclass(frozen=True)
class DataOptions:
    """One data request: the family's typed request (made from a subcommand's flags, `UpdatesData.data_commands`,
    or by `UpdatesData.update_request`) and the env id of the family that does it (None: the one kind there is)."""

    request: Any
    env: str | None = None


def data(options: DataOptions) -> list[str]:
    """Do the request; the lines that say what was read and written (nothing is printed)."""
    return data_family(options.env).run_data(options.request, PlatformFiles())


def data_family(env: str | None = None) -> UpdatesData:
    """The family whose data files `python -m experiments.data` works on: `env`'s, else the one kind there is."""
    import envs

    if env is not None:
        family = envs.family(env)
        if not isinstance(family, UpdatesData):
            raise InputError(f"--env {env}: keeps no data files python -m experiments.data works on (those that do: "
                             f"{', '.join(able(UpdatesData, envs.FAMILIES))})")
        return family
    keeping = [family for family in envs.FAMILIES if isinstance(family, UpdatesData)]
    kinds: dict[str, list[str]] = {}
    for family in keeping:
        kinds.setdefault(family.data_kind, []).append(family.env_id)
    if len(kinds) != 1:
        kept = "; ".join(f"{kind}: {', '.join(ids)}" for kind, ids in kinds.items()) or "none"
        raise InputError(f"python -m experiments.data works on one kind of data files, and the env families keep "
                         f"{len(kinds)} ({kept}): pass --env with the id of the one whose files these are")
    return keeping[0]


class PlatformFiles:
    """The platform's side of a family's data request (envs.abilities.DataFiles)."""

    def readable(self, path: str) -> str:
        from experiments.storage.dataset_versions import locate

        return locate(path).uri

    def replace(self, path: str, data: bytes, read_digest: str) -> str:
        from experiments.storage.dataset_versions import locate, replace_dataset

        return replace_dataset(locate(path), data, read_digest)

    def experiment_files(self, experiment: Path) -> list[str]:
        from experiments.config.load import load_experiment

        exp = load_experiment(experiment)
        if not isinstance(exp.family, UpdatesData):
            raise InputError(f"{experiment}: its env {exp.environment.env} keeps no data files to update")
        return exp.family.data_files(exp.environment.env_config, str(experiment))
