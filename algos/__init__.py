"""The algorithm table: `algorithm: <name>` in an experiment file picks one entry.

Each entry names the module that defines the algorithm's `SPEC` (`algos.spec.AlgorithmSpec`): its
`training` section model, its RLlib config builder, its greedy-policy rule, its smoke-test budget and
its result keys. Adding an algorithm is one line here plus its module (docs/DESIGN.md, "Adding an
algorithm"). Modules are imported on first use, so reading this table imports no Ray; nor does importing
the package import pydantic or envs (`algos.spec` brings them), so the plain-torch modules (`algos.losses`,
`algos.learner_math`) load with torch alone.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from algos.spec import AlgorithmSpec

ALGORITHMS: dict[str, str] = {
    "dqn": "algos.dqn",  # double/dueling/n-step DQN with prioritized replay; FastDQN by default
    "ppo": "algos.ppo",  # PPO (clipped surrogate, GAE)
    "sac": "algos.sac",  # SAC (twin Q, tuned entropy, squashed Gaussian) for Box actions
    "direct": "algos.direct.spec",  # gradient ascent on the log growth through the book (Jiang, Xu & Liang 2017)
}


def algorithm(name: str, where: str = "") -> AlgorithmSpec:
    """The spec of algorithm `name`; an InputError with the closest name when there is none."""
    if name not in ALGORITHMS:
        from envs.validation import unknown_name

        raise unknown_name("algorithm", name, ALGORITHMS, where)
    return importlib.import_module(ALGORITHMS[name]).SPEC


def __getattr__(name: str) -> Any:
    """`algos.AlgorithmSpec`, imported on first use (see the module's docstring)."""
    if name == "AlgorithmSpec":
        from algos.spec import AlgorithmSpec

        return AlgorithmSpec
    raise AttributeError(f"module 'algos' has no attribute {name!r}")


__all__ = ["ALGORITHMS", "AlgorithmSpec", "algorithm"]
