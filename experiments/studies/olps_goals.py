"""The OLPS goal (issue 52): the direct learner against OLMAR and UCRP on universal-portfolios' NYSE(O), TSE and DJIA.

    .venv/bin/python -m experiments.studies.olps_goals                       # DJIA, TSE, then NYSE(O)
    .venv/bin/python -m experiments.studies.olps_goals --sets djia --set training.lr=0.003

The library ships each set as a price table: one row a day, one column an asset, prices of cumulated daily relatives,
no dates, anonymous assets (TSE's include `[`, `\\` and non-ASCII names). Each is written as a close-only universe
(`ASSET:close` columns on a time index, the format `environment.env_config.table_path` reads: docs/portfolio.md,
"Bring your own universe") under --output, through the importer's own checks (envs/portfolio/universe_table.py), with:

- **dates**: the exchange's sessions from the set's published first day, one row a session (exchange_calendars), so a
  year is about 252 bars and the Sharpe is annualized as the platform annualizes stocks: NYSE(O) and DJIA on XNYS
  from 1962-07-03 and 2001-01-16 (the first session on or after the published 2001-01-14), TSE on XTSE from
  1994-01-04 (its 1,259 rows end on 1998-12-31, the published last day). The dates are labels: NYSE(O)'s 5,651 rows
  end at 1984-09-27 and DJIA's 507 at 2003-01-24, not at the published last days, because the sets hold fewer or more
  days than those exchanges' sessions.
- **names**: a name of ASCII letters and digits is kept (case kept: NYSE(O) has both `A` and `a`); any other
  (`[`, `\\`, `~`, non-ASCII), or one that repeats an earlier one, becomes `C` and its 1-based column position
  (`[` in column 27 -> `C27`).

Then each set runs through the platform (`experiments.api.run`, the same pipeline as `python -m experiments.run
conf/direct_portfolio_stocks.yaml --set environment.env_config.table_path=TABLE --set evaluation.protocol=...`): the
stock conf's learner and costs (5 + 2 bps), the inputs that met the goal on NYSE(O) (OLPS_SETTINGS: OLMAR's signal
z-scored across the assets, a 10-day window, kappa 20), a walk-forward protocol sized to the set (PROTOCOLS), folds x
seeds, the verdict against UCRP, UBAH, OLMAR, PAMR and the others, each run counted by the trials ledger. The
ledger lives in the study's own MLflow store (--output/mlruns, unless --tracking-uri or MLFLOW_TRACKING_URI says
otherwise), so every attempt on a set, tuning included, deflates the next verdict on it: keep the folder between
attempts. Extra `--set KEY=VALUE` go to every set's run (tuning: training.lr, environment.env_config.features, ...).

From each run's verdict (`RunResult.verdict()`): the agent's Sharpe mean and sd over folds x seeds, OLMAR's and
UCRP's over folds, the DSR of the agent's excess over UCRP and over OLMAR (and at the ledger's effective N), whether
each edge is supported, the ledger's attempt and effective N, and whether OLMAR itself beats UCRP on the set (its
Sharpe, its folds won, and the probabilistic Sharpe ratio of its daily excess over UCRP: one fixed rule, nothing
searched, so nothing to deflate). The table is printed as markdown and written to --output/goals.md; every run's row
is appended to --output/attempts.jsonl, and --output/attempts.md lists them all with their overrides.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from envs.errors import InputError
from experiments.shell import exit_code, terminal_console

if TYPE_CHECKING:
    from experiments.api.result import RunResult

CONF = Path("conf/direct_portfolio_stocks.yaml")
DEFAULT_OUTPUT = Path("runs/olps")
NAME_FORM = re.compile(r"[A-Za-z0-9]+")
TIMEFRAME, GAPS = "1d", "ffill"
GOAL_DSR = 0.95  # the verdict's threshold for one set


@dataclass(frozen=True)
class DataSet:
    """One of the library's sets: its name there, how the docs name it, the exchange whose sessions date its rows,
    the first session, and the walk-forward protocol sized to its length."""

    key: str
    label: str
    calendar: str
    start: str
    protocol: dict[str, Any]


# Sized to each set's length: test windows tile its end; each fold validates on the rows before its test window
# and trains on everything before that (the first fold's train part must hold the conf's 60-day trend warm-up, the
# 20-day window and a 50-decision mini-batch with room to draw its start).
DATA_SETS = {
    # 507 days: 2 x 100 test days, 60 validation days; fold 0 trains on the first 237 rows
    "djia": DataSet("djia", "DJIA", "XNYS", "2001-01-16",
                    {"type": "walk_forward", "folds": 2, "train": "expanding", "validation_size": 60,
                     "test_size": 100, "embargo": 5}),
    # 1,259 days: 3 x 200 test days, 120 validation days; fold 0 trains on the first 529 rows
    "tse": DataSet("tse", "TSE", "XTSE", "1994-01-04",
                   {"type": "walk_forward", "folds": 3, "train": "expanding", "validation_size": 120,
                    "test_size": 200, "embargo": 5}),
    # 5,651 days: the stock conf's own protocol, 4 x 750 test days, 500 validation days; fold 0 trains on 2,141 rows
    "nyse_o": DataSet("nyse_o", "NYSE(O)", "XNYS", "1962-07-03",
                      {"type": "walk_forward", "folds": 4, "train": "expanding", "validation_size": 500,
                       "test_size": 750, "embargo": 5}),
}


def sanitize_names(names: Sequence[object]) -> list[str]:
    """Asset names the wide table's `ASSET:close` columns can carry: ASCII letters and digits kept as written, any
    other name or a repeat becomes `C<position>` (1-based); a clash of the two is refused."""
    out: list[str] = []
    for position, name in enumerate(names, start=1):
        text = str(name)
        out.append(text if NAME_FORM.fullmatch(text) and text not in out else f"C{position}")
    if len(set(out)) != len(out):
        clash = sorted({name for name in out if out.count(name) > 1})
        raise InputError(f"asset names: {', '.join(clash)} is both a column's own name and another column's "
                         "position name: rename that column")
    return out


def sessions(calendar: str, start: str, count: int) -> pd.DatetimeIndex:
    """The first `count` sessions of the exchange from `start`, at 00:00 UTC (how daily bars are stamped)."""
    import exchange_calendars

    first = pd.Timestamp(start)
    exchange = exchange_calendars.get_calendar(calendar, start=first, end=first + pd.Timedelta(days=2 * count + 30))
    days = exchange.sessions[exchange.sessions >= first][:count]
    if len(days) < count:
        raise InputError(f"{calendar}: {len(days)} sessions from {start}, {count} rows to date")
    return pd.DatetimeIndex(days.tz_localize(None), name="timestamp").tz_localize("UTC")


def price_table(prices: pd.DataFrame, data_set: DataSet) -> pd.DataFrame:
    """The set's prices as a close-only wide table: one row a session, `ASSET:close` columns of sanitized names."""
    names = sanitize_names(list(prices.columns))
    table = pd.DataFrame(prices.to_numpy(dtype=float), columns=[f"{name}:close" for name in names],
                         index=sessions(data_set.calendar, data_set.start, len(prices)))
    return table


