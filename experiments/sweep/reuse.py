"""One trial process per slot, not per trial: Tune's actor reuse for RLlib algorithms, rebuilt in place.

Tune starts a fresh Ray worker process for every trial unless the trainable implements `reset`/`reset_config`; each
start imports torch and RLlib again before the algorithm is built (the main job's 16 trials on 2 cores pay it 16
times). RLlib 2.60's `Algorithm` implements neither, so `reusable(cls)` gives Tune a subclass whose `reset` stops the
finished trial's algorithm (its env runners, learners and their actors), empties the object and runs `__init__`
again with the next trial's config and storage: everything a new actor would build, built again in the same
process, which keeps only its imports. The algorithm seeds torch, numpy and Python's `random` from the trial's seed
when it is built, as in a fresh process, so a trial learns the same numbers either way.
"""
from __future__ import annotations

from typing import Any

from ray.tune.registry import get_trainable_cls


class RebuiltInPlace:
    """Mixed in before an RLlib Algorithm class: `reset` is a new trial's `__init__` in this process."""

    def reset(self, new_config: dict[str, Any], storage: Any = None) -> bool:
        sampler = self.__dict__.get("_system_sampler")  # algos.rllib.system_metrics: its thread stops with its trial
        self.stop()  # Trainable.stop: the algorithm's cleanup (env runners, learner group) and its log files
        if sampler is not None:
            sampler.stop()
        self.__dict__.clear()  # nothing of the finished trial (selection history, metrics, replay) carries over
        type(self).__init__(self, config=new_config, storage=storage)
        return True

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        return True  # `reset` rebuilt everything from the new config


def reusable(trainable: Any) -> type:
    """`trainable` (an Algorithm class or a registered name such as "DQN") as a class Tune may reuse across trials.
    It keeps the name Tune gives its trials and folders (e.g. FastDQN_trading_Spot-v0_...)."""
    base = get_trainable_cls(trainable) if isinstance(trainable, str) else trainable
    if issubclass(base, RebuiltInPlace):
        return base
    cls = type(base.__name__, (RebuiltInPlace, base), {"__module__": __name__,
                                                        "__qualname__": f"Reusable{base.__name__}",
                                                        "__doc__": base.__doc__})
    return cls
