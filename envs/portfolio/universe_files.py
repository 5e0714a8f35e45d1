"""A universe's files as a paper-trading session polls them: each poll reads only what changed since the last.

- One bars parquet per asset (`data_paths`): a file is loaded again (`envs.portfolio.universe.file_asset`: the
  loader's validation, the symbol and timeframe checks) only when its size or modification time changed.
- A universe parquet (`experiments.data import --universe`) is read whole when its size or time changed.
- A wide CSV is read whole once through the importer's checks (`envs.portfolio.universe_table.check_table`), then
  only the rows appended since: its header, the last row read and the new rows are checked as one small table, on
  the timeframe, gap rule and each asset's calendar that the whole read found (a few rows show no calendar). The
  last row read must come back unchanged (the seam), and then each asset's new bars are appended to its bars. A CSV
  that changed other than by appending (rewritten, rows out of order, an asset trading again after its last price)
  or whose new rows fail a check is read whole again, which says what is wrong in one line. While the file is being
  written to (`follow`), a last line without its newline waits for the next poll. As with one asset's CSV
  (envs.trading.bars_file), a rewrite that keeps the last row read at the same byte offset reads as an append.

When nothing changed, a poll costs one `os.stat` per file and returns the universe built last time (the same
object); when something did, the universe is built again from each asset's bars (`build_universe`). A file behind
a URI (s3://) has no cheap stat: it is read whole at every poll.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

import pandas as pd

from envs.datasets import read_bytes
from envs.errors import InputError
from envs.portfolio.universe import Universe, build_universe, file_asset, file_frames
from envs.portfolio.universe_table import CheckedTable, asset_field, check_table, read_table
from envs.trading.bars_file import last_line, whole_lines
from envs.trading.data import is_parquet, is_uri, say_once

FileStamp = tuple[int, int]  # (st_size, st_mtime_ns)
Frames = dict[str, pd.DataFrame]


def file_stamp(path: str) -> FileStamp | None:
    """A local file's size and modification time; None for a URI or a file that cannot be stat'ed (its reader then
    says what is wrong with it)."""
    if is_uri(path):
        return None
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


@dataclass
class AssetFiles:
    """One bars parquet per asset; each file's bars are kept while its size and time stay the same."""

    paths: list[str]
    _held: dict[str, tuple[FileStamp, tuple[str, pd.DataFrame]]] = field(default_factory=dict, repr=False)

    @property
    def source(self) -> str:
        return ", ".join(self.paths)

    def read(self) -> tuple[Frames, bool, bool]:
        """Each asset's bars, False (OHLCV), and whether any file was loaded again."""
        loaded: list[str] = []

        def read_one(path: str) -> tuple[str, pd.DataFrame]:
            stamp, held = file_stamp(path), self._held.get(path)
            if stamp is None or held is None or held[0] != stamp:
                held = (stamp, file_asset(path))  # stat'ed before it is read: a write in between is read next poll
                if stamp is not None:
                    self._held[path] = held
                loaded.append(path)
            return held[1]

        return file_frames(self.paths, read_one), False, bool(loaded)


