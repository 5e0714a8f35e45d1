"""The algorithm table: `algorithm: <name>` in an experiment file picks one entry.

Each entry is an `algos.base.Algorithm` object: the model of its `training` section, its greedy-policy rule, the
action spaces it acts in, its smoke-test budget and planning hints, and its learner (`algos.base.Learner`: the config
builder, what Tune runs, its result keys, the numpy export of the policy it trained). Each algorithm lives in its own
folder (algos/dqn/, algos/ppo/, algos/sac/, algos/direct/); adding one is one entry in the list below plus its folder
(docs/DESIGN.md, "Adding an algorithm").

The table is built on first use (`algos.ALGORITHMS`, `algos.algorithm(name)`), and reading it imports no Ray and no
torch (learners import them inside their methods). Importing the package imports nothing at all, so the plain-torch
modules (`algos.fast.losses`, `algos.fast.learner_math`) load with torch alone, without pydantic or envs.
"""
from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from algos.base import Algorithm

# Every algorithm by name; built on first access (module docstring).
ALGORITHMS: dict[str, Algorithm]


@cache
def _table() -> dict[str, Algorithm]:
    """The table: one object per algorithm, in this order."""
    from algos.direct.algorithm import Direct
    from algos.dqn.algorithm import DQN
    from algos.ppo.algorithm import PPO
    from algos.sac.algorithm import SAC

    entries = (
        DQN(),     # double/dueling/n-step DQN with prioritized replay; FastDQN by default
        PPO(),     # PPO (clipped surrogate, GAE)
        SAC(),     # SAC (twin Q, tuned entropy, squashed Gaussian) for Box actions
        Direct(),  # gradient ascent on the log growth through the book (Jiang, Xu & Liang 2017)
    )
    return {entry.name: entry for entry in entries}


def algorithm(name: str, where: str = "") -> Algorithm:
    """The entry of algorithm `name`; an InputError with the closest name when there is none."""
    table = _table()
    if name not in table:
        from envs.validation import unknown_name

        raise unknown_name("algorithm", name, table, where)
    return table[name]


def __getattr__(name: str) -> Any:
    """`algos.ALGORITHMS`, built on first use (see the module's docstring)."""
    if name == "ALGORITHMS":
        return _table()
    raise AttributeError(f"module 'algos' has no attribute {name!r}")


__all__ = ["ALGORITHMS", "algorithm"]
