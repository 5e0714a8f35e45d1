"""The verdict: does the agent have an edge, judged over every fold and seed, deflated for the search.

Input: every trial of one group (fold x seed x searched configuration), each scored once on its fold's
test part (`EvaluationReport` with per-period returns of the agent and the baselines). Per fold, the
configuration with the best mean validation score over seeds is *the agent* of that fold: its seeds
are its test results. Across folds:

- mean and spread of the agent's test Sharpe over folds x seeds, and how many folds it wins against
  each baseline (by the mean test Sharpe of its seeds);
- the deflated Sharpe ratio (Bailey & Lopez de Prado 2014) of the agent's walk-forward return series
  in excess of each baseline: the probability that its true Sharpe beats the best Sharpe that the
  number of configurations tried would produce by luck, given the spread of all trials' Sharpes. The
  configurations tried are every one the trials ledger (experiments.results.trials_ledger) has recorded on the
  same data and test windows, earlier runs included (`PriorTrials`); the DSR is also given at the
  effective number of trials, the participation ratio of their returns' correlations;
- the probability of backtest overfitting (Bailey et al. 2017) by CSCV over every trial's
  out-of-sample return series on one time axis (one column per configuration x seed of this run).

An edge over a baseline is *supported* when its DSR is at least 0.95 and the agent wins more than half
of the folds against it, and the verdict has no caveat (one split, one seed, missing folds or seeds): a
verdict that says it is not enough for a verdict supports nothing, since a champion is promoted on it.
When several groups (coins) are judged at once, the DSR threshold is Bonferroni-adjusted
(`family_threshold`), or one coin in twenty would pass by luck. DSR and PBO come from `purgedcv`
(pinned; checked against the formulas by hand in tests/unit/test_verdict.py).
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from purgedcv import (
    deflated_sharpe_ratio_full,
    probabilistic_sharpe_ratio,
    probability_of_backtest_overfitting,
)
from scipy.stats import norm

from envs.report import EvaluationReport
from experiments.records.learning_curves import CurveJudgement, not_flattened_note

DSR_THRESHOLD = 0.95  # for one verdict; n verdicts at once (coins) use 1 - 0.05 / n (family_threshold)
AGENT = "agent"
PBO_MAX_BLOCKS = 16      # CSCV's standard S (12,870 splits)
PBO_MIN_BLOCK_ROWS = 10  # fewer blocks when the series is short
EULER_GAMMA = 0.5772156649015329
TABLE_METRICS = ("total_return", "sharpe", "sortino", "max_drawdown", "trades", "fees_paid", "turnover", "exposure",
                 "target_exposure")


@dataclass(frozen=True)
class ScoredTrial:
    """One trained model, scored once on its fold's test part."""

    fold: int
    seed: int
    point: str          # its searched configuration, e.g. "lr=0.00031" ("default" when nothing is searched)
    validation: float   # tune.metric of the checkpoint that was scored
    report: EvaluationReport
    curve: CurveJudgement | None = None  # whether its validation curve had flattened when it stopped


@dataclass(frozen=True)
class PriorTrials:
    """What the trials ledger holds of earlier attempts on the same data and test windows."""

    trial_returns: pd.DataFrame = field(default_factory=pd.DataFrame)          # configuration x seed columns
    configuration_returns: pd.DataFrame = field(default_factory=pd.DataFrame)  # one column per configuration
    configurations: int = 0   # configurations they scored, duplicates included
    attempts: int = 0
    note: str = ""            # e.g. that a fresh ledger was started, when and why


@dataclass(frozen=True)
class Edge:
    """The evidence for an edge over one baseline."""

    baseline: str
    dsr: float          # median over seeds; NaN when the agent's excess returns never vary
    sharpe: float       # annualized Sharpe of the agent's excess returns (median over seeds)
    sharpe_star: float  # the annualized Sharpe that luck alone reaches over the configurations tried
    wins: int
    folds: int
    threshold: float = DSR_THRESHOLD
    dsr_effective: float = float("nan")  # the DSR at the effective number of trials instead of the count
    left_out: tuple[str, ...] = ()  # seeds whose DSR could not be computed, and why (said in the verdict line)
    caveats: tuple[str, ...] = ()   # the verdict's (e.g. "one seed"): any of them and the edge is not supported

    @property
    def supported(self) -> bool:
        """Strong evidence from a whole verdict: a DSR at the threshold, more than half the folds won, and no caveat
        (a one-seed DSR of 0.98 is one draw, and a supported verdict can make a champion)."""
        return bool(self.dsr >= self.threshold) and self.wins * 2 > self.folds and not self.caveats

    def word(self) -> str:
        """'supported', or 'not supported' followed by the caveats that forbid it, for the verdict line."""
        if self.supported:
            return "supported"
        return f"not supported: {', '.join(self.caveats)}" if self.caveats else "not supported"


