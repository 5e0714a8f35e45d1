"""`paper_poll`: one paper-trading poll of a 500-asset universe (`envs.portfolio.paper.UniversePaper.read`, which
reads only what changed: envs.portfolio.universe_files) vs the whole re-read every poll did before (`load_universe`
over all the files, then the wide table the model is asked with), in the same run on the same files.

The universe: the SYNTHETIC noise universe (`envs.trading.synthetic_universe`, planted=False) of 500 assets x 2,000
hourly bars (`--steps` sets the bars; `--quick`: 8 assets x 200 bars), written in a temporary folder twice: as 500
bars parquets (`save_bars`, one per asset) and as one wide CSV (`ASSET:open ... ASSET:volume` columns, 2,500 of
them, as pandas' to_csv writes them). The session has read the files once before the clock starts; the peer's model-
order copy (milliseconds) is left out.

Rows, for each layout (lower is better; the ratio is platform / peer):
- nothing new: best of 20 polls; the peer's whole read, best of 2.
- one bar appended to every asset: the CSV one row longer, each parquet rewritten with one bar more (as
  `experiments.data update` does); best of 3 rounds, the peer reading the same files each round. Every parquet then
  changed, so the platform loads them all again; the CSV's new rows are parsed alone, but each asset's checks (a
  fixed few ms an asset, whatever its rows) and the universe's rebuild are most of either side's time.
- parquets only: one asset's file rewritten with one bar more, the others as they were.
Each round checks that both sides give the same universe (closes, listing and bar times).
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from experiments.benchmark.common import Budget, Figure, Report

ASSETS, QUICK_ASSETS = 500, 8
TIMEFRAME = "1h"
IDLE_POLLS, PEER_IDLE_READS, ROUNDS = 20, 2, 3


def write_files(frames: dict[str, pd.DataFrame], folder: Path, rows: int) -> tuple[list[str], Path]:
    """Each asset's first `rows` bars as its bars parquet, and all of them as one wide CSV."""
    from envs.trading.data import save_bars

    paths = [str(save_bars(frame.iloc[:rows], folder / f"{symbol}_{TIMEFRAME}.parquet", symbol, TIMEFRAME))
             for symbol, frame in frames.items()]
    table = folder / "universe.csv"
    wide_rows(frames, slice(0, rows)).to_csv(table)
    return paths, table


def wide_rows(frames: dict[str, pd.DataFrame], rows: slice) -> pd.DataFrame:
    """The assets' bars in `rows` as wide-table rows (`ASSET:field` columns)."""
    return pd.DataFrame({f"{symbol}:{field}": frame[field].iloc[rows] for symbol, frame in frames.items()
                         for field in frame.columns}).rename_axis("timestamp")


def best(seconds: Callable[[], float], times: int) -> float:
    return min(seconds() for _ in range(times))


def run(budget: Budget) -> Report:
    from envs.portfolio.paper import UniversePaper, wide_table
    from envs.portfolio.universe import load_universe
    from envs.portfolio.universe_reader import UniverseReader
    from envs.trading.data import save_bars
    from envs.trading.synthetic_universe import synthetic_universe

    n_assets = QUICK_ASSETS if budget.quick else ASSETS
    n_bars = budget.pick(full=2_000, quick=200)
    rounds = 1 if budget.quick else ROUNDS
    frames = synthetic_universe(n_assets, TIMEFRAME, n_bars + 2 * rounds, budget.seed, planted=False)
    symbols = list(frames)
    reader = UniverseReader(symbols=tuple(symbols), features=[], timeframe=TIMEFRAME, window=1, close_only=False)
    figures, details, mismatches = [], {"assets": n_assets, "bars": n_bars, "timeframe": TIMEFRAME}, []

    with tempfile.TemporaryDirectory(prefix="paper_poll_") as folder:
        started = time.perf_counter()
        paths, table = write_files(frames, Path(folder), n_bars)
        details["setup_s"] = round(time.perf_counter() - started, 1)
        details["csv_mb"] = round(table.stat().st_size / 1e6, 1)
        layouts = {"parquet files": paths, "wide CSV": [str(table)]}
        sessions = {name: UniversePaper(reader, sources, follow=True) for name, sources in layouts.items()}
        for session in sessions.values():
            session.read()

        def poll(name: str) -> float:
            started = time.perf_counter()
            sessions[name].read()
            return time.perf_counter() - started

        def peer(name: str) -> float:
            sources = layouts[name]
            started = time.perf_counter()
            universe = (load_universe(None, sources[0], symbols, TIMEFRAME) if len(sources) == 1
                        else load_universe(sources, None, None, None))
            wide_table(universe)
            elapsed = time.perf_counter() - started
            ours = sessions[name].read()[0]
            if not (np.array_equal(ours.closes, universe.closes) and np.array_equal(ours.listed, universe.listed)
                    and ours.timestamps.equals(universe.timestamps)):
                mismatches.append(name)
            return elapsed

        for name in layouts:
            figures.append(Figure(f"{name}: poll with nothing new", "s", best(lambda n=name: poll(n), IDLE_POLLS),
                                  best(lambda n=name: peer(n), PEER_IDLE_READS), higher_is_better=False,
                                  note=f"best of {IDLE_POLLS} polls; peer: best of {PEER_IDLE_READS} whole reads"))
        appended: dict[str, list[tuple[float, float]]] = {name: [] for name in layouts}
        one_file: list[tuple[float, float]] = []
        for round_ in range(rounds):
            rows = n_bars + round_ + 1
            for (symbol, frame), path in zip(frames.items(), paths, strict=True):
                save_bars(frame.iloc[:rows], path, symbol, TIMEFRAME)
            wide_rows(frames, slice(rows - 1, rows)).to_csv(table, mode="a", header=False)
            for name in layouts:
                appended[name].append((poll(name), peer(name)))
        symbol, frame = next(iter(frames.items()))
        for round_ in range(rounds):  # the first asset runs ahead of the others, one bar a round
            save_bars(frame.iloc[:n_bars + rounds + round_ + 1], paths[0], symbol, TIMEFRAME)
            one_file.append((poll("parquet files"), peer("parquet files")))
        for name, samples in appended.items():
            figures.append(Figure(f"{name}: poll after one bar appended to every asset", "s",
                                  min(s[0] for s in samples), min(s[1] for s in samples), higher_is_better=False,
                                  note=f"best of {rounds} rounds, each side"))
        figures.append(Figure("parquet files: poll after one asset's file changed", "s", min(s[0] for s in one_file),
                              min(s[1] for s in one_file), higher_is_better=False,
                              note=f"best of {rounds} rounds, each side"))
        details["samples_s"] = {"appended": appended, "one_file": one_file}
    if mismatches:
        details["error"] = f"the poll and the whole read gave different universes: {', '.join(sorted(set(mismatches)))}"
    details["summary"] = "\n".join(
        f"{figure.what}: {figure.platform * 1e3:.3g} ms vs {figure.peer * 1e3:.3g} ms for the whole re-read "
        f"(the re-read takes {figure.peer / figure.platform:,.3g}x as long)" for figure in figures)
    return Report("paper_poll", __doc__.splitlines()[0], "UniversePaper.read (only what changed)",
                  "whole re-read (load_universe + wide table)", figures, details)
