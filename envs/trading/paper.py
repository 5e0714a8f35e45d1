"""A paper account stepped bar by bar with the backtest's ledger, so a replay of a test window is its equity curve.

The first bar of a session only decides (it is the backtest's row `lo`: equity 1, no fill). Each later bar fills
the target decided at the previous close at its open and marks equity at its close (`ledger.trade_bar`, what
`simulate_positions` steps through), then decides again if it is a decision bar (every `decision_interval` bars
from the first, as the env decides). After a margin call the account is flat and decides no more. The whole state
is a small JSON-able dict, so a paper-trading run resumes from its last logged state and replays the bars after
it: the same bars give the same fills, none twice and none missed. Targets are whole positions or, for a model with
continuous positions, any exposure in its bounds: the ledger carries the env's `min_trade`, so a paper account leaves
the same small moves untraded as the backtest. A model trained with `min_hold` holds a position for at least that many
decisions here too: the book keeps the held position's age (`held_for`, in its state), sends it with the bars (a
`held_for` column, which the served model reads) and applies the env's rule (`envs.trading.positions.hold_rule`) to
the target it gets back, so a decision that ignored the age still trades as the backtest did.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from envs.errors import InputError
from envs.trading.data import GAPS_KEPT
from envs.trading.ledger import Ledger, trade_bar
from envs.trading.positions import hold_rule

# (the bars up to a decision bar, the held position) -> the target position decided at its close
Decide = Callable[[pd.DataFrame, float], float]


@dataclass
class BarOutcome:
    """What one bar did to the account."""

    equity: float
    position: float          # held after the bar's open fill
    drawdown: float
    decided: float | None    # the target decided at this bar's close (None: not a decision bar)
    fill: dict[str, float] | None  # the open's fill, if one happened


@dataclass
class PaperBook:
    """The account: the ledger, the target waiting for the next open, and where in the bars it is."""

    ledger: Ledger
    decision_interval: int = 1
    pending: float = 0.0
    bars_seen: int = 0
    last_bar: str = ""       # ISO time of the last bar stepped
    equity: float = 1.0
    peak: float = 1.0
    min_hold: int = 1        # decisions a position is held before it may change (1: no minimum)
    held_for: int = 1        # the held position's age in decisions, counted up to min_hold (a new book: min_hold)

    def step(self, bar_time: str, open_price: float, close: float,
             decide: Callable[[float], float]) -> BarOutcome:
        """Step one bar; `decide(held position) -> target` is asked at decision bars only, and min_hold's rule
        applied to its answer."""
        fill = None
        if self.bars_seen > 0:
            before = (self.ledger.trades, self.ledger.units, self.ledger.fees_paid)
            self.equity = trade_bar(self.ledger, self.pending, open_price, close)
            if self.ledger.trades != before[0]:
                fill = {"units": self.ledger.units - before[1], "fee": self.ledger.fees_paid - before[2],
                        "open": open_price, "margin_call": float(self.ledger.margin_called)}
        decided = None
        if self.ledger.margin_called:
            self.pending = 0.0
        elif self.bars_seen % self.decision_interval == 0:
            decided = float(decide(self.ledger.position))
            if self.min_hold > 1:
                applied, held_for = hold_rule(decided, self.ledger.position, self.held_for, self.min_hold)
                decided, self.held_for = float(applied), int(held_for)
            self.pending = decided
        self.bars_seen += 1
        self.last_bar = bar_time
        self.peak = max(self.peak, self.equity)
        return BarOutcome(self.equity, self.ledger.position, 1.0 - self.equity / self.peak, decided, fill)

    def to_state(self) -> dict[str, Any]:
        return {**asdict(self), "ledger": asdict(self.ledger)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "PaperBook":
        return cls(**{**state, "ledger": Ledger(**state["ledger"])})


def new_book(reader: Any) -> PaperBook:
    """A flat account trading as the model's env did (`reader`: its envs.trading.bar_reader.BarReader)."""
    return PaperBook(Ledger(fee_rate=reader.fee_bps / 1e4, slippage_rate=reader.slippage_bps / 1e4,
                            maintenance_margin=reader.maintenance_margin, min_trade=reader.min_trade),
                     decision_interval=reader.decision_interval, min_hold=reader.min_hold,
                     held_for=reader.min_hold)


