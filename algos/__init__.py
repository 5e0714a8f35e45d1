"""The algorithm table: `algorithm: <name>` in an experiment file picks one entry.

Each entry names the module that defines the algorithm's `SPEC` (`algos.spec.AlgorithmSpec`): its
`training` section model, its RLlib config builder, its greedy-policy rule, its smoke-test budget and
its result keys. Adding an algorithm is one line here plus its module (docs/DESIGN.md, "Adding an
algorithm"). Modules are imported on first use, so reading this table imports no Ray.
"""
from __future__ import annotations

import importlib

from algos.spec import AlgorithmSpec
from envs.validation import unknown_name

ALGORITHMS: dict[str, str] = {
    "dqn": "algos.dqn",  # double/dueling/n-step DQN with prioritized replay; FastDQN by default
    "ppo": "algos.ppo",  # PPO (clipped surrogate, GAE)
    "sac": "algos.sac",  # SAC (twin Q, tuned entropy, squashed Gaussian) for Box actions
}


def algorithm(name: str, where: str = "") -> AlgorithmSpec:
    """The spec of algorithm `name`; an InputError with the closest name when there is none."""
    if name not in ALGORITHMS:
        raise unknown_name("algorithm", name, ALGORITHMS, where)
    return importlib.import_module(ALGORITHMS[name]).SPEC


__all__ = ["ALGORITHMS", "AlgorithmSpec", "algorithm"]
