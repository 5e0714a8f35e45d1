"""The values some abilities (envs/abilities.py) exchange with the platform: a data subcommand (`DataCommand`),
the platform's side of a data request (`DataFiles`), a family's numeric probe (`NumericProbe`), and the market
paper trading opens (`PaperMarket`). Kept apart from
the abilities, so that every class of envs.abilities is an ability a family can have."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

if TYPE_CHECKING:
    import argparse

    import numpy as np


class DataFiles(Protocol):
    """What the platform does for a family's data command (experiments/api/data.py): where a file is read from,
    how a new version replaces it, and which files an experiment file reads. The family plans; this writes."""

    def readable(self, path: str) -> str:
        """The URI `path` is read from (an s3:// path with its endpoint made explicit); InputError when malformed."""

    def replace(self, path: str, data: bytes, read_digest: str) -> str:
        """Write `data` whole in place of the file at `path`, whose bytes the update read had the SHA-256 hex digest
        `read_digest` (a file changed since is refused); the previous version is kept beside it. Returns where."""

    def experiment_files(self, experiment: Path) -> list[str]:
        """The data files the env of an experiment file reads (its family's `UpdatesData.data_files`)."""


@dataclass(frozen=True)
class DataCommand:
    """One subcommand of `python -m experiments.data`: its name and help, the flags it adds to its parser, and the
    typed request those flags make (a frozen dataclass of the family's, done by `UpdatesData.run_data`)."""

    name: str
    help: str
    add_flags: Callable[[argparse.ArgumentParser], None]
    request: Callable[[argparse.Namespace], Any]


@dataclass(frozen=True)
class NumericProbe:
    """Numbers a family's runs compute, computed the way a run does: `features` (rows before `warmup` may be NaN)
    and a real-valued `series` for numpy's elementwise kernels."""

    features: np.ndarray
    warmup: int
    series: np.ndarray


class PaperMarket(Protocol):
    """What paper trading (experiments/api/paper_trading.py) asks of a family's market, opened on bars files. Its book
    has `equity`, `last_bar` (ISO time, "" before the first bar) and `to_state()` (JSON-able, logged after every
    write); a bar's outcome has `equity`."""

    label: str  # the files, as the session's run is tagged
    key: str    # what names the session's bars (with the model and the start)

    @classmethod
    def open(cls, reader: Any, sources: list[str], follow: bool) -> PaperMarket:
        """The market of a model's `reader` on `sources`; `follow`: the files are being appended to."""

    def read(self) -> Any:
        """The bars as they are now (read again at each poll)."""

    def index(self, data: Any) -> Any:
        """The bars' times (a pandas DatetimeIndex)."""

    def new_book(self) -> Any:
        """A flat account trading as the model's env did."""

    def book_from_state(self, state: dict[str, Any]) -> Any:
        """The book a logged `to_state()` describes."""

    def replay(self, book: Any, data: Any, rows: range, ask: Callable[[Any], Any],
               on_bar: Callable[[Any, Any], None] | None = None) -> np.ndarray:
        """Step `book` through `rows` of `data`, asking the model (`ask`: a request DataFrame -> its answer) at each
        decision bar and calling `on_bar(time, outcome)` after each bar; the equity at each row's close."""

    def traded(self, book: Any) -> float:
        """The notional the book has traded so far, in starting equities."""

    def bar_values(self, book: Any, outcome: Any) -> dict[str, float]:
        """What one bar logs (equity, position or weights, drawdown, fees, fills)."""

    def summary(self, book: Any) -> str:
        """The book in one line."""

    def data_part(self, data: Any) -> Any:
        """The bars as an MLflow dataset input of the session's run (envs.datasets.DataPart)."""

    def periods_per_year(self, data: Any) -> float:
        """Bars a year, as the backtest annualized."""
