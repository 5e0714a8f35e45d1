"""What an environment family returns when a trained policy is scored out of sample.

Every env family (trading, agents) scores a policy the same way: it walks the held-out
split, runs the same walk for its non-RL baselines, and returns one `EvaluationReport`.
The experiment layer prints `table`, logs `agent_metrics` to MLflow and plots `series`;
keeping plotting out of `envs/` keeps this package free of matplotlib and Ray.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

# A greedy policy: a batch of observations (n, obs_dim) -> a batch of actions: discrete actions (n,) for a
# Discrete action space, continuous actions (n, action_dim) for a Box one (e.g. trading's target exposure,
# action_dim 1).
Policy = Callable[[np.ndarray], np.ndarray]


@dataclass
class EvaluationReport:
    """Out-of-sample scores of the agent next to its baselines."""

    title: str
    # One row per strategy (the agent first, then baselines), one column per metric.
    table: pd.DataFrame
    # The agent's headline metrics under stable names, e.g. {"eval/sharpe": 0.8}.
    agent_metrics: dict[str, float]
    # One column per strategy, indexed by time or cycle, e.g. equity curves or per-cycle APFD.
    series: pd.DataFrame
    series_label: str
    notes: list[str] = field(default_factory=list)
    # Per-period log returns of each strategy (columns as in `table`), net of costs, on the held-out
    # part's time axis. Families that report them get verdicts across folds and seeds
    # (experiments.results.verdict): deflated Sharpe ratios and the probability of backtest overfitting.
    returns: pd.DataFrame | None = None
    # How many of those periods make a year (the family knows its calendar): annualizes the verdict's Sharpe.
    periods_per_year: float | None = None
    # What the scores were measured on, for the trials ledger (experiments.results.trials_ledger): a digest of the
    # content judged (the data's values over every held-out window, not the file's bytes, so the same bars saved again
    # or with other bars outside those windows are the same ledger), every held-out window of its protocol (all folds,
    # not only those a run scored) and a label.
    data_digest: str | None = None
    windows: tuple[tuple[str, str], ...] = ()
    data_label: str = ""
    # The whole data file's digest (its bytes), which keyed the ledger before data_digest did: a ledger recorded under
    # it on the same windows is found and carried over. None for a family whose ledger key never changed.
    file_digest: str | None = None
    # Model version tags the registry puts on the model this report judged (e.g. the execution agent's guard:
    # apfdc_below_heuristic). A `warning` tag is printed by experiments.serve before the model is served.
    model_tags: dict[str, str] = field(default_factory=dict)
