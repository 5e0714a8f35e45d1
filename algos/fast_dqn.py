"""FastDQN: RLlib's DQN (same RLModule, learner, loss, target network, checkpoints) with a faster
training step for small models on CPU. Opt-in; `algos.dqn` keeps building the stock DQN.

What changes against `ray.rllib.algorithms.dqn.DQN` (new API stack), and why:

- Replay: `algos.fast_replay.FlatReplayBuffer` (uniform, flat numpy ring arrays, n-step at sample
  time) instead of RLlib's episode buffers, whose per-item episode objects and the learner
  connectors that undo them cost more than the torch update itself here.
- Batches go to the learner ready-made (`LearnerGroup.update(batch=...)`), so RLlib's learner
  connector pipeline is skipped; the DQN loss sees the same columns (obs, new_obs, actions,
  rewards, terminateds, n_step, weights).
- Several gradient steps per learner call: each training step samples at least
  `env_steps_per_learner_call` env steps, then does all the updates they are owed in one
  `update()` call (minibatches of `train_batch_size_per_learner`), like SB3's
  train_freq/gradient_steps. Metrics are reduced once per call instead of after every update,
  and weights are synced to the env runners once per call.
- The replay ratio is exact: `training_intensity` replayed samples per sampled env step
  (fractional updates carry over), default RLlib's native ratio when unset.

Prioritized replay is not implemented here (the buffer is uniform); a `PrioritizedEpisodeReplayBuffer`
in the config is replaced by uniform sampling, and `FastDQN` says so once in the log.
Checkpoints are the stock layout (learner_group/learner/rl_module/default_policy), so
`experiments.policy.load_greedy_policy` and `Algorithm.from_checkpoint` read them.
"""
from __future__ import annotations

import logging
from typing import Any

from ray.rllib.algorithms.dqn import DQN, DQNConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.execution.rollout_ops import synchronous_parallel_sample
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch
from ray.rllib.utils.metrics import (
    ALL_MODULES,
    ENV_RUNNER_RESULTS,
    ENV_RUNNER_SAMPLING_TIMER,
    LEARNER_RESULTS,
    LEARNER_UPDATE_TIMER,
    NUM_AGENT_STEPS_SAMPLED_LIFETIME,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    REPLAY_BUFFER_ADD_DATA_TIMER,
    REPLAY_BUFFER_RESULTS,
    REPLAY_BUFFER_SAMPLE_TIMER,
    SYNCH_WORKER_WEIGHTS_TIMER,
    TIMERS,
)

from algos.fast_replay import FlatReplayBuffer

logger = logging.getLogger(__name__)
TD_ERROR_KEY = "td_error"
# 256 env steps between learner calls (SB3's RL Zoo CartPole uses train_freq 256): with 8 envs x
# rollout_fragment_length 4 that is 8 sample calls, then e.g. 32 updates of 32 at training_intensity 4.
# More amortizes RLlib's per-call overhead (measured on the trading env, 8 envs: 64 -> ~1.7k,
# 256 with 32 envs x fragment 8 -> ~2.5k env steps/s) but lets the policy lag further behind the data.
DEFAULT_ENV_STEPS_PER_LEARNER_CALL = 256


class FastDQNConfig(DQNConfig):
    def __init__(self, algo_class: type | None = None) -> None:
        super().__init__(algo_class=algo_class or FastDQN)
        self.env_steps_per_learner_call = DEFAULT_ENV_STEPS_PER_LEARNER_CALL

    def fast(self, *, env_steps_per_learner_call: int | None = None) -> "FastDQNConfig":
        if env_steps_per_learner_call is not None:
            self.env_steps_per_learner_call = int(env_steps_per_learner_call)
        return self


class FastDQN(DQN):
    @classmethod
    def get_default_config(cls) -> FastDQNConfig:
        return FastDQNConfig()

    def _create_local_replay_buffer_if_necessary(self, config: Any) -> FlatReplayBuffer:
        replay = dict(config.get("replay_buffer_config") or {})
        kind = str(replay.get("type", ""))
        if "Prioritized" in kind:
            logger.warning("FastDQN samples uniformly: %s is replaced by algos.fast_replay.FlatReplayBuffer", kind)
        return FlatReplayBuffer(capacity=replay.get("capacity", 50_000), seed=config.get("seed"))

    def _updates_owed(self, new_env_steps: int) -> int:
        config = self.config
        batch = config.total_train_batch_size
        intensity = config.training_intensity or batch / (
            config.get_rollout_fragment_length() * config.num_envs_per_env_runner)
        self._update_credit = getattr(self, "_update_credit", 0.0) + new_env_steps * intensity / batch
        owed = int(self._update_credit)
        self._update_credit -= owed
        return owed

    def training_step(self) -> None:
        config = self.config
        per_call = getattr(config, "env_steps_per_learner_call", DEFAULT_ENV_STEPS_PER_LEARNER_CALL)
        new_steps = 0
        while new_steps < per_call:
            with self.metrics.log_time((TIMERS, ENV_RUNNER_SAMPLING_TIMER)):
                episodes, env_runner_results = synchronous_parallel_sample(
                    worker_set=self.env_runner_group, concat=True, sample_timeout_s=config.sample_timeout_s,
                    _uses_new_env_runners=True, _return_metrics=True)
            self.metrics.aggregate(env_runner_results, key=ENV_RUNNER_RESULTS)
            with self.metrics.log_time((TIMERS, REPLAY_BUFFER_ADD_DATA_TIMER)):
                self.local_replay_buffer.add(episodes)
            new_steps += sum(len(e) for e in episodes)

        sampled = self.metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0)
        if sampled < config.num_steps_sampled_before_learning_starts:
            return
        updates = self._updates_owed(new_steps)
        if updates < 1:
            return
        batch_size = config.total_train_batch_size
        with self.metrics.log_time((TIMERS, REPLAY_BUFFER_SAMPLE_TIMER)):
            data = self.local_replay_buffer.sample(updates * batch_size, n_step=_n_step(config), gamma=config.gamma)
            self.metrics.log_dict(self.local_replay_buffer.get_metrics(), key=REPLAY_BUFFER_RESULTS, window=1)
        batch = MultiAgentBatch({DEFAULT_MODULE_ID: SampleBatch(data)}, env_steps=updates * batch_size)
        with self.metrics.log_time((TIMERS, LEARNER_UPDATE_TIMER)):
            learner_results = self.learner_group.update(
                batch=batch, minibatch_size=batch_size, num_epochs=1,
                timesteps={
                    NUM_ENV_STEPS_SAMPLED_LIFETIME: sampled,
                    NUM_AGENT_STEPS_SAMPLED_LIFETIME: self.metrics.peek(
                        (ENV_RUNNER_RESULTS, NUM_AGENT_STEPS_SAMPLED_LIFETIME), default={}),
                })
            for result in learner_results:  # TD errors feed priorities only; uniform replay has none
                for module_results in result.values():
                    if isinstance(module_results, dict):
                        module_results.pop(TD_ERROR_KEY, None)
            self.metrics.aggregate(learner_results, key=LEARNER_RESULTS)
        with self.metrics.log_time((TIMERS, SYNCH_WORKER_WEIGHTS_TIMER)):
            self.env_runner_group.sync_weights(
                from_worker_or_learner_group=self.learner_group,
                policies=set(learner_results[0].keys()) - {ALL_MODULES},
                global_vars=None, inference_only=True)


def _n_step(config: Any) -> int:
    n_step = config.n_step
    return int(n_step[1] if isinstance(n_step, (tuple, list)) else n_step)