@dataclass
class TableFile:
    """One wide table (CSV or universe parquet) of `assets` (None: all) on `timeframe` bars (None: the table's)."""

    path: str
    assets: list[str] | None
    timeframe: str | None
    follow: bool = False
    _table: CheckedTable | None = field(default=None, repr=False)
    _stamp: FileStamp | None = field(default=None, repr=False)
    _read_to: int = field(default=0, repr=False)        # bytes of the CSV read so far: whole lines
    _header: str = field(default="", repr=False)        # the CSV's first line, with its newline
    _last_line: bytes = field(default=b"", repr=False)  # the CSV's last line read, with its newline

    @property
    def source(self) -> str:
        return self.path

    @property
    def is_csv(self) -> bool:
        return not is_parquet(self.path)

    def read(self) -> tuple[Frames, bool, bool]:
        """Each asset's bars, whether the table holds closes only, and whether anything was read."""
        stamp = file_stamp(self.path)
        if self._table is not None and stamp is not None and stamp == self._stamp:
            return self._table.frames, self._table.close_only, False
        appended = (self._append(stamp[0]) if self._table is not None and stamp is not None and self.is_csv
                    else None)
        if appended is None:
            self._read_whole()
            appended = True
        self._stamp = stamp
        return self._table.frames, self._table.close_only, appended

    def _read_whole(self) -> None:
        self._table, self._stamp = None, None  # a failed read leaves nothing stale to serve at the next poll
        if not self.is_csv:
            self._table = check_table(self.path, self.assets, self.timeframe)
            return
        data = read_bytes(self.path, "wide table")
        end = whole_lines(data, self.follow)
        self._table = check_table(self.path, self.assets, self.timeframe,
                                  text=data[:end].decode("utf-8-sig", errors="replace"))
        header_end = data.find(b"\n") + 1
        self._header = data[:header_end].decode("utf-8-sig", errors="replace")
        self._read_to, self._last_line = end, last_line(data, end)

    def _append(self, size: int) -> bool | None:
        """Read the rows appended since the last read: True when there were some, False when there were none yet,
        None when the file changed otherwise or the rows fail a check (read it whole)."""
        if size < self._read_to:
            return None
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self._read_to - len(self._last_line))
                data = handle.read()
        except OSError:  # gone since its stat: the whole read says so in one line
            return None
        if not data.startswith(self._last_line):
            return None
        end = whole_lines(data, self.follow)
        if not data[len(self._last_line):end].strip():
            return False
        text = self._header + data[:end].decode("utf-8-sig", errors="replace")
        try:
            frames = self._appended_frames(text)
        except InputError:
            return None
        if frames is None:
            return None
        self._table = replace(self._table, frames=frames)
        self._read_to += end - len(self._last_line)
        self._last_line = last_line(data, end)
        return True

    def _appended_frames(self, text: str) -> Frames | None:
        """Each asset's bars with the new rows of `text` (header, the last row read, the new rows) appended; None
        when they do not continue the bars held (the seam differs, or an asset whose bars ended has prices again)."""
        held = self._table.frames
        latest = max(frame.index[-1] for frame in held.values())
        ended = {asset for asset, frame in held.items() if frame.index[-1] < latest}
        if ended and _has_prices(read_table(self.path, text), ended):
            return None
        by_calendar: dict[str, list[str]] = {}
        for asset, frame in held.items():
            if asset not in ended:
                by_calendar.setdefault(frame.attrs["calendar"], []).append(asset)
        frames, notes = dict(held), []
        for calendar, assets in by_calendar.items():
            checked = check_table(self.path, assets, self._table.timeframe, self._table.gaps, calendar, say=False,
                                  text=text)
            new, notes = checked.frames, notes + list(checked.notes)
            for asset in assets:
                old, rows = held[asset], new[asset]
                if rows.index[0] != latest or not rows.iloc[0].equals(old.iloc[-1]):
                    return None
                joined = pd.concat([old, rows.iloc[1:]])
                joined.attrs = old.attrs
                frames[asset] = joined
        for note in notes:  # what the checks did to the new rows (a gap filled, ...), once they are kept
            say_once(self.path, note)
        return frames


def _has_prices(table: pd.DataFrame, assets: set[str]) -> bool:
    """Whether any cell of `assets`' columns in `table` is filled (a number, or text the whole read refuses)."""
    columns = [column for column in table.columns if (parsed := asset_field(column)) and parsed[0] in assets]
    return bool(table[columns].notna().to_numpy().any())


@dataclass
class UniverseFiles:
    """The universe of `sources` (one bars parquet per asset, or one wide table of `assets` on `timeframe` bars),
    read again at each `read` as far as its files changed."""

    sources: list[str]
    assets: list[str] | None = None
    timeframe: str | None = None
    follow: bool = False
    _files: AssetFiles | TableFile = field(init=False, repr=False)
    _universe: Universe | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if len(self.sources) == 1:  # a universe of files has two or more
            self._files = TableFile(self.sources[0], self.assets, self.timeframe, self.follow)
        else:
            self._files = AssetFiles(self.sources)

    def read(self) -> Universe:
        """The universe now: the object built last time when no file changed."""
        frames, close_only, changed = self._files.read()
        if changed or self._universe is None:
            self._universe = None  # a build that fails is tried again at the next poll, not served stale
            self._universe = build_universe(frames, self._files.source, close_only)
        return self._universe
