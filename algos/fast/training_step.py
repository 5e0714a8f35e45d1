"""The fast off-policy training step that FastDQN and FastSAC share: RLlib's algorithm (RLModule, loss, target
networks, checkpoints) with flat numpy replay and all of an iteration's updates in one learner call.

What changes against RLlib's DQN/SAC `training_step` (new API stack), and why:

- Replay: `algos.fast.replay.FlatReplayBuffer` (uniform) or `PrioritizedFlatReplayBuffer` (proportional PER on a
  numpy sum tree, beta annealed), flat numpy ring arrays with n-step at sample time, instead of RLlib's episode
  buffers, whose per-item episode objects and the learner connectors that undo them cost more than the torch update
  itself here.
- Learner: the algorithm's learner (`algos.dqn.fast_learner.FastDQNTorchLearner`, `algos.sac.fast_learner
  .FastSACTorchLearner`) runs all the minibatch steps owed for `env_steps_per_learner_call` env steps in one call
  (`update_minibatches`), from one tensor conversion, with metrics logged once (like SB3's
  train_freq/gradient_steps), and returns the TD errors that become the sampled items' new priorities. With several
  learners (DDP) each learner gets its slice of every update's batch and does the same number of steps.
- Priorities are refreshed once per learner call, from the TD errors of all its minibatches (an item drawn into two
  minibatches keeps the later error), not after every minibatch: within one call, later minibatches are drawn from
  priorities up to `env_steps_per_learner_call` env steps old, as with Ape-X's asynchronous priority updates. The
  importance weights use the probabilities the items were drawn with, so the correction matches the draw.
- The replay ratio is exact: `training_intensity` replayed samples per sampled env step (fractional updates carry
  over), default RLlib's native ratio when unset.

Checkpoints are the stock layout (learner_group/learner/rl_module/default_policy), so
`experiments.results.policy.load_module_policy` and `Algorithm.from_checkpoint` read them.
"""
from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
from ray.rllib.execution.rollout_ops import synchronous_parallel_sample
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

from algos.fast.replay import INDICES, FlatReplayBuffer, PrioritizedFlatReplayBuffer
from algos.inputs import slice_sizes, slice_weights

# 256 env steps between learner calls (SB3's RL Zoo CartPole uses train_freq 256): with 8 envs x
# rollout_fragment_length 4 that is 8 sample calls, then e.g. 32 updates of 32 at training_intensity 4.
# More amortizes RLlib's per-call overhead (measured on the trading env, 8 envs: 64 -> ~1.7k,
# 256 with 32 envs x fragment 8 -> ~2.5k env steps/s) but lets the policy lag further behind the data.
DEFAULT_ENV_STEPS_PER_LEARNER_CALL = 256
# replay_buffer_config "type" -> buffer class; algos.dqn.algorithm.REPLAY_BUFFERS writes RLlib's names.
FAST_BUFFERS = {"PrioritizedEpisodeReplayBuffer": PrioritizedFlatReplayBuffer, "EpisodeReplayBuffer": FlatReplayBuffer}


class FastConfigMixin:
    """The fast path's own settings, mixed into RLlib's DQNConfig or SACConfig (before it in the bases)."""

    def _init_fast(self) -> None:
        self.env_steps_per_learner_call = DEFAULT_ENV_STEPS_PER_LEARNER_CALL
        self.mixed_precision = "none"
        self.update_batch_size: int | None = None

    def fast(self, *, env_steps_per_learner_call: int | None = None, mixed_precision: str | None = None,
             update_batch_size: int | None = None) -> FastConfigMixin:
        """The fast path's own settings: env steps gathered per learner call, the learner's autocast dtype
        ("none", "bf16", or "fp16" with a grad scaler; RLlib 2.60's learner has no autocast), and the whole
        batch of one update when it splits unevenly over data-parallel learners (None: even slices of
        train_batch_size_per_learner)."""
        if env_steps_per_learner_call is not None:
            self.env_steps_per_learner_call = int(env_steps_per_learner_call)
        if mixed_precision is not None:
            self.mixed_precision = mixed_precision
        if update_batch_size is not None:
            self.update_batch_size = int(update_batch_size)
        return self

    @property
    def update_batch(self) -> int:
        """Items in one gradient update, over all learners."""
        return self.update_batch_size or self.total_train_batch_size


def update_minibatches(learner: Any, shard: int, **kwargs: Any) -> tuple[int, dict[str, Any], np.ndarray]:
    """Entry point for each learner (a module-level function pickles to remote learners); `shard` says which slice
    of the batch this learner got, so the driver can put the TD errors back in order."""
    return (shard, *learner.update_minibatches(**kwargs))