def write_table(prices: pd.DataFrame, data_set: DataSet, folder: Path) -> Path:
    """Check the table as the importer does (`experiments.data import --universe`) and write it as a universe parquet
    recording its timeframe, calendar and gap rule; the path is the run's `table_path`."""
    from envs.portfolio.universe_table import check_table, save_universe

    table = price_table(prices, data_set)
    source = str(folder / f"{data_set.key}.csv")  # named in messages; the text is checked in place of a file
    checked = check_table(source, None, TIMEFRAME, GAPS, data_set.calendar, say=False, text=table.to_csv())
    return save_universe(checked, folder / f"{data_set.key}.parquet")


# The inputs that met the goal on NYSE(O) (docs/learning.md, "OLPS data sets", attempt 5): OLMAR's signal (the 5-day
# trend, up to a monotone map) z-scored across the assets, a 10-day window, a sharper softmax and a smaller net. The
# bundled stocks' own conf keeps its slow features: on 2011-2022's large caps these inputs trade daily reversion that
# no longer pays (Sharpe 0.48 against 0.67 with the conf's inputs, both counted by that universe's ledger).
OLPS_SETTINGS = ("environment.env_config.features=[log_return, {transform: trend, window: 5, cross_section: zscore}]",
                 "environment.env_config.kappa=20", "environment.env_config.window=10",
                 "training.model_hiddens=[32, 32]")


def run_overrides(data_set: DataSet, table: Path, extra: Sequence[str]) -> list[str]:
    """The --set lines of one set's run: its table, its protocol, its own experiment name, the study's inputs
    (OLPS_SETTINGS), then the caller's (which win)."""
    protocol = json.dumps(data_set.protocol)  # JSON is YAML: parsed back as the mapping
    return [f"environment.env_config.table_path={table.resolve()}", f"evaluation.protocol={protocol}",
            f"name=olps_{data_set.key}_direct", *OLPS_SETTINGS, *extra]


