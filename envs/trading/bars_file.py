"""The bars file a paper-trading session reads, and reads again as bars arrive.

A bars parquet (what `experiments.data update` appends to, rewriting it whole and atomically) is loaded whole at
each read. A CSV export is read through the importer's checks (`envs.trading.csv_import.import_csv`: layout, grid,
prices, the symbol the file states), and then only from where the last read ended: the rows appended since are
parsed below the file's head, with the last row read before them, so the seam is checked as any two bars are. A
CSV that changed other than by appending (rewritten, newest first) is read whole again.

Both are checked against the model: its symbol and timeframe. Holes are refused unless the file records that they
are deliberate (a parquet imported with `--gaps drop`); a CSV records nothing, so a hole in it is refused, with the
import command that keeps it. Closed days are no holes: a weekend where the file's calendar (recorded, else the
model's) is weekdays.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from envs.errors import InputError
from envs.trading.calendar import ALL_WEEK
from envs.trading.csv_import import head_lines, import_csv, stated_symbol
from envs.trading.data import GAPS_KEPT, find_gaps, is_parquet, load_bars
from envs.trading.symbols import check_symbol


@dataclass
class BarsFile:
    """One bars file (parquet or CSV) for a model trading `symbol` on `timeframe` bars of `calendar`. `follow`: the
    file is being written to, so a CSV's last line without its newline is not read yet."""

    path: str
    symbol: str
    timeframe: str
    follow: bool = False
    calendar: str = ALL_WEEK  # the model's: a CSV records none, and its appended rows are too few to show one
    _bars: pd.DataFrame | None = field(default=None, repr=False)
    _read_to: int = 0          # bytes of the CSV read so far: whole lines
    _head: str = ""            # the CSV's lines above its first bar (attribution, header)
    _last_line: bytes = b""    # the CSV's last line read, with its newline

    @property
    def is_csv(self) -> bool:
        return not is_parquet(self.path)

    def read(self) -> pd.DataFrame:
        """The file's bars now (oldest first), checked against the model; InputError in one line naming the file."""
        if not self.is_csv:
            return self._checked(load_bars(self.path))
        if self._bars is None or not self._read_appended():
            self._read_whole()
        return self._bars

    def _checked(self, bars: pd.DataFrame) -> pd.DataFrame:
        """The model's symbol and timeframe, and holes only where the file records them."""
        fix = f"paper-trade a file of {self.symbol} bars"
        check_symbol(stated_symbol(bars), self.symbol, str(self.path), "the model trades", fix)
        declared = bars.attrs.get("timeframe")
        if declared and declared != self.timeframe:
            raise InputError(f"{self.path}: holds {declared} bars but the model trades {self.timeframe} bars: "
                             f"paper-trade a file of {self.timeframe} bars")
        holes = find_gaps(bars.index, self.timeframe, bars.attrs.get("calendar", self.calendar))
        if holes.missing_bars and bars.attrs.get("gaps") != GAPS_KEPT:
            raise InputError(f"{self.path}: {holes.describe()}, and the file does not record them as deliberate: "
                             f"import it with python -m experiments.data import {self.path} --symbol {self.symbol} "
                             f"--timeframe {self.timeframe} --gaps drop (the holes kept and stepped over, as the env "
                             "does) or --gaps ffill (flat bars), and paper-trade the parquet")
        return bars

    def _import(self, text: str) -> pd.DataFrame:
        bars, report = import_csv(self.path, self.timeframe, gaps=GAPS_KEPT, symbol=self.symbol, text=text)
        bars.attrs = {"symbol": report.symbol or self.symbol, "timeframe": self.timeframe, "gaps": "error",
                      "calendar": self.calendar}
        return self._checked(bars)

    def _read_whole(self) -> None:
        path = Path(self.path)
        if not path.is_file():
            raise InputError(f"{self.path}: bars file not found (a bars parquet or a CSV export)")
        data = path.read_bytes()
        end = whole_lines(data, self.follow)
        text = data[:end].decode("utf-8-sig", errors="replace")
        self._bars = self._import(text)
        lines = [line for line in text.splitlines() if line.strip()]
        self._head = "\n".join(lines[:head_lines(lines)])
        self._read_to, self._last_line = end, last_line(data, end)

    def _read_appended(self) -> bool:
        """Read the rows appended since the last read; False when the file changed otherwise (read it whole)."""
        path = Path(self.path)
        size = path.stat().st_size
        if size < self._read_to:
            return False
        if size == self._read_to:
            return True
        with path.open("rb") as handle:
            handle.seek(self._read_to - len(self._last_line))
            data = handle.read()
        if not data.startswith(self._last_line):
            return False
        end = whole_lines(data, self.follow)
        appended = data[len(self._last_line):end].decode("utf-8-sig", errors="replace")
        if not appended.strip():
            return True
        seam = data[:end].decode("utf-8-sig", errors="replace")
        new = self._import(f"{self._head}\n{seam}" if self._head else seam)
        last = self._bars.index[-1]
        if new.index[0] != last or not new.iloc[0].equals(self._bars.iloc[-1]):
            return False  # not oldest first: the appended rows are not after the bars read
        bars = pd.concat([self._bars, new.iloc[1:]])
        bars.attrs = self._bars.attrs
        self._bars = self._checked(bars)
        self._read_to += end - len(self._last_line)
        self._last_line = last_line(data, end)
        return True


def whole_lines(data: bytes, follow: bool) -> int:
    """How many bytes of `data` are whole lines: a file being written to (`follow`) may end in half a line, which
    waits; a finished file without a last newline is read to its end."""
    return data.rfind(b"\n") + 1 if follow else len(data)


def last_line(data: bytes, end: int) -> bytes:
    """The last line of `data[:end]` as it stands in the file (its line ending included)."""
    return data[data.rfind(b"\n", 0, max(end - 1, 0)) + 1:end]
