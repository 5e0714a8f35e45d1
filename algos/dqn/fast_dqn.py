"""FastDQN: RLlib's DQN (same RLModule, loss, target network, checkpoints) with a faster training step for small
models (`algos.fast.training_step`: flat numpy replay, all of an iteration's updates in one learner call, whose loop
is `algos.dqn.fast_learner.FastDQNTorchLearner`). The platform's default (`training.implementation: fast`);
`DQNLearner` (algos/dqn/algorithm.py) builds the stock DQN with `implementation: rllib`.
"""
from __future__ import annotations

from ray.rllib.algorithms.dqn import DQN, DQNConfig

from algos.dqn.fast_learner import FastDQNTorchLearner
from algos.fast.training_step import FastConfigMixin, FastOffPolicy


class FastDQNConfig(FastConfigMixin, DQNConfig):
    def __init__(self, algo_class: type | None = None) -> None:
        super().__init__(algo_class=algo_class or FastDQN)
        self._init_fast()

    def get_default_learner_class(self) -> type:
        return FastDQNTorchLearner


class FastDQN(FastOffPolicy, DQN):
    @classmethod
    def get_default_config(cls) -> FastDQNConfig:
        return FastDQNConfig()