def olmar_against_ucrp(result: "RunResult", periods_per_year: float) -> dict[str, float]:
    """OLMAR's own evidence over UCRP on the set's test windows: folds won (by Sharpe) and the probabilistic Sharpe
    ratio of its daily excess (one fixed rule, nothing searched, so not deflated), annualized excess Sharpe."""
    from purgedcv import probabilistic_sharpe_ratio

    from experiments.results.verdict import per_period_sharpe

    verdict = result.verdict()
    sharpes = verdict.per_fold["sharpe"].unstack("strategy")
    outcome = next(iter(result.groups.values()))
    by_fold = {trial.fold: report.returns for trial, report in outcome.scored}
    returns = pd.concat([by_fold[fold] for fold in sorted(by_fold)]).sort_index()
    excess = (returns["olmar"] - returns["ucrp"]).to_numpy()
    try:
        psr = float(probabilistic_sharpe_ratio(excess, benchmark_skill=0.0))
    except ValueError:  # moments too extreme for the normal approximation
        psr = math.nan
    return {"olmar_folds_won": int((sharpes["olmar"] > sharpes["ucrp"]).sum()), "olmar_psr_over_ucrp": psr,
            "olmar_excess_sharpe": per_period_sharpe(excess) * math.sqrt(periods_per_year)}


def goal_row(data_set: DataSet, result: "RunResult", extra: Sequence[str], seconds: float) -> dict[str, Any]:
    """One set's numbers from its run's verdict, or why there are none."""
    row: dict[str, Any] = {"set": data_set.label, "status": result.status, "overrides": list(extra),
                           "minutes": round(seconds / 60.0, 1), "date": time.strftime("%Y-%m-%d %H:%M")}
    verdict = result.verdict()
    if verdict is None:
        return {**row, "why": "; ".join(result.partial) or "no verdict"}
    summary = verdict.summary
    edges = {edge.baseline: edge for edge in verdict.edges}
    row.update({
        "folds": verdict.n_folds, "seeds": verdict.n_seeds,
        "agent_sharpe": float(summary.loc["agent", "sharpe_mean"]),
        "agent_sharpe_sd": float(summary.loc["agent", "sharpe_std"]),
        "olmar_sharpe": float(summary.loc["olmar", "sharpe_mean"]),
        "ucrp_sharpe": float(summary.loc["ucrp", "sharpe_mean"]),
        "dsr_ucrp": edges["ucrp"].dsr, "dsr_ucrp_effective": edges["ucrp"].dsr_effective,
        "supported_ucrp": edges["ucrp"].supported, "wins_ucrp": edges["ucrp"].wins,
        "dsr_olmar": edges["olmar"].dsr, "dsr_olmar_effective": edges["olmar"].dsr_effective,
        "supported_olmar": edges["olmar"].supported, "wins_olmar": edges["olmar"].wins,
        "attempt": verdict.attempt, "configurations_tried": verdict.n_tried, "effective_n": verdict.n_effective,
        "agent_turnover": float(verdict.per_fold.xs("agent", level="strategy")["turnover"].mean())
        if "turnover" in verdict.per_fold else math.nan,
    })
    periods = next(iter(result.groups.values())).report.periods_per_year
    row.update(olmar_against_ucrp(result, periods))
    row["goal"] = bool(row["agent_sharpe"] >= row["olmar_sharpe"] and row["dsr_ucrp"] >= GOAL_DSR
                       and row["supported_ucrp"])
    return row


def _number(value: Any, digits: int = 2) -> str:
    return "n/a" if value is None or (isinstance(value, float) and not math.isfinite(value)) else f"{value:.{digits}f}"


