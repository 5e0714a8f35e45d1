"""What a retrain of `trading/Spot-v0` reads: the one bars file the experiment trains on (env_config `data_path`),
its rows the calendar, cut into a copy for the challenger and replayed for the forward test
(envs.trading.forward_test). `cut_copy` also writes a universe's files (envs/portfolio/retrain_data.py)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from envs.retrain_data import ForwardReport, RetrainData, publish


def local_copy(bars: pd.DataFrame, last: pd.Timestamp, local: Path) -> Path:
    """The bars of a file through `last`, as a bars file with the file's metadata under `local`, written whole (a
    temporary file renamed into place; reused if present: its name says through which bar)."""
    from envs.trading.calendar import ALL_WEEK
    from envs.trading.data import save_bars

    part = bars[bars.index <= last]
    attrs = bars.attrs
    path = local / f"{attrs.get('symbol', 'bars')}_{attrs.get('timeframe', '')}_to_{part.index[-1]:%Y%m%dT%H%M}.parquet"
    if not path.exists():
        local.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        save_bars(part, temporary, attrs.get("symbol", ""), attrs.get("timeframe", ""),
                  gaps=attrs.get("gaps", "ffill"), calendar=attrs.get("calendar", ALL_WEEK))
        temporary.replace(path)
    return path


def cut_copy(bars: pd.DataFrame, last: pd.Timestamp, storage: Any, folder: tuple[str, ...], local: Path) -> str:
    """`local_copy` where every node can read it (one PUT on S3): its path or s3:// URI."""
    return publish(local_copy(bars, last, local), storage, folder)


@dataclass(frozen=True)
class BarsRetrainData(RetrainData):
    """One bars file: its rows are the calendar."""

    bars: pd.DataFrame
    data_path: str

    @classmethod
    def read(cls, env_config: dict[str, Any], source: str) -> "BarsRetrainData":
        from envs.trading.data import load_bars
        from envs.trading.dataset_update import bars_file

        data_path = bars_file(env_config, source)  # the file `experiments.data update` appends to
        return cls(load_bars(data_path), data_path)

    @property
    def index(self) -> pd.DatetimeIndex:
        return self.bars.index

    @property
    def label(self) -> str:
        return self.data_path

    @property
    def update_hint(self) -> str:
        return f"python -m experiments.data update {self.data_path} --from FILE"

    @property
    def current(self) -> dict[str, Any]:
        return {"data_path": self.data_path}

    def cut(self, stop: int, storage: Any, folder: tuple[str, ...], local: Path) -> dict[str, Any]:
        return {"data_path": cut_copy(self.bars, self.bars.index[stop - 1], storage, folder, local)}

    def forward_test(self, models: Mapping[str, Any], rows: range, local: Path) -> ForwardReport:
        """Replays the bars read (no file written under `local`)."""
        from envs.trading.forward_test import forward_test

        return forward_test({name: served(model) for name, model in models.items()}, self.bars, rows)


def served(model: Any) -> tuple[Any, Any]:
    """A pyfunc policy model's bar reader and its decisions as `envs.trading.paper.Decide`."""
    def decide(bars: pd.DataFrame, held: float) -> float:
        return float(model.predict(bars.assign(position=held))["target_position"].iloc[0])

    return model.unwrap_python_model().inputs, decide