@dataclass
class Verdict:
    per_fold: pd.DataFrame       # (fold, strategy) rows: test period, selected configuration, metrics
    summary: pd.DataFrame        # strategy rows: Sharpe mean/std over folds x seeds, wins, trades
    edges: list[Edge]
    returns: pd.DataFrame        # out-of-sample returns, time x trial (configuration | seed)
    selected: dict[int, str]     # fold -> configuration chosen on its validation part
    n_folds: int
    n_seeds: int
    n_configurations: int     # in this run
    threshold: float = DSR_THRESHOLD
    n_tried: int = 0          # on these data and windows, earlier runs included (the trials ledger)
    n_effective: float = 0.0  # the participation ratio of all of them
    attempt: int = 1          # this run's number on these data and windows
    ledger_note: str = ""
    missing: str = ""         # planned folds and seeds with no finished trial, e.g. "fold 3 seed 1 missing"
    ledger_key: str = ""      # the trials ledger's key of these data and windows (LedgerKey.id); "" without one
    curves: str = ""          # how many trials had not flattened when they stopped (learning_curves); "" when all had

    @functools.cached_property
    def pbo(self) -> Any | None:
        """purgedcv.PBOResult over this run's trial columns (None with fewer than two), computed when first read:
        CSCV's 12,870 splits take purgedcv about 1.5 s per column here, so it covers this run, not the ledger."""
        return _pbo(self.returns)

    @property
    def caveats(self) -> list[str]:
        return list(verdict_caveats(self.n_folds, self.n_seeds, self.missing))

    def scope(self) -> str:
        earlier = f" ({self.n_configurations} in this run)" if self.n_tried != self.n_configurations else ""
        text = (f"attempt {self.attempt} on these windows: {self.n_tried} configuration(s) tried{earlier}, effective "
                f"{self.n_effective:.1f}; {self.n_folds} fold(s) x {self.n_seeds} seed(s), "
                f"{self.returns.shape[1]} trial series")
        if self.ledger_note:
            text += f"; {self.ledger_note}"
        if self.threshold != DSR_THRESHOLD:
            text += f", DSR threshold {self.threshold:.4g}"
        return text + (f" [{', '.join(self.caveats)}: not enough for a verdict]" if self.caveats else "")

    def lines(self) -> list[str]:
        """One line per baseline, e.g. 'edge over buy_and_hold: not supported (DSR 0.31, PBO 0.62, ...)', or with a
        caveat 'edge over flat: not supported: one seed (DSR 0.98, ...)'."""
        pbo = "n/a" if self.pbo is None else f"{self.pbo.pbo:.2f}"
        return [f"edge over {e.baseline}: {e.word()} "
                f"(DSR {_fmt(e.dsr)}, {_fmt(e.dsr_effective)} at effective {self.n_effective:.1f}, PBO {pbo}, "
                f"agent wins {e.wins} of {e.folds} folds{_left_out(e)})"
                for e in self.edges]

    def notes(self) -> list[str]:
        """What the reader should know beside the edges, not a caveat that forbids one: trials whose validation curve
        was still rising when they stopped."""
        return [self.curves] if self.curves else []

    def tags(self) -> dict[str, str]:
        """Words for the MLflow runs table, which filters tags by value: `verdict.<baseline>` = supported |
        not_supported per baseline, and the ledger's key and attempt on these data and windows."""
        tags = {f"verdict.{e.baseline}": "supported" if e.supported else "not_supported" for e in self.edges}
        if self.ledger_key:
            tags.update({"ledger.key": self.ledger_key, "ledger.attempt": str(self.attempt)})
        return tags

    def metrics(self) -> dict[str, float]:
        """Flat numbers for MLflow (NaN-free)."""
        values: dict[str, float] = {}
        agent = self.summary.loc[AGENT]
        values["verdict/agent_sharpe_mean"] = float(agent["sharpe_mean"])
        values["verdict/agent_sharpe_std"] = float(agent["sharpe_std"])
        values["verdict/agent_trades_median"] = float(agent["trades_median"])
        values["verdict/attempt"] = float(self.attempt)
        values["verdict/configurations_tried"] = float(self.n_tried)
        values["verdict/effective_trials"] = self.n_effective
        for edge in self.edges:
            values[f"verdict/dsr/{edge.baseline}"] = edge.dsr
            values[f"verdict/dsr_effective/{edge.baseline}"] = edge.dsr_effective
            values[f"verdict/wins/{edge.baseline}"] = float(edge.wins)
            values[f"verdict/supported/{edge.baseline}"] = float(edge.supported)
        if self.pbo is not None:
            values["verdict/pbo"] = float(self.pbo.pbo)
        values["verdict/folds"], values["verdict/seeds"] = float(self.n_folds), float(self.n_seeds)
        return {k: v for k, v in values.items() if math.isfinite(v)}