def markdown(rows: Sequence[dict[str, Any]], with_overrides: bool = False) -> str:
    """The goal table: one row per set's run."""
    head = ["set", "folds x seeds", "agent Sharpe (mean ± sd)", "OLMAR Sharpe", "UCRP Sharpe",
            "DSR over UCRP (at eff. N)", "DSR over OLMAR (at eff. N)", "attempt", "configs / eff. N",
            "OLMAR beats UCRP? (folds, PSR)", "goal"]
    if with_overrides:
        head = ["when", *head, "overrides"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        if "agent_sharpe" not in row:
            cells = [row["set"], row["status"], row.get("why", ""), *[""] * (len(head) - 4 - with_overrides * 2),
                     "missed"]
        else:
            folds = row["folds"]
            olmar_beats = "yes" if row["olmar_sharpe"] > row["ucrp_sharpe"] else "no"
            cells = [
                row["set"], f"{folds} x {row['seeds']}",
                f"{_number(row['agent_sharpe'])} ± {_number(row['agent_sharpe_sd'])}",
                _number(row["olmar_sharpe"]), _number(row["ucrp_sharpe"]),
                f"{_number(row['dsr_ucrp'])} ({_number(row['dsr_ucrp_effective'])})"
                f"{' supported' if row['supported_ucrp'] else ''}",
                f"{_number(row['dsr_olmar'])} ({_number(row['dsr_olmar_effective'])})"
                f"{' supported' if row['supported_olmar'] else ''}",
                str(row["attempt"]), f"{row['configurations_tried']} / {_number(row['effective_n'], 1)}",
                f"{olmar_beats} ({row['olmar_folds_won']} of {folds}, {_number(row['olmar_psr_over_ucrp'])})",
                "met" if row["goal"] else "missed",
            ]
        if with_overrides:
            cells = [row["date"], *cells, " ".join(f"`{item}`" for item in row["overrides"]) or "(conf as shipped)"]
        lines.append("| " + " | ".join(str(cell) for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m experiments.studies.olps_goals", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="djia,tse,nyse_o",
                        help=f"comma-separated, in this order (default djia,tse,nyse_o; known: {', '.join(DATA_SETS)})")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="an override for every set's run, e.g. training.lr=0.003 (the table and protocol are "
                             "the study's)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT,
                        help="tables, runs, the MLflow store and its trials ledger (default runs/olps; keep it)")
    parser.add_argument("--tracking-uri", default=None,
                        help="MLflow store (and trials ledger); default MLFLOW_TRACKING_URI, else OUTPUT/mlruns")
    parser.add_argument("--tables-only", action="store_true", help="write the three tables and stop (no runs)")
    return parser.parse_args(argv)


def chosen_sets(text: str) -> list[DataSet]:
    keys = [key.strip() for key in text.split(",") if key.strip()]
    unknown = [key for key in keys if key not in DATA_SETS]
    if unknown or not keys:
        raise InputError(f"--sets {text!r}: unknown {', '.join(unknown) or 'none given'}: use any of "
                         f"{', '.join(DATA_SETS)}")
    return [DATA_SETS[key] for key in keys]


def main(argv: list[str] | None = None) -> int:
    return exit_code(lambda: study(parse_args(argv)))


def study(args: argparse.Namespace) -> int:
    import os

    from envs.portfolio.olps import bundled_prices
    from experiments.config.files import parse_overrides

    data_sets = chosen_sets(args.sets)
    parse_overrides(args.overrides)  # a malformed --set is refused before any table is written
    output = args.output.resolve()
    tables = output / "tables"
    tables.mkdir(parents=True, exist_ok=True)
    written = {data_set.key: write_table(bundled_prices(data_set.key), data_set, tables) for data_set in data_sets}
    for key, path in written.items():
        print(f"{DATA_SETS[key].label}: {path}")
    if args.tables_only:
        return 0
    from experiments import api
    from experiments.tracking.store import SQLITE_PREFIX

    tracking = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or \
        f"{SQLITE_PREFIX}{output / 'mlruns' / 'mlflow.db'}"
    os.environ["MLFLOW_TRACKING_URI"] = tracking  # the run's store and trials ledger, and its Ray workers'
    rows = []
    for data_set in data_sets:
        started = time.monotonic()
        result = api.run(CONF, run_overrides(data_set, written[data_set.key], args.overrides),
                         api.RunOptions(output=output / "runs" / data_set.key),
                         on_event=api.events_to_console(terminal_console()))
        row = goal_row(data_set, result, args.overrides, time.monotonic() - started)
        rows.append(row)
        with open(output / "attempts.jsonl", "a") as log:
            log.write(json.dumps(row, default=str) + "\n")
    table = markdown(rows)
    print(table)
    (output / "goals.md").write_text(table)
    every = [json.loads(line) for line in (output / "attempts.jsonl").read_text().splitlines() if line.strip()]
    (output / "attempts.md").write_text(markdown(every, with_overrides=True))
    print(f"wrote {output / 'goals.md'} and {output / 'attempts.md'} (tracking: {tracking})")
    return 0 if all(row["status"] == "ok" for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
