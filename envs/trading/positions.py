"""What a trading action means: the index of a target position in a discrete set, or the target exposure itself.

Discrete sets (`long_flat`, `long_short`) give whole positions: the action indexes `POSITION_SETS`. Continuous
positions (`continuous`, `continuous_long_short`) size the position: the action is the target exposure, the fraction
of equity held in the coin, clipped into `EXPOSURE_BOUNDS`. Both go to the same ledger (`envs.trading.ledger`) as a
target fraction, so an exposure of exactly 0, 1 or -1 trades as the discrete target does.

`min_hold` (discrete sets only): a position is held for at least that many decisions before it may change. Every
path that turns a policy's action into a position applies it through one function, `hold_rule`: the env and the
batched env (on action indices), and the served model's reader and the paper book (on targets), so a backtest, a
served decision and a paper replay agree.

Numpy only (no gymnasium): a served policy's bar reader (`envs.trading.bar_reader`) decides with these too.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from envs.errors import InputError

POSITION_SETS = {"long_flat": (0.0, 1.0), "long_short": (-1.0, 0.0, 1.0)}
# Continuous positions: (low, high) of the target exposure; below 0 is a short of that fraction of equity.
EXPOSURE_BOUNDS = {"continuous": (0.0, 1.0), "continuous_long_short": (-1.0, 1.0)}
# A continuous target closer than this to the held exposure is not traded: rebalancing dust costs a fee for nothing.
DEFAULT_MIN_TRADE = 0.02


def hold_rule(asked: Any, held: Any, held_for: Any, min_hold: int) -> tuple[np.ndarray, np.ndarray]:
    """`min_hold`'s rule for one decision: (the applied action or target, the held position's age after it).

    `held_for` is the number of decisions the held position has been held, counted up to `min_hold` (a new account
    starts at `min_hold`: its flat start is free to change). While it is below `min_hold` the asked action is
    overridden by the held one. The age after the decision is 1 when the applied position differs from the held one,
    else one more (at most `min_hold`). Scalars or per-sub-env arrays alike (the batched env passes arrays): the
    results are numpy values of the inputs' types, so every caller gets the same numbers."""
    applied = np.where(np.less(held_for, min_hold), held, asked)
    return applied, np.where(applied == held, np.minimum(np.add(held_for, 1), min_hold), 1)


def is_continuous(positions: str) -> bool:
    """Whether `positions` (TradingConfig.positions) sizes the position instead of picking one from a set."""
    return positions in EXPOSURE_BOUNDS


def can_short(positions: str) -> bool:
    """Whether targets below 0 exist: only then are margin calls possible."""
    return min(POSITION_SETS.get(positions) or EXPOSURE_BOUNDS[positions]) < 0.0


def exposure_target(action: Any, low: float, high: float) -> float:
    """A continuous action's target exposure: its one value (an array of shape (1,) or a number) clipped into
    [low, high]. Adding 0.0 turns a -0.0 into 0.0, as `np.clip(...) + 0.0` in the vector env, so both hold the same
    bits. A NaN or a wrongly shaped action is refused: it would silently turn the ledger's cash into NaN."""
    values = np.asarray(action)  # no copy of an array: this runs every env step
    value = float(values.item()) if values.size == 1 else math.nan
    if math.isnan(value):
        raise InputError(f"trading env: a continuous action is one number in [{low:g}, {high:g}], got "
                         f"{np.array2string(values.reshape(-1), threshold=4)}")
    return min(max(value, low), high) + 0.0


def policy_action(output: Any, continuous: bool) -> int | np.ndarray:
    """The action for the first observation of a policy's batch: an index from discrete actions (n,), or the
    exposure (shape (1,), float64, not rounded to float32) from continuous actions (n, 1) or (n,)."""
    first = np.asarray(output)[0]
    return np.asarray(first, dtype=np.float64).reshape(-1) if continuous else int(first)
