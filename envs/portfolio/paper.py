"""Paper trading of a universe model, bar by bar with the backtest's book, so a replay of a test window is its
equity curve.

The universe is read as training read it (envs.portfolio.universe: one bars file per asset, or one wide table), in
the registered model's asset order: a file list with an asset missing or extra is refused in one line, and a wide
table gives the model's assets. At every decision bar the model is asked with the universe's last bars as one wide
table (what a served model is posted) and the weights held at that bar's close; the answer's target weights are
filled at the next bar's open with `step_book`, the function the backtest's `replay_weights` steps with, so the
same decisions give the same equity to the last digit.

One thing paper trading cannot know: the backtest gives no weight to an asset whose bars end at the next bar (it
has no bar to fill at). Live, that is learnt one bar later; the asset is then sold at its last close, as the
backtest sells it, at the next rebalance.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from envs.datasets import DataPart, part_digest
from envs.errors import InputError
from envs.portfolio.book import PortfolioBook, step_book
from envs.portfolio.universe import Universe, asset_difference
from envs.portfolio.universe_files import UniverseFiles
from envs.portfolio.universe_reader import CASH, WEIGHT_PREFIX, UniverseReader
from envs.portfolio.universe_table import WIDE_SEPARATOR

# (the wide table's last bars at a decision bar, with the held weights) -> the model's answer rows
Ask = Callable[[pd.DataFrame], pd.DataFrame]


@dataclass
class UniverseBarOutcome:
    """What one bar did to the account."""

    equity: float
    drawdown: float
    weights: np.ndarray        # held at the bar's close, cash first
    rebalanced: bool           # the open filled a target that traded
    cost: float                # the rebalance cost paid at the open (and any sale of an asset whose bars ended)


@dataclass
class UniversePaperBook:
    """The account: the book, the target waiting for the next open, and where in the bars it is."""

    book: PortfolioBook
    decision_interval: int = 1
    pending: list[float] | None = None
    bars_seen: int = 0
    last_bar: str = ""
    equity: float = 1.0
    peak: float = 1.0

    def step(self, row: int, universe: Universe, decide: Callable[[np.ndarray], np.ndarray]) -> UniverseBarOutcome:
        """Step bar `row`: fill the pending target at its open, mark at its close, and ask `decide(held weights)`
        at decision bars (every `decision_interval` bars from the session's first)."""
        rebalances, costs = self.book.rebalances, self.book.costs_paid
        if self.bars_seen > 0:
            target = None if self.pending is None else np.asarray(self.pending)
            self.equity = step_book(self.book, target, row, row, universe.opens, universe.closes, universe.last_rows)
            self.pending = None
        held = self.book.weights(universe.closes[row], self.equity)
        if self.bars_seen % self.decision_interval == 0:
            self.pending = [float(w) for w in decide(held)]
        self.bars_seen += 1
        self.last_bar = universe.timestamps[row].isoformat()
        self.peak = max(self.peak, self.equity)
        return UniverseBarOutcome(self.equity, 1.0 - self.equity / self.peak, held,
                                  self.book.rebalances != rebalances, self.book.costs_paid - costs)

    def to_state(self) -> dict[str, Any]:
        book = self.book
        return {"cost_rate": book.cost_rate, "cash": book.cash, "units": [float(u) for u in book.units],
                "costs_paid": book.costs_paid, "traded_notional": book.traded_notional, "rebalances": book.rebalances,
                "decision_interval": self.decision_interval, "pending": self.pending, "bars_seen": self.bars_seen,
                "last_bar": self.last_bar, "equity": self.equity, "peak": self.peak, "ruined": book.ruined}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "UniversePaperBook":
        book = PortfolioBook(len(state["units"]), state["cost_rate"])
        book.cash, book.units = state["cash"], np.asarray(state["units"], dtype=np.float64)
        book.costs_paid, book.traded_notional = state["costs_paid"], state["traded_notional"]
        book.rebalances, book.ruined = state["rebalances"], state.get("ruined", False)  # a session before the rule
        return cls(book, **{key: state[key] for key in ("decision_interval", "pending", "bars_seen", "last_bar",
                                                        "equity", "peak")})


def wide_table(universe: Universe) -> pd.DataFrame:
    """The universe as the served model reads it: `ASSET:field` columns on the calendar, NaN outside each asset's
    span of bars (its holes are the flat bars the env trades on)."""
    columns = {}
    for symbol, frame in zip(universe.symbols, universe.frames, strict=True):
        on_calendar = frame.reindex(universe.timestamps)
        columns.update({f"{symbol}{WIDE_SEPARATOR}{name}": on_calendar[name].to_numpy() for name in frame.columns})
    return pd.DataFrame(columns, index=universe.timestamps)


def replay_universe(book: UniversePaperBook, universe: Universe, table: pd.DataFrame, rows: range, bars_needed: int,
                    ask: Ask, on_bar: Callable[[pd.Timestamp, UniverseBarOutcome], None] | None = None) -> np.ndarray:
    """Step `book` through `rows`, asking the model with the last `bars_needed` rows of `table` at each decision;
    returns the equity at each row's close."""
    names = [CASH, *universe.symbols]
    equity = np.empty(len(rows))
    for i, row in enumerate(rows):
        def at_close(held: np.ndarray, row: int = row) -> np.ndarray:
            request = table.iloc[max(row + 1 - bars_needed, 0):row + 1].assign(
                **{f"{WEIGHT_PREFIX}{name}": weight for name, weight in zip(names, held, strict=True)})
            answer = ask(request.rename_axis("timestamp"))
            if list(answer["asset"]) != names:
                raise InputError(f"the model answered weights for {', '.join(map(str, answer['asset']))}, not for "
                                 f"{', '.join(names)}: paper-trade it on the universe it was registered with")
            return answer["target_weight"].to_numpy(dtype=np.float64)

        outcome = book.step(row, universe, at_close)
        equity[i] = outcome.equity
        if on_bar is not None:
            on_bar(universe.timestamps[row], outcome)
    return equity


@dataclass
class UniversePaper:
    """Paper trading of a `UniverseReader` model on `sources`: bars files (one per asset, any order) or one wide
    table. Polled for appended bars (envs.portfolio.universe_files: only the files, or the CSV rows, that changed
    are read; a poll with nothing new returns the last poll's universe and table). `follow`: the files are being
    written to, so a CSV's last line without its newline waits for the next poll."""

    reader: UniverseReader
    sources: list[str]
    follow: bool = False
    _files: UniverseFiles = field(init=False, repr=False)
    _last: tuple[Universe, tuple[Universe, pd.DataFrame]] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self._files = UniverseFiles(self.sources, list(self.reader.symbols), self.reader.timeframe, self.follow)

    @classmethod
    def open(cls, reader: UniverseReader, sources: list[str], follow: bool) -> "UniversePaper":
        return cls(reader, sources, follow)

    @property
    def label(self) -> str:
        return ", ".join(self.sources)

    def read(self) -> tuple[Universe, pd.DataFrame]:
        """The universe in the model's order and its wide table: the same objects as the last read's while no file
        changed."""
        universe = self._files.read()
        if self._last is None or self._last[0] is not universe:
            self._last = None  # a universe refused now is refused again at the next poll, not served stale
            self._last = (universe, self.on(universe))
        return self._last[1]

    def on(self, universe: Universe) -> tuple[Universe, pd.DataFrame]:
        """`universe`, already read from the sources (a forward test's env read it), as `read` gives it: checked
        against the model, in its order, and its wide table."""
        ordered = self._in_model_order(universe)
        return ordered, wide_table(ordered)

    def _in_model_order(self, universe: Universe) -> Universe:
        """The universe checked against the model (its assets, timeframe and fields), its assets in the model's
        order."""
        symbols = list(self.reader.symbols)
        given = list(universe.symbols)
        if difference := asset_difference(symbols, given):
            raise InputError(f"{self.label}: the universe's assets differ from the model's ({', '.join(symbols)}): "
                             f"{difference}: give one bars file per model asset, or a wide table with their columns")
        if universe.timeframe != self.reader.timeframe:
            raise InputError(f"{self.label}: {universe.timeframe} bars, but the model trades {self.reader.timeframe} "
                             "bars: give bars of its timeframe")
        if universe.close_only != self.reader.close_only:
            raise InputError(f"{self.label}: {'closes only' if universe.close_only else 'OHLCV bars'}, but the model "
                             f"reads {'closes' if self.reader.close_only else 'OHLCV bars'}: "
                             "give what it was trained on")
        order = [given.index(symbol) for symbol in symbols]

        def in_model_order(array: np.ndarray) -> np.ndarray:  # row-major as the env's, so its dot products sum alike
            return np.ascontiguousarray(array[:, order])

        return Universe(symbols=tuple(symbols), timestamps=universe.timestamps, opens=in_model_order(universe.opens),
                        closes=in_model_order(universe.closes), listed=in_model_order(universe.listed),
                        frames=tuple(universe.frames[i] for i in order), timeframe=universe.timeframe,
                        close_only=universe.close_only, source=universe.source)

    @staticmethod
    def index(data: tuple[Universe, pd.DataFrame]) -> pd.DatetimeIndex:
        return data[0].timestamps

    def new_book(self) -> UniversePaperBook:
        cost_rate = (self.reader.fee_bps + self.reader.slippage_bps) / 1e4
        return UniversePaperBook(PortfolioBook(len(self.reader.symbols), cost_rate),
                                 decision_interval=self.reader.decision_interval)

    @staticmethod
    def book_from_state(state: dict[str, Any]) -> UniversePaperBook:
        return UniversePaperBook.from_state(state)

    def replay(self, book: UniversePaperBook, data: tuple[Universe, pd.DataFrame], rows: range, ask: Ask,
               on_bar: Callable[[pd.Timestamp, UniverseBarOutcome], None] | None = None) -> np.ndarray:
        universe, table = data
        return replay_universe(book, universe, table, rows, self.reader.bars_needed, ask, on_bar)

    @staticmethod
    def traded(book: UniversePaperBook) -> float:
        return book.book.traded_notional

    @staticmethod
    def bar_values(book: UniversePaperBook, outcome: UniverseBarOutcome) -> dict[str, float]:
        """Each bar's metrics: a 500-asset book logs its cash weight and gross exposure, not 500 weights."""
        return {"equity": outcome.equity, "drawdown": outcome.drawdown, "cash_weight": float(outcome.weights[0]),
                "gross_exposure": float(np.abs(outcome.weights[1:]).sum()), "fees_paid": book.book.costs_paid,
                "fills": float(book.book.rebalances), "turnover": book.book.traded_notional,
                **({"fill_cost": outcome.cost} if outcome.rebalanced else {})}

    @staticmethod
    def summary(book: UniversePaperBook) -> str:
        return (f"equity {book.equity:.4f} (started at 1), {book.book.rebalances} rebalances, "
                f"{1 - book.equity / book.peak:.2%} below its peak, last bar {book.last_bar}")

    def data_part(self, data: tuple[Universe, pd.DataFrame]) -> DataPart:
        universe = data[0]
        n = len(universe.timestamps)
        return DataPart(universe.label, "paper", part_digest(universe.window_digest(((0, n),)), 0, n),
                        self.label[:500], n, f"{universe.timestamps[0]}", f"{universe.timestamps[-1]}")

    def periods_per_year(self, data: tuple[Universe, pd.DataFrame]) -> float:
        return self.reader.bars_per_year

    @property
    def key(self) -> str:
        """What names the session's bars (with the model and the start): the files' resolved paths."""
        return ",".join(str(Path(source).resolve()) for source in self.sources)