class FastOffPolicy:
    """The training step, mixed into RLlib's DQN or SAC (before it in the bases)."""

    def _create_local_replay_buffer_if_necessary(self, config: Any) -> FlatReplayBuffer:
        replay = dict(config.get("replay_buffer_config") or {})
        kind = str(replay.pop("type", "EpisodeReplayBuffer"))
        if kind not in FAST_BUFFERS:
            raise ValueError(f"{type(self).__name__} replay_buffer_config type {kind!r}: "
                             f"use one of {', '.join(FAST_BUFFERS)}")
        return FAST_BUFFERS[kind](seed=config.get("seed"), **replay)

    def _updates_owed(self, new_env_steps: int) -> int:
        """Updates (of total_train_batch_size items each) that keep the replay ratio exact."""
        config = self.config
        batch = config.update_batch
        intensity = config.training_intensity or batch / (
            config.get_rollout_fragment_length() * config.num_envs_per_env_runner)
        self._update_credit = getattr(self, "_update_credit", 0.0) + new_env_steps * intensity / batch
        owed = int(self._update_credit)
        self._update_credit -= owed
        return owed

    def _sample_env_steps(self, at_least: int) -> int:
        """Sample from the env runners into the replay buffer until `at_least` env steps arrived."""
        config = self.config
        new_steps = 0
        while new_steps < at_least:
            with self.metrics.log_time((TIMERS, ENV_RUNNER_SAMPLING_TIMER)):
                episodes, env_runner_results = synchronous_parallel_sample(
                    worker_set=self.env_runner_group, concat=True, sample_timeout_s=config.sample_timeout_s,
                    _uses_new_env_runners=True, _return_metrics=True)
            self.metrics.aggregate(env_runner_results, key=ENV_RUNNER_RESULTS)
            with self.metrics.log_time((TIMERS, REPLAY_BUFFER_ADD_DATA_TIMER)):
                self.local_replay_buffer.add(episodes)
            new_steps += sum(len(e) for e in episodes)
        return new_steps

    def training_step(self) -> None:
        config = self.config
        new_steps = self._sample_env_steps(getattr(config, "env_steps_per_learner_call",
                                                   DEFAULT_ENV_STEPS_PER_LEARNER_CALL))
        sampled = self.metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0)
        if sampled < config.num_steps_sampled_before_learning_starts:
            return
        updates = self._updates_owed(new_steps)
        if updates < 1:
            return
        buffer = self.local_replay_buffer
        with self.metrics.log_time((TIMERS, REPLAY_BUFFER_SAMPLE_TIMER)):
            if isinstance(buffer, PrioritizedFlatReplayBuffer):
                buffer.set_env_steps(sampled)
            data = buffer.sample(updates * config.update_batch, n_step=_n_step(config),
                                 gamma=config.gamma)
            self.metrics.log_dict(buffer.get_metrics(), key=REPLAY_BUFFER_RESULTS, window=1)
        timesteps = {NUM_ENV_STEPS_SAMPLED_LIFETIME: sampled,
                     NUM_AGENT_STEPS_SAMPLED_LIFETIME: self.metrics.peek(
                         (ENV_RUNNER_RESULTS, NUM_AGENT_STEPS_SAMPLED_LIFETIME), default={})}
        with self.metrics.log_time((TIMERS, LEARNER_UPDATE_TIMER)):
            learner_results, td_errors = self._update_learners(data, updates, timesteps)
            self.metrics.aggregate(learner_results, key=LEARNER_RESULTS)
        if isinstance(buffer, PrioritizedFlatReplayBuffer):
            buffer.update_priorities(data[INDICES], td_errors)
        with self.metrics.log_time((TIMERS, SYNCH_WORKER_WEIGHTS_TIMER)):
            self.env_runner_group.sync_weights(
                from_worker_or_learner_group=self.learner_group,
                policies=set(learner_results[0].keys()) - {ALL_MODULES},
                global_vars=None, inference_only=True)

    def _update_learners(self, data: dict[str, np.ndarray], updates: int,
                         timesteps: dict[str, Any]) -> tuple[list[dict[str, Any]], np.ndarray]:
        """All `updates` gradient steps in one call per learner; the TD errors in the order of `data`.

        With n learners, update u's batch (`update_batch` items) is split into n slices (as even as it gets,
        `slice_sizes`), learner j gets slice j of every update: one DDP step is the n learners' minibatch u.
        Uneven slices are weighted (`slice_weights`) so the averaged gradient is the single-learner one."""
        batch = self.config.update_batch
        learners = max(len(self.learner_group), 1)  # 0 for the local learner
        sizes, weights = slice_sizes(batch, learners), slice_weights(batch, learners)
        bounds = np.cumsum((0, *sizes))
        shaped = {key: value.reshape(updates, batch, *value.shape[1:]) for key, value in data.items()}
        calls = [partial(update_minibatches, shard=j, loss_weight=weights[j], minibatch_size=sizes[j],
                         timesteps=timesteps,
                         columns={key: value[:, bounds[j]:bounds[j + 1]].reshape(-1, *value.shape[2:])
                                  for key, value in shaped.items()}) for j in range(learners)]
        if learners == 1:
            replies = self.learner_group.foreach_learner(calls[0])
        else:  # one function per learner: LearnerGroup.foreach_learner sends the same call to all
            replies = self.learner_group._worker_manager.foreach_actor(calls)
        outputs = []
        for reply in replies:
            if not reply.ok:
                raise reply.get()
            outputs.append(reply.get())
        outputs.sort(key=lambda output: output[0])
        td = np.concatenate([errors.reshape(updates, size)
                             for (_, _, errors), size in zip(outputs, sizes, strict=True)], axis=1)
        return [results for _, results, _ in outputs], td.reshape(-1)


def _n_step(config: Any) -> int:
    n_step = config.n_step
    return int(n_step[1] if isinstance(n_step, (tuple, list)) else n_step)