def verdict_caveats(n_folds: int, n_seeds: int, missing: str) -> tuple[str, ...]:
    """What makes a verdict not enough for one: one split, one seed, or planned folds and seeds that have no result."""
    caveats = []
    if n_folds == 1:
        caveats.append("one split")
    if n_seeds == 1:
        caveats.append("one seed")
    if missing:
        caveats.append(missing)
    return tuple(caveats)


def _left_out(edge: Edge) -> str:
    return f"; DSR without {'; '.join(edge.left_out)}" if edge.left_out else ""


def _fmt(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{value:.2f}"


def per_period_sharpe(returns: np.ndarray) -> float:
    """Mean over standard deviation (ddof 0, as in purgedcv's PSR); 0 for a series that never varies."""
    std = float(np.std(returns))
    return float(np.mean(returns) / std) if std > 0 and np.ptp(returns) > 0 else 0.0


def select_configurations(trials: list[ScoredTrial], mode: str) -> dict[int, str]:
    """Per fold, the configuration whose seeds score best on average on the fold's validation part."""
    pick = max if mode == "max" else min
    chosen = {}
    for fold in sorted({t.fold for t in trials}):
        scores: dict[str, list[float]] = {}
        for trial in trials:
            if trial.fold == fold:
                scores.setdefault(trial.point, []).append(trial.validation)
        chosen[fold] = pick(sorted(scores), key=lambda point: float(np.mean(scores[point])))
    return chosen


def _stitch(trials: list[ScoredTrial], column: str) -> pd.Series:
    """One series over the folds' test parts, in time order."""
    parts = [t.report.returns[column] for t in sorted(trials, key=lambda t: t.fold)]
    return pd.concat(parts).sort_index()


def _trial_series(trials: list[ScoredTrial], folds: list[int]) -> pd.DataFrame:
    """Every configuration x seed that has a test result in every fold, as one column each."""
    columns = {}
    for point in sorted({t.point for t in trials}):
        for seed in sorted({t.seed for t in trials}):
            members = [t for t in trials if t.point == point and t.seed == seed]
            if sorted(t.fold for t in members) == folds:
                columns[f"{point} | seed {seed}"] = _stitch(members, AGENT)
    return pd.DataFrame(columns)


def _pbo(returns: pd.DataFrame) -> Any | None:
    if returns.shape[1] < 2:
        return None
    rows = len(returns)
    blocks = min(PBO_MAX_BLOCKS, rows // PBO_MIN_BLOCK_ROWS)
    blocks -= blocks % 2
    if blocks < 2:
        return None
    return probability_of_backtest_overfitting(returns.to_numpy().T, n_splits=blocks)


def family_threshold(judged: int) -> float:
    """The DSR an edge needs when `judged` verdicts are read together (e.g. 20 coins): Bonferroni's
    1 - 0.05 / n, so that luck passes one of them with at most the 5% chance it has for one verdict."""
    return 1.0 - (1.0 - DSR_THRESHOLD) / max(judged, 1)


def expected_max_z(n_trials: float) -> float:
    """The standardized expected maximum of `n_trials` independent Sharpe ratios under the null (Bailey & Lopez
    de Prado 2014), for a fractional (effective) number of trials too: 0 for one trial or fewer, and never
    below 0 (the approximation is for many trials; between 1 and 1.3 it would go negative)."""
    if n_trials <= 1:
        return 0.0
    value = ((1 - EULER_GAMMA) * norm.ppf(1 - 1 / n_trials)
             + EULER_GAMMA * norm.ppf(1 - 1 / (n_trials * math.e)))
    return max(float(value), 0.0)


def distinct_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """The columns, each series once: a rerun that reproduced a configuration bit for bit adds no evidence and
    must not shrink the spread of trial Sharpes."""
    seen: set[bytes] = set()
    keep = []
    for column in range(frame.shape[1]):
        values = np.ascontiguousarray(frame.iloc[:, column].to_numpy(dtype=np.float64))
        digest = hashlib.sha1(values.tobytes()).digest()
        keep.append(digest not in seen)
        seen.add(digest)
    return frame.loc[:, keep]


def participation_ratio(returns: pd.DataFrame) -> float:
    """The effective number of independent series: (sum of the correlation matrix's eigenvalues)^2 / (sum of their
    squares) = M^2 / sum(C_ij^2). It is 1 for identical series and M for uncorrelated ones, continuous in
    between, and needs no threshold or random restarts (docs/verdicts.md: why not clustering). Correlations are
    pairwise over the rows two series share; two that share none count as uncorrelated."""
    columns = distinct_columns(returns)
    m = columns.shape[1]
    if m <= 1:
        return float(m)
    corr = columns.corr(min_periods=3).to_numpy()
    corr = np.nan_to_num(corr, nan=0.0)
    np.fill_diagonal(corr, 1.0)
    return float(m * m / np.sum(corr * corr))


def _edge(baseline: str, agent_series: dict[int, pd.Series | None], base: pd.Series, trial_returns: pd.DataFrame,
          n_tried: int, n_effective: float, wins: int, folds: int, periods_per_year: float,
          threshold: float) -> Edge:
    excess_of_trials = trial_returns.reindex(base.index).sub(base, axis=0)
    trial_sharpes = [per_period_sharpe(excess_of_trials[c].dropna().to_numpy()) for c in excess_of_trials]
    variance = float(np.var(trial_sharpes, ddof=1)) if len(trial_sharpes) > 1 else 0.0
    effective_star = math.sqrt(variance) * expected_max_z(n_effective)
    results, effective, left_out = [], [], []
    for seed, series in agent_series.items():
        if series is None:
            left_out.append(f"seed {seed}: not scored on every fold")
            continue
        excess = (series - base).to_numpy()
        if np.ptp(excess) == 0:  # e.g. an agent that never trades, against flat: no evidence either way
            left_out.append(f"seed {seed}: its excess returns never vary")
            continue
        try:
            results.append(deflated_sharpe_ratio_full(excess, n_trials=n_tried, var_sharpe=variance))
            effective.append(probabilistic_sharpe_ratio(excess, benchmark_skill=effective_star))
        except ValueError:  # moments too extreme for PSR's normal approximation: no claim from this seed
            left_out.append(f"seed {seed}: its returns' moments are too extreme for the DSR")
    scale = math.sqrt(periods_per_year)
    if not results:
        return Edge(baseline, float("nan"), 0.0, float("nan"), wins, folds, threshold, left_out=tuple(left_out))
    return Edge(baseline, float(np.median([r.dsr for r in results])),
                float(np.median([r.observed_sr for r in results])) * scale,
                float(np.median([r.sr_star for r in results])) * scale, wins, folds, threshold,
                float(np.median(effective)), tuple(left_out))


def _fold_rows(fold: int, members: list[ScoredTrial], point: str) -> dict[tuple[int, str], dict[str, Any]]:
    """The fold's agent (mean over the selected configuration's seeds) and baselines (same test period)."""
    table = members[0].report.table
    returns = members[0].report.returns
    period = {"test_start": returns.index[0], "test_end": returns.index[-1]}
    agent = pd.DataFrame([m.report.table.loc[AGENT] for m in members])
    rows = {(fold, AGENT): {**period, "configuration": point, "seeds": len(members),
                            **{m: float(agent[m].mean()) for m in TABLE_METRICS if m in agent},
                            "sharpe_std": float(agent["sharpe"].std(ddof=0))}}
    for name in table.index.drop(AGENT):
        rows[(fold, name)] = {**period, "configuration": "", "seeds": 0,
                              **{m: float(table.loc[name, m]) for m in TABLE_METRICS if m in table.columns}}
    return rows


def configuration_series(trial_returns: pd.DataFrame) -> pd.DataFrame:
    """One column per configuration: the mean of its seeds' columns ("<configuration> | seed <s>")."""
    if trial_returns.empty:
        return trial_returns
    names = [column.rsplit(" | seed ", 1)[0] for column in trial_returns.columns]
    return trial_returns.T.groupby(names, sort=False).mean().T


def build_verdict(trials: list[ScoredTrial], mode: str, periods_per_year: float,
                  threshold: float = DSR_THRESHOLD, prior: PriorTrials | None = None, missing: str = "",
                  seeds_spanned: int | None = None) -> Verdict:
    """The verdict of one group's trials (see the module docstring); `threshold`: the DSR an edge needs; `prior`:
    what the trials ledger holds of earlier attempts on the same data and windows; `missing`: the planned folds and
    seeds with no finished trial (a caveat: with it no edge is supported); `seeds_spanned`: how many seeds each trial's
    result stands for when it is more than one (an ensemble of seeds' members), which the caveat "one seed" reads."""
    prior = prior or PriorTrials()
    if not trials or any(t.report.returns is None for t in trials):
        raise ValueError("a verdict needs test-period returns for every trial")
    folds = sorted({t.fold for t in trials})
    selected = select_configurations(trials, mode)
    chosen = {fold: [t for t in trials if t.fold == fold and t.point == selected[fold]] for fold in folds}
    rows: dict[tuple[int, str], dict[str, Any]] = {}
    for fold in folds:
        rows.update(_fold_rows(fold, sorted(chosen[fold], key=lambda t: t.seed), selected[fold]))
    per_fold = pd.DataFrame.from_dict(rows, orient="index")
    per_fold.index = pd.MultiIndex.from_tuples(per_fold.index, names=["fold", "strategy"])

    seeds = sorted({t.seed for t in trials})
    agent_series = {seed: _stitch([t for fold in folds for t in chosen[fold] if t.seed == seed], AGENT)
                    if all(any(t.seed == seed for t in chosen[fold]) for fold in folds) else None
                    for seed in seeds}
    # The report's returns name the baselines a verdict is about; a row of the table only (e.g. the portfolio
    # family's best asset in hindsight) is shown, never judged against.
    baselines = [name for name in trials[0].report.returns.columns if name != AGENT]
    trial_returns = _trial_series(trials, folds)
    n_configurations = len({t.point for t in trials})
    n_tried = n_configurations + prior.configurations
    every_trial = distinct_columns(pd.concat([trial_returns, prior.trial_returns], axis=1))
    n_effective = participation_ratio(pd.concat([configuration_series(trial_returns),
                                                 prior.configuration_returns], axis=1))
    agent_sharpes = per_fold.xs(AGENT, level="strategy")["sharpe"]
    n_seeds = seeds_spanned or len(seeds)
    caveats = verdict_caveats(len(folds), n_seeds, missing)
    edges = []
    for name in baselines:
        base_sharpes = per_fold.xs(name, level="strategy")["sharpe"]
        wins = int((agent_sharpes > base_sharpes).sum())
        base = _stitch([chosen[fold][0] for fold in folds], name)
        edges.append(dataclasses.replace(_edge(name, agent_series, base, every_trial, n_tried, n_effective, wins,
                                               len(folds), periods_per_year, threshold), caveats=caveats))
    summary = _summary(chosen, per_fold, baselines, edges)
    return Verdict(per_fold=per_fold, summary=summary, edges=edges,
                   returns=trial_returns, selected=selected, n_folds=len(folds), n_seeds=n_seeds,
                   n_configurations=n_configurations, threshold=threshold, n_tried=n_tried, n_effective=n_effective,
                   attempt=prior.attempts + 1, ledger_note=prior.note, missing=missing,
                   curves=not_flattened_note(t.curve for t in trials if t.curve is not None))


def _summary(chosen: dict[int, list[ScoredTrial]], per_fold: pd.DataFrame,
             baselines: list[str], edges: list[Edge]) -> pd.DataFrame:
    """Across folds x seeds for the agent, across folds for the baselines; the evidence against each."""
    agent = pd.DataFrame([t.report.table.loc[AGENT] for members in chosen.values() for t in members])
    rows = {AGENT: {"sharpe_mean": agent["sharpe"].mean(), "sharpe_std": agent["sharpe"].std(ddof=0),
                    "return_mean": agent["total_return"].mean(), "return_std": agent["total_return"].std(ddof=0),
                    "trades_median": per_fold.xs(AGENT, level="strategy")["trades"].median(),
                    "agent_wins": np.nan, "dsr_of_excess": np.nan, "results": len(agent)}}
    for name, edge in zip(baselines, edges, strict=True):
        frame = per_fold.xs(name, level="strategy")
        rows[name] = {"sharpe_mean": frame["sharpe"].mean(), "sharpe_std": frame["sharpe"].std(ddof=0),
                      "return_mean": frame["total_return"].mean(), "return_std": frame["total_return"].std(ddof=0),
                      "trades_median": frame["trades"].median(), "agent_wins": edge.wins,
                      "dsr_of_excess": edge.dsr, "results": len(frame)}
    return pd.DataFrame.from_dict(rows, orient="index")
