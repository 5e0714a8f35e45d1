"""Files that list experiment files: several agents trained side by side from one command.

```yaml
name: agents
description: the test-automation agents and the BTC trader, side by side
hardware: workstation_3gpu          # optional, as in an experiment file: the machine they share
experiments:
  - dqn_testprio_iofrol.yaml         # resolved against this file's folder
  - file: dqn_btc.yaml
    set: ["tune.num_samples=1"]      # --set overrides for this experiment only
  - more_agents.yaml                 # a listing may list listings; each experiment runs once
```

A file is a listing when it has `experiments:` at the top. Reading one resolves every entry to an
experiment file, refuses a missing file and a circular listing, and keeps the listed order.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import Field, field_validator

from envs.errors import InputError
from envs.validation import StrictModel, validate
from experiments.config.files import read_yaml

LISTING_KEY = "experiments"


class ListedExperiment(StrictModel):
    """One entry in long form: the file and its own --set overrides."""

    file: str = Field(min_length=1)
    set: list[str] = Field(default_factory=list)


class ListingFile(StrictModel):
    """The model of a listing file."""

    name: str = Field(min_length=1)
    description: str = ""
    hardware: str | None = None
    experiments: list[ListedExperiment] = Field(min_length=1)

    @field_validator("experiments", mode="before")
    @classmethod
    def _short_form(cls, value: object) -> object:
        """`- file.yaml` is `- {file: file.yaml}`."""
        return ([{"file": item} if isinstance(item, str) else item for item in value] if isinstance(value, list)
                else value)


@dataclass(frozen=True)
class Entry:
    """A listed experiment file and the overrides its listing gives it."""

    path: Path
    overrides: tuple[str, ...]


@dataclass(frozen=True)
class Listing:
    """What a run of several experiments needs from the file: its name, its machine and its experiments."""

    name: str
    hardware: str | None
    entries: list[Entry]


def is_listing(path: Path) -> bool:
    """Whether `path` is a listing (has `experiments:`); an unreadable file is left to the experiment reader,
    which says what is wrong with it."""
    try:
        return LISTING_KEY in read_yaml(path)
    except InputError:
        return False


def read_listing(path: Path, chain: tuple[Path, ...] = ()) -> Listing:
    """The listing at `path` with nested listings flattened; InputError for a missing or circular entry."""
    listing = validate(ListingFile, read_yaml(path), str(path))
    entries: list[Entry] = []
    here = path.resolve()
    for index, item in enumerate(listing.experiments):
        target = (here.parent / item.file).resolve()
        where = f"{path}: experiments[{index}]"
        if target == here or target in chain:
            cycle = " -> ".join(str(p) for p in (*chain, here, target))
            raise InputError(f"{where}: {item.file} is circular ({cycle}): remove it from one of the listings")
        if not target.is_file():
            raise InputError(f"{where}: {target} not found (resolved against this file's folder): fix the name")
        if is_listing(target):
            if item.set:
                raise InputError(f"{where}: set: applies to one experiment, and {item.file} lists several: "
                                 "put the overrides on its own entries")
            entries += read_listing(target, (*chain, here)).entries
        else:
            entries.append(Entry(target, tuple(item.set)))
    return Listing(listing.name, listing.hardware, entries)
