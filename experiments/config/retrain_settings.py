"""The `retrain:` section of an experiment file: how `python -m experiments.retrain` makes and judges a challenger.

```yaml
retrain:
  mode: incremental        # warm-start from the champion's checkpoint on the newest fold; full: the whole sweep again
  forward_bars: 720        # the newest bars, which neither model trains or is selected on: the forward test
  incremental:
    iterations: 3          # training iterations of the warm-started trial
    settings: {training.epsilon: [[0, 0.1], [4000, 0.02]]}   # on top of the champion's configuration
  gate: {min_dsr_vs_champion: 0.95, min_dsr_vs_baselines: 0.95, max_pbo: 0.5}
```
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from envs.validation import StrictModel


class GateSection(StrictModel):
    # Deflated Sharpe ratio (over every challenger tried) of the challenger's forward excess returns over the
    # champion's, and over each baseline's; the challenger must also have the higher forward Sharpe.
    min_dsr_vs_champion: float = Field(default=0.95, ge=0, le=1)
    min_dsr_vs_baselines: float = Field(default=0.95, ge=0, le=1)
    # The challenger sweep's probability of backtest overfitting, when it has one (a full sweep with 2+ trials).
    max_pbo: float = Field(default=0.5, ge=0, le=1)


class IncrementalSection(StrictModel):
    iterations: int = Field(default=3, ge=1)
    # Dotted settings applied on top of the champion's configuration (e.g. a shorter exploration schedule).
    settings: dict[str, Any] = Field(default_factory=dict)


class RetrainSection(StrictModel):
    mode: Literal["incremental", "full"] = "incremental"
    forward_bars: int = Field(default=720, ge=2)
    incremental: IncrementalSection = Field(default_factory=IncrementalSection)
    gate: GateSection = Field(default_factory=GateSection)
