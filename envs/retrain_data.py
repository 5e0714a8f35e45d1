"""What a retrain reads of a family's data (envs.abilities.Retrains): one calendar, its cuts, and a forward test.

`experiments.retrain` is the same for every family that retrains: it counts the forward window in rows of the
data's calendar (`index`), trains the challenger on the data cut before it (`cut`, returned as env_config values
that replace the file's), forward-tests champion and challenger on it (`forward_test`), and refits on the whole
(`cut(len(index))`). What those rows are, how the data is cut and written, and how a registered model is replayed
are the family's: one bars file for `trading/Spot-v0` (envs/trading/retrain_data.py), every file of a universe cut at
one calendar time for `trading/Portfolio-v0` (envs/portfolio/retrain_data.py). The storage the cuts are written to
is duck-typed (experiments.storage.filesystem.Storage: `is_local`, `filesystem`, `path`, `uri_of`), so envs/ imports
no platform code.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from envs.errors import InputError


@dataclass(frozen=True)
class ForwardReport:
    """Per strategy (the policies first, then the baselines): a table row and per-bar log returns."""

    table: pd.DataFrame
    returns: pd.DataFrame   # log returns from each bar's close to the next: the first bar has none
    periods_per_year: float
    start: pd.Timestamp

    @property
    def window(self) -> str:
        return f"{self.start:%Y-%m-%d %H:%M} .. {self.returns.index[-1]:%Y-%m-%d %H:%M} ({len(self.returns) + 1} bars)"


class RetrainData(ABC):
    """The data an experiment's env_config names, as a retrain reads it now (its newest bars included)."""

    @property
    @abstractmethod
    def index(self) -> pd.DatetimeIndex:
        """The calendar, oldest first: the forward window and the refit's window are rows of it."""

    @property
    @abstractmethod
    def label(self) -> str:
        """What the retrain's refusals name: the file, or the env_config key of the files."""

    @property
    @abstractmethod
    def update_hint(self) -> str:
        """The command that appends bars to the data."""

    @property
    @abstractmethod
    def current(self) -> dict[str, Any]:
        """The env_config values that name the data as the experiment file does (the refit's plan is checked with
        them before anything is cut)."""

    @property
    def notes(self) -> tuple[str, ...]:
        """Lines the retrain prints about how the data was read (e.g. files cut at a common end)."""
        return ()

    @abstractmethod
    def cut(self, stop: int, storage: Any, folder: tuple[str, ...], local: Path) -> dict[str, Any]:
        """The data before calendar row `stop`, written whole where every node can read it (a local copy under
        `local`, reused if present; on S3 one PUT under `folder` of the storage): the env_config values that make a
        run read it instead."""

    @abstractmethod
    def forward_test(self, models: Mapping[str, Any], rows: range, local: Path) -> ForwardReport:
        """Replay each registered model (an MLflow pyfunc model: `predict`, `unwrap_python_model().inputs`) over the
        calendar's `rows` through its served code, as paper trading does, next to the family's baselines, with the
        backtest's costs. A family that replays files writes them under `local`, the folder `cut` writes to, so the
        refit's `cut(len(index))` reuses them."""

    def forward_rows(self, forward_bars: int, champion_tags: Mapping[str, str] | None) -> range:
        """The newest `forward_bars` rows, all after the data the champion (its version's tags) trained on and was
        promoted on (its own forward window); InputError naming how many are needed."""
        index = self.index
        if len(index) <= forward_bars:
            raise InputError(f"{self.label}: {len(index)} bars cannot hold a forward window of retrain.forward_bars "
                             f"{forward_bars} and data to train on: append bars, or lower retrain.forward_bars")
        rows = range(len(index) - forward_bars, len(index))
        if champion_tags is not None:
            seen = "forward_end" if "forward_end" in champion_tags else "data_end"
            end = pd.Timestamp(champion_tags.get(seen, index[-1]))
            fresh = int((index > end).sum())
            if fresh < forward_bars:
                what = "the window it was promoted on" if seen == "forward_end" else "its data"
                raise InputError(f"{self.label}: the forward test needs {forward_bars} bars after the champion's data "
                                 f"ended ({end}, the end of {what}); the data has {fresh}: append bars with "
                                 f"{self.update_hint}, or lower retrain.forward_bars")
        return rows


def publish(path: Path, storage: Any, folder: tuple[str, ...]) -> str:
    """A local file where every node can read it: its path for a local storage, else one PUT under `folder` of the
    storage and its URI."""
    if storage.is_local:
        return str(path.resolve())
    with storage.filesystem.open_output_stream(storage.path(*folder, path.name)) as stream:
        stream.write(path.read_bytes())
    return storage.uri_of(*folder, path.name)
