"""One contract for every env family's baselines: a named strategy with the family's one signature.

A result means something only next to what a non-learning rule gets on the same held-out data. Each family keeps
its baselines in one ordered table (`baseline_table`); its scorer runs the agent and every entry through the same
code (the trading ledger, the same CI cycles, the same fuzzing env and seeds), so adding a baseline is one entry.
The first entry is the family's headline baseline: the one a per-group summary sets the agent against.

The signatures, one per family:
- trading (`envs.trading.backtest.BASELINES`): closes, first row, end row -> target positions for those rows,
  decided from closes up to each row;
- test prioritization (`envs.agents.testprio.baselines.BASELINES`): a cycle, a random generator -> an order;
- test generation (`envs.agents.testgen.baselines.BASELINES`): number of actions, seed -> a `Strategy` that acts
  on observations and hears back the coverage each action found.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Generic, TypeVar

Decide = TypeVar("Decide", bound=Callable)


@dataclass(frozen=True)
class Baseline(Generic[Decide]):
    """A non-learning strategy the agent is scored next to."""

    name: str       # its row in the report's table and its column in the returns (e.g. buy_and_hold)
    decide: Decide  # the family's signature
    why: str        # what it stands for: a floor, the rule practitioners use, an upper bound


def baseline_table(*baselines: Baseline[Decide]) -> tuple[Baseline[Decide], ...]:
    """The family's baselines in report order, headline first; a name used twice is a programming error."""
    names = [baseline.name for baseline in baselines]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated or "agent" in names:
        raise ValueError(f"baseline names must be unique and not 'agent': {repeated or ['agent']}")
    return baselines
