"""FastSAC: RLlib's SAC (same RLModule, loss, target networks, checkpoints) with a faster training step
(`algos.fast.training_step`: flat numpy replay, uniform or prioritized, and all of an iteration's updates in one learner
call, whose loop is `algos.sac.fast_learner.FastSACTorchLearner`). The default for `algorithm: sac`
(`training.implementation: fast`); `implementation: rllib` builds RLlib's SAC as shipped.
"""
from __future__ import annotations

from ray.rllib.algorithms.sac import SAC, SACConfig

from algos.fast.training_step import FastConfigMixin, FastOffPolicy
from algos.sac.fast_learner import FastSACTorchLearner


class FastSACConfig(FastConfigMixin, SACConfig):
    def __init__(self, algo_class: type | None = None) -> None:
        super().__init__(algo_class=algo_class or FastSAC)
        self._init_fast()

    def get_default_learner_class(self) -> type:
        return FastSACTorchLearner


class FastSAC(FastOffPolicy, SAC):
    @classmethod
    def get_default_config(cls) -> FastSACConfig:
        return FastSACConfig()
