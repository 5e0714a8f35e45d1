"""What a retrain of `trading/Portfolio-v0` reads: every bars file of the universe (env_config `data_paths`), each
with its newest bars, on the universe's calendar.

Files are updated one by one (`experiments.data update`), so they may end at different times. A universe reads an
asset whose bars end early as one that stopped trading (envs.portfolio.universe: sold at its last close), which is
not what a file that was not updated yet means; so the retrain reads every file through the earliest of their last
bars, the common end, and says so in one line. Champion and challenger then share one calendar: the challenger
trains on every file cut at the same calendar time (the bar before the forward window), and the forward window is
the newest rows of that calendar, where both are replayed (envs.portfolio.forward_test). The refit trains on every
file through the common end.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from envs.errors import InputError
from envs.retrain_data import ForwardReport, RetrainData
from envs.trading.retrain_data import cut_copy, local_copy

KEY = "environment.env_config.data_paths"


@dataclass(frozen=True)
class UniverseRetrainData(RetrainData):
    """The universe's files through their common end, and its calendar."""

    env_config: dict[str, Any]
    source: str  # the experiment file, for the update command's --universe
    paths: tuple[str, ...]
    files: tuple[pd.DataFrame, ...]  # each file's bars through the common end, its symbol in attrs
    calendar: pd.DatetimeIndex
    note: str = ""

    @classmethod
    def read(cls, env_config: dict[str, Any], source: str) -> "UniverseRetrainData":
        from envs.portfolio.config import PortfolioConfig
        from envs.portfolio.data_files import universe_files
        from envs.portfolio.universe import file_frames, universe_calendar

        cfg = PortfolioConfig.from_dict(env_config)  # a malformed env_config says so before the refusal below
        try:
            paths = tuple(universe_files(env_config, source))  # the files `experiments.data update` appends to
        except InputError:  # none: said as what a retrain needs
            given = "a wide table (table_path)" if cfg.table_path else "a synthetic universe"
            raise InputError(f"{source}: {KEY}: a retrain appends to one bars file per asset and cuts each at one "
                             f"calendar time; this experiment reads {given}: name the assets' bars files in "
                             "data_paths (python -m experiments.data import)") from None
        frames = file_frames(list(paths))  # symbol -> bars, in the files' order; a symbol twice is refused
        ends = [bars.index[-1] for bars in frames.values()]
        common = min(ends)
        earliest = paths[ends.index(common)]
        note = ""
        if max(ends) != common:
            late = sum(end > common for end in ends)
            note = (f"{KEY}: the files end at different times ({earliest} at {common}, {late} of {len(paths)} later, "
                    f"the last at {max(ends)}): the retrain reads every file through {common}, their common end "
                    "(append bars to each with python -m experiments.data update)")
        files = []
        for path, (symbol, bars) in zip(paths, frames.items(), strict=True):
            if bars.index[0] > common:
                raise InputError(f"{path}: its first bar ({bars.index[0]}) comes after {common}, where {earliest} "
                                 "ends: read through their common end, the universe would lack this asset; update "
                                 f"{earliest}, or drop one of the two from {KEY}")
            cut = bars[bars.index <= common]
            cut.attrs = {**bars.attrs, "symbol": symbol}
            files.append(cut)
        calendar = universe_calendar(dict(zip(frames, files, strict=True)), ", ".join(paths))
        return cls(dict(env_config), source, paths, tuple(files), calendar, note)

    @property
    def index(self) -> pd.DatetimeIndex:
        return self.calendar

    @property
    def label(self) -> str:
        return f"{KEY} ({len(self.paths)} files, on their calendar)"

    @property
    def update_hint(self) -> str:
        return (f"python -m experiments.data update --universe {self.source} --from TABLE (or --fetch EXCHANGE; or "
                f"update PATH --from FILE for each of its {len(self.paths)} files)")

    @property
    def current(self) -> dict[str, Any]:
        return {"data_paths": list(self.paths)}

    @property
    def notes(self) -> tuple[str, ...]:
        return (self.note,) if self.note else ()

    def cut(self, stop: int, storage: Any, folder: tuple[str, ...], local: Path) -> dict[str, Any]:
        """Every file through calendar row `stop - 1`, the same time for all."""
        last = self.calendar[stop - 1]
        for path, bars in zip(self.paths, self.files, strict=True):
            if bars.index[0] > last:
                raise InputError(f"{path}: its first bar ({bars.index[0]}) comes after {last}, the last bar the "
                                 "challenger trains on: its universe would lack this asset; drop it from "
                                 f"{KEY}, or retrain once it has bars before the forward window")
        return {"data_paths": [cut_copy(bars, last, storage, folder, local) for bars in self.files]}

    def forward_test(self, models: Mapping[str, Any], rows: range, local: Path) -> ForwardReport:
        """On the files through the common end, written under `local` (the refit's `cut(len(index))` finds them
        there and writes nothing): the backtest's env reads them as a run does, and each model is paper-traded on
        the universe the env read."""
        from envs.portfolio.forward_test import forward_test

        paths = [str(local_copy(bars, self.calendar[-1], local)) for bars in self.files]
        return forward_test(models, paths, self.env_config, rows)