def replay(book: PaperBook, bars: pd.DataFrame, rows: range, bars_needed: int, decide: Decide,
           on_bar: Callable[[pd.Timestamp, BarOutcome], None] | None = None) -> np.ndarray:
    """Step `book` through `rows` of `bars` (oldest first), giving `decide` the last `bars_needed` bars at each
    decision (with min_hold, and a `held_for` column: the held position's age); returns equity at each row's close."""
    opens, closes = bars["open"].to_numpy(), bars["close"].to_numpy()
    equity = np.empty(len(rows))
    for i, row in enumerate(rows):
        stamp = bars.index[row]

        def at_close(held: float, row: int = row) -> float:
            window = bars.iloc[max(row + 1 - bars_needed, 0):row + 1]
            return decide(window.assign(held_for=book.held_for) if book.min_hold > 1 else window, held)

        outcome = book.step(stamp.isoformat(), float(opens[row]), float(closes[row]), at_close)
        equity[i] = outcome.equity
        if on_bar is not None:
            on_bar(stamp, outcome)
    return equity


@dataclass
class SpotPaper:
    """Paper trading of a `BarReader` model on one bars file (parquet or CSV export, envs.trading.bars_file), read
    again at each poll so appended bars are traded."""

    reader: Any              # envs.trading.bar_reader.BarReader
    sources: list[str]
    follow: bool = False

    @classmethod
    def open(cls, reader: Any, sources: list[str], follow: bool) -> "SpotPaper":
        """`follow`: the file is being appended to (a CSV's last line without its newline waits)."""
        return cls(reader, sources, follow)

    def __post_init__(self) -> None:
        from envs.trading.bars_file import BarsFile

        if len(self.sources) != 1:
            raise InputError(f"--bars {' '.join(self.sources)}: this model trades one market "
                             f"({self.reader.symbol}): give its one bars file")
        self._file = BarsFile(self.sources[0], self.reader.symbol, self.reader.timeframe, follow=self.follow,
                              calendar=self.reader.calendar)

    @property
    def label(self) -> str:
        return self.sources[0]

    def read(self) -> pd.DataFrame:
        return self._file.read()

    @staticmethod
    def index(data: pd.DataFrame) -> pd.DatetimeIndex:
        return data.index

    def new_book(self) -> PaperBook:
        return new_book(self.reader)

    @staticmethod
    def book_from_state(state: dict[str, Any]) -> PaperBook:
        return PaperBook.from_state(state)

    def replay(self, book: PaperBook, bars: pd.DataFrame, rows: range, ask: Callable[[pd.DataFrame], pd.DataFrame],
               on_bar: Callable[[pd.Timestamp, BarOutcome], None] | None = None) -> np.ndarray:
        """`ask` is given the last bars, the held position (with min_hold, its held_for too) and, for a file that
        records its holes (imported with --gaps drop), a gaps column saying so: the model then steps over them as the
        env did."""
        extra = {"gaps": GAPS_KEPT} if bars.attrs.get("gaps") == GAPS_KEPT else {}

        def decide(window: pd.DataFrame, held: float) -> float:
            return float(ask(window.assign(position=held, **extra))["target_position"].iloc[0])

        return replay(book, bars, rows, self.reader.bars_needed, decide, on_bar)

    @staticmethod
    def traded(book: PaperBook) -> float:
        return book.ledger.traded_notional

    @staticmethod
    def bar_values(book: PaperBook, outcome: BarOutcome) -> dict[str, float]:
        return {"equity": outcome.equity, "position": outcome.position, "drawdown": outcome.drawdown,
                "fees_paid": book.ledger.fees_paid, "fills": float(book.ledger.trades),
                **{f"fill_{k}": v for k, v in (outcome.fill or {}).items()}}

    @staticmethod
    def summary(book: PaperBook) -> str:
        return (f"equity {book.equity:.4f} (started at 1), {book.ledger.trades} fills, "
                f"{1 - book.equity / book.peak:.2%} below its peak, last bar {book.last_bar}")

    def data_part(self, bars: pd.DataFrame) -> Any:
        from envs.trading.datasets import bars_part

        return bars_part(self.label, bars)

    def periods_per_year(self, bars: pd.DataFrame) -> float:
        return self.reader.periods_per_year(bars)

    @property
    def key(self) -> str:
        """What names the session's bars (with the model and the start): the file's resolved path."""
        return str(Path(self.sources[0]).resolve())
