"""The `retrain:` section of an experiment file: how `python -m experiments.retrain` makes and judges a challenger.

```yaml
retrain:
  mode: incremental        # warm-start from the champion's checkpoint on the newest fold; full: the whole sweep again
  forward_bars: 720        # the newest bars, which neither model trains or is selected on: the forward test
  incremental:
    iterations: 3          # training iterations of the warm-started trial
    settings: {training.epsilon: [[0, 0.1], [4000, 0.02]]}   # on top of the champion's configuration
  gate: {min_dsr_vs_champion: 0.95, min_dsr_vs_baselines: 0.95, max_pbo: 0.5}
  refit: false             # true: after the gate, the champion's configuration trained through the newest bar
```
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from envs.validation import StrictModel


class GateSection(StrictModel):
    """What a challenger must show on the forward test to replace the champion (it must also have the higher
    forward Sharpe)."""

    min_dsr_vs_champion: float = Field(
        default=0.95, ge=0, le=1,
        description="The least deflated Sharpe ratio (over every challenger tried) of the challenger's forward "
                    "returns in excess of the champion's; higher demands surer evidence.")
    min_dsr_vs_baselines: float = Field(
        default=0.95, ge=0, le=1,
        description="The least deflated Sharpe ratio of the challenger's forward returns in excess of each "
                    "baseline's.")
    max_pbo: float = Field(
        default=0.5, ge=0, le=1,
        description="The most probability of backtest overfitting the challenger sweep may have, when it has one "
                    "(a full sweep with 2+ trials).")


class IncrementalSection(StrictModel):
    """The warm-started trial of mode: incremental."""

    iterations: int = Field(default=3, ge=1, description="Training iterations of the warm-started trial.")
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="Dotted settings applied on top of the champion's configuration, e.g. {training.epsilon: "
                    "[[0, 0.1], [4000, 0.02]]} (a warm policy explores less).")


class RetrainSection(StrictModel):
    """How `python -m experiments.retrain` makes a challenger and judges it (module docstring)."""

    mode: Literal["incremental", "full"] = Field(
        default="incremental",
        description="incremental warm-starts one trial from the champion's checkpoint on the newest fold; full runs "
                    "the whole sweep again.")
    forward_bars: int = Field(
        default=720, ge=2,
        description="The newest bars, which neither model trains or is selected on: the forward test that judges "
                    "the challenger.")
    incremental: IncrementalSection = Field(
        default_factory=IncrementalSection,
        description="mode incremental: the warm-started trial's length and settings.")
    gate: GateSection = Field(default_factory=GateSection,
                              description="The evidence a challenger needs to be promoted over the champion.")
    refit: bool = Field(
        default=False, strict=True,
        description="After the gate, train the champion's configuration (its searched values, seed and the "
                    "iterations of its checkpoint) on every bar through the newest, holding none out, and register it "
                    "as its own version under the refit alias, which serves (docs/operations.md); --refit does it "
                    "for one retrain.")
