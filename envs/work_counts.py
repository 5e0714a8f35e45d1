"""How often this process did the steps a run should take once each: parse a --set, build an env, export a
checkpoint to numpy. A run reports them (`RunResult.work`), and tests hold them to once per override, per fold
and per checkpoint, so a refactor that parses, builds or exports twice is caught rather than merely slower.

Counts are per process: what a run's driver did, not its Ray workers (each builds its own envs, by design).
"""
from __future__ import annotations

from collections import Counter

OVERRIDE_PARSES = "override_parses"
ENV_BUILDS = "env_builds"
CHECKPOINT_EXPORTS = "checkpoint_exports"

_counts: Counter[str] = Counter()


def count(event: str) -> None:
    _counts[event] += 1


def snapshot() -> dict[str, int]:
    """The counts so far; a run subtracts the snapshot it took at its start (`since`)."""
    return {event: _counts[event] for event in (OVERRIDE_PARSES, ENV_BUILDS, CHECKPOINT_EXPORTS)}


def since(start: dict[str, int]) -> dict[str, int]:
    """What this process counted after `start` (a `snapshot()`)."""
    now = snapshot()
    return {event: now[event] - start.get(event, 0) for event in now}
