"""A uniform replay buffer over flat numpy arrays that returns ready DQN train batches.

RLlib's `EpisodeReplayBuffer` builds one episode object per sampled item (slicing, validation,
hashing) and the learner connectors then turn those episodes back into a batch: about half of
RLlib DQN's time per update on CPU. This buffer stores one-step transitions in preallocated
ring arrays as episodes arrive and samples a batch with a few numpy gathers; n-step returns are
computed at sample time by following each transition's link to the next transition of the same
episode (a link is dropped once its target is overwritten, so a return is never stitched across
episodes or across overwritten data). A transition whose episode has not produced n further
steps yet gets a shorter return and is bootstrapped with gamma ** (steps used), which the batch's
`n_step` column carries to RLlib's DQN loss.

Used by `algos.fast_dqn.FastDQN`; needs Box (or Discrete) observations and discrete actions.
"""
from __future__ import annotations

from typing import Any

import numpy as np

OBS, NEXT_OBS, ACTIONS, REWARDS, TERMINATEDS, TRUNCATEDS = (
    "obs", "new_obs", "actions", "rewards", "terminateds", "truncateds")


class FlatReplayBuffer:
    def __init__(self, capacity: int = 50_000, seed: int | None = None, **_: Any) -> None:
        self.capacity = int(capacity)
        self._rng = np.random.default_rng(seed)
        self._size = 0
        self._added = 0  # transitions ever added; slot = stamp % capacity
        self._obs: np.ndarray | None = None
        self._next_obs: np.ndarray | None = None
        self._pending: dict[str, int] = {}  # episode id -> stamp of its last stored transition
        self._sampled = 0

    def __len__(self) -> int:
        return self._size

    def _allocate(self, obs: np.ndarray) -> None:
        shape, dtype = obs.shape[1:], obs.dtype if obs.dtype != np.float64 else np.float32
        self._obs = np.zeros((self.capacity, *shape), dtype=dtype)
        self._next_obs = np.zeros((self.capacity, *shape), dtype=dtype)
        self._actions = np.zeros(self.capacity, dtype=np.int64)
        self._rewards = np.zeros(self.capacity, dtype=np.float32)
        self._terminated = np.zeros(self.capacity, dtype=bool)
        self._stamp = np.full(self.capacity, -1, dtype=np.int64)  # which transition a slot holds
        self._next = np.full(self.capacity, -1, dtype=np.int64)  # stamp of the episode's next transition

    def add_transitions(self, episode_id: str, obs: np.ndarray, actions: np.ndarray, rewards: np.ndarray,
                        terminated: bool, done: bool) -> None:
        """One episode chunk: `obs` holds len(actions) + 1 observations (the last is the next state)."""
        length = len(actions)
        if length == 0:
            return
        obs = np.asarray(obs)
        if self._obs is None:
            self._allocate(obs)
        stamps = np.arange(self._added, self._added + length, dtype=np.int64)
        slots = stamps % self.capacity
        self._obs[slots] = obs[:-1]
        self._next_obs[slots] = obs[1:]
        self._actions[slots] = actions
        self._rewards[slots] = rewards
        self._terminated[slots] = False
        self._terminated[slots[-1]] = terminated
        self._stamp[slots] = stamps
        self._next[slots[:-1]] = stamps[1:]
        self._next[slots[-1]] = -1
        previous = self._pending.pop(episode_id, None)
        if previous is not None and self._stamp[previous % self.capacity] == previous:
            self._next[previous % self.capacity] = stamps[0]
        if not done:
            self._pending[episode_id] = int(stamps[-1])
        self._added += length
        self._size = min(self._size + length, self.capacity)

    def add(self, episodes: list[Any]) -> None:
        """Episode chunks from RLlib's SingleAgentEnvRunner (ongoing chunks keep their episode id)."""
        for episode in episodes:
            length = len(episode)
            if length == 0:
                continue
            self.add_transitions(episode.id_, episode.get_observations(slice(0, length + 1)),
                                 np.asarray(episode.get_actions(slice(0, length))),
                                 np.asarray(episode.get_rewards(slice(0, length)), dtype=np.float32),
                                 bool(episode.is_terminated), bool(episode.is_done))

    def sample(self, num_items: int, n_step: int = 1, gamma: float = 0.99) -> dict[str, np.ndarray]:
        """A train batch of `num_items` uniformly drawn transitions with n-step returns."""
        if self._size == 0:
            raise ValueError("sample() on an empty replay buffer")
        start = self._rng.integers(0, self._size, size=num_items)
        slot = start
        returns = self._rewards[start].astype(np.float32)
        steps = np.ones(num_items, dtype=np.float32)
        for k in range(1, n_step):
            nxt = self._next[slot]
            ok = nxt >= 0
            nxt_slot = np.where(ok, nxt % self.capacity, slot)
            ok &= self._stamp[nxt_slot] == nxt
            if not ok.any():
                break
            slot = np.where(ok, nxt_slot, slot)
            returns += np.where(ok, (gamma ** k) * self._rewards[slot], 0.0).astype(np.float32)
            steps += ok
        self._sampled += num_items
        return {
            OBS: self._obs[start],
            ACTIONS: self._actions[start],
            REWARDS: returns,
            NEXT_OBS: self._next_obs[slot],
            TERMINATEDS: self._terminated[slot].astype(np.float32),
            TRUNCATEDS: np.zeros(num_items, dtype=np.float32),
            "n_step": steps,
            "weights": np.ones(num_items, dtype=np.float32),
        }

    def get_metrics(self) -> dict[str, Any]:
        return {"num_env_steps_stored": self._size, "num_env_steps_added_lifetime": self._added,
                "num_env_steps_sampled_lifetime": self._sampled}

    # Algorithm.get_state() asks for these only with `store_buffer_in_checkpoints`.
    def get_state(self) -> dict[str, Any]:
        return {"capacity": self.capacity, "size": self._size, "added": self._added}

    def set_state(self, state: dict[str, Any]) -> None:
        pass
