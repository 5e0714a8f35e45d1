"""Whether a trial's validation curve had flattened when it stopped, and how many iterations ago it last improved.

One notion of improvement serves both `tune.plateau`'s stopper (experiments/sweep/plateau.py) and the judgement of
every finished trial (experiments/results/trials.py), so it lives below both rooms: an iteration makes a *new best*
when its value beats the running best by more than `min_delta` (higher for mode max, lower for min); the first
scored iteration is the first best; an iteration without a finite value (no evaluation ran, no episode ended) makes
none. `iterations_since_best` counts the iterations after the last new best.

The rule (docs/learning.md, "Budgets from learning curves"): a trial of n iterations had *flattened* when it stopped
iff it made no new best over the last third of its iterations (n // 3 of them), i.e. iterations_since_best >= n // 3.
A trial with fewer than 3 iterations, or that was never scored, is too short to tell and counts as not flattened.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

MIN_ITERATIONS = 3  # below this a third of the curve is less than one iteration: too short to tell


def is_score(value: Any) -> bool:
    """A finite real number (an iteration that reported none, or NaN, is not scored)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def improves(value: float, best: float | None, mode: str, min_delta: float) -> bool:
    """Whether `value` is a new best against the running `best` (None: nothing scored yet)."""
    if best is None:
        return True
    return value > best + min_delta if mode == "max" else value < best - min_delta


def iterations_since_best(values: Sequence[Any], mode: str, min_delta: float = 0.0) -> int | None:
    """Iterations after the last new best (0: the last iteration made one); None when no iteration was scored."""
    best: float | None = None
    best_at: int | None = None
    for index, value in enumerate(values):
        if is_score(value) and improves(float(value), best, mode, min_delta):
            best, best_at = float(value), index
    return None if best_at is None else len(values) - 1 - best_at


@dataclass(frozen=True)
class CurveJudgement:
    """One trial's validation curve as the rule reads it."""

    iterations: int
    since_best: int | None  # iterations after its last new best; None: never scored

    @property
    def too_short(self) -> bool:
        return self.iterations < MIN_ITERATIONS or self.since_best is None

    @property
    def flattened(self) -> bool:
        """No new best over the last third of its iterations (a curve too short to tell has not flattened)."""
        return not self.too_short and self.since_best >= self.iterations // 3

    def word(self) -> str:
        """'flattened', 'still improving' or 'too short to tell', e.g. for a trial's MLflow tag."""
        if self.too_short:
            return "too short to tell"
        return "flattened" if self.flattened else "still improving"


def judge_curve(values: Sequence[Any], mode: str, min_delta: float = 0.0) -> CurveJudgement:
    """The rule of the module docstring on one trial's per-iteration values."""
    return CurveJudgement(len(values), iterations_since_best(values, mode, min_delta))


def validation_curve(rows: Any, metric: str) -> list[float]:
    """`metric`'s value at each training iteration from a trial's results table (Tune's `Result.metrics_dataframe`:
    one row per reported iteration, "/"-joined columns). An iteration reported twice (a trial retried from its last
    checkpoint reports the iterations after it again) counts once, as last reported; NaN where it lacks the metric."""
    if rows is None or len(rows) == 0 or "training_iteration" not in rows:
        return []
    last = rows.drop_duplicates("training_iteration", keep="last").sort_values("training_iteration")
    if metric not in last:
        return [math.nan] * len(last)
    return [float(v) if is_score(v) else math.nan for v in last[metric]]


def not_flattened_note(judgements: Iterable[CurveJudgement]) -> str:
    """The verdict's note, e.g. "3 of 6 trial(s) had not flattened when they stopped (2 made a new best in the last
    third of their iterations; 1 too short to tell: ...): their budget may be short (...)"; "" when every one had."""
    judged = list(judgements)
    rising = [j for j in judged if not j.flattened]
    if not rising:
        return ""
    short = sum(j.too_short for j in rising)
    improving = len(rising) - short
    parts = [f"{improving} made a new best in the last third of their iterations"] if improving else []
    parts += [f"{short} too short to tell: fewer than {MIN_ITERATIONS} iterations, or never scored"] if short else []
    return (f"{len(rising)} of {len(judged)} trial(s) had not flattened when they stopped ({'; '.join(parts)}): their "
            "budget may be short (tune.stop, tune.plateau)")
