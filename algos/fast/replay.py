"""Replay buffers over flat numpy arrays that return ready DQN and SAC train batches: uniform and proportional
prioritized (PER, Schaul et al. 2016).

RLlib's `EpisodeReplayBuffer` builds one episode object per sampled item (slicing, validation,
hashing) and the learner connectors then turn those episodes back into a batch: about half of
RLlib DQN's time per update on CPU. This buffer stores one-step transitions in preallocated
ring arrays as episodes arrive and samples a batch with a few numpy gathers; n-step returns are
computed at sample time by following each transition's link to the next transition of the same
episode (a link is dropped once its target is overwritten, so a return is never stitched across
episodes or across overwritten data). A transition whose episode has not produced n further
steps yet gets a shorter return and is bootstrapped with gamma ** (steps used), which the batch's
`n_step` column carries to RLlib's DQN loss.

`PrioritizedFlatReplayBuffer` draws transition i with probability p_i^alpha / sum_j p_j^alpha from a
numpy sum tree (`algos.fast.sum_tree`), stratified over the whole batch, and weights it by the importance
weight (N * P(i))^-beta / max_j (N * P(j))^-beta, beta annealed linearly to `beta_final`. New
transitions get the largest priority seen so far; `update_priorities` sets |TD error| + epsilon.

Used by `algos.fast.training_step` (FastDQN, FastSAC); needs Box (or Discrete) observations, and discrete or Box
actions.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from algos.fast.sum_tree import SumTree

OBS, NEXT_OBS, ACTIONS, REWARDS, TERMINATEDS, TRUNCATEDS = (
    "obs", "new_obs", "actions", "rewards", "terminateds", "truncateds")
WEIGHTS, N_STEP = "weights", "n_step"
INDICES = "indices"  # which stored transitions a batch holds: priorities are updated by these


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

    def _allocate(self, obs: np.ndarray, actions: np.ndarray) -> None:
        """Ring arrays shaped like the first chunk: discrete actions as int64, Box actions (SAC) as float32."""
        shape, dtype = obs.shape[1:], obs.dtype if obs.dtype != np.float64 else np.float32
        self._obs = np.zeros((self.capacity, *shape), dtype=dtype)
        self._next_obs = np.zeros((self.capacity, *shape), dtype=dtype)
        discrete = np.issubdtype(actions.dtype, np.integer)
        self._actions = np.zeros((self.capacity, *actions.shape[1:]), dtype=np.int64 if discrete else np.float32)
        self._rewards = np.zeros(self.capacity, dtype=np.float32)
        self._terminated = np.zeros(self.capacity, dtype=bool)
        self._stamp = np.full(self.capacity, -1, dtype=np.int64)  # which transition a slot holds
        self._next = np.full(self.capacity, -1, dtype=np.int64)  # stamp of the episode's next transition

    def _store(self, episode_id: str, obs: np.ndarray, actions: np.ndarray, rewards: np.ndarray,
               terminated: bool, done: bool) -> None:
        length = len(actions)
        if length == 0:
            return
        obs = np.asarray(obs)
        if self._obs is None:
            self._allocate(obs, actions)
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

    def _on_stored(self, first_stamp: int) -> None:
        """Hook: transitions `first_stamp` .. added - 1 were just stored (once per add, not per chunk)."""

    def _draw(self, num_items: int) -> tuple[np.ndarray, np.ndarray]:
        """Which slots a batch holds and their loss weights (uniform: all 1)."""
        return self._rng.integers(0, self._size, size=num_items), np.ones(num_items, dtype=np.float32)

    def add(self, episodes: list[Any]) -> None:
        """Episode chunks from RLlib's SingleAgentEnvRunner (ongoing chunks keep their episode id)."""
        first = self._added
        for episode in episodes:
            length = len(episode)
            if length == 0:
                continue
            self._store(episode.id_, episode.get_observations(slice(0, length + 1)),
                        np.asarray(episode.get_actions(slice(0, length))),
                        np.asarray(episode.get_rewards(slice(0, length)), dtype=np.float32),
                        bool(episode.is_terminated), bool(episode.is_done))
        self._on_stored(first)

    def sample(self, num_items: int, n_step: int = 1, gamma: float = 0.99) -> dict[str, np.ndarray]:
        """A train batch of `num_items` drawn transitions with n-step returns (and their slots in INDICES)."""
        if self._size == 0:
            raise ValueError("sample() on an empty replay buffer")
        start, weights = self._draw(num_items)
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
            N_STEP: steps,
            WEIGHTS: weights,
            INDICES: start,
        }

    def get_metrics(self) -> dict[str, Any]:
        return {"num_env_steps_stored": self._size, "num_env_steps_added_lifetime": self._added,
                "num_env_steps_sampled_lifetime": self._sampled}

    # Algorithm.get_state() asks for these only with `store_buffer_in_checkpoints`.
    def get_state(self) -> dict[str, Any]:
        return {"capacity": self.capacity, "size": self._size, "added": self._added}

    def set_state(self, state: dict[str, Any]) -> None:
        pass


class PrioritizedFlatReplayBuffer(FlatReplayBuffer):
    def __init__(self, capacity: int = 50_000, seed: int | None = None, *, alpha: float = 0.6, beta: float = 0.4,
                 beta_final: float = 1.0, beta_annealing_steps: int = 100_000, epsilon: float = 1e-6,
                 **_: Any) -> None:
        super().__init__(capacity=capacity, seed=seed)
        self.alpha, self.beta_start, self.beta_final = float(alpha), float(beta), float(beta_final)
        self.beta_annealing_steps = max(int(beta_annealing_steps), 1)
        self.epsilon = float(epsilon)
        self._tree = SumTree(self.capacity)
        self._max_priority = 1.0  # the largest |TD error| + epsilon seen: what new transitions get
        self._env_steps = 0

    def set_env_steps(self, env_steps: int) -> None:
        """Where the beta schedule stands: env steps sampled so far."""
        self._env_steps = int(env_steps)

    @property
    def beta(self) -> float:
        progress = min(1.0, self._env_steps / self.beta_annealing_steps)
        return self.beta_start + (self.beta_final - self.beta_start) * progress

    def _on_stored(self, first_stamp: int) -> None:
        stamps = np.arange(max(first_stamp, self._added - self.capacity), self._added)
        self._tree.set(stamps % self.capacity, np.full(len(stamps), self._max_priority ** self.alpha))

    def _draw(self, num_items: int) -> tuple[np.ndarray, np.ndarray]:
        # Stratified: one draw in each of num_items equal slices of the total mass, then shuffled so
        # that consecutive minibatches of the batch are not ordered by position in the buffer.
        total = self._tree.total
        mass = (np.arange(num_items) + self._rng.random(num_items)) * (total / num_items)
        slots = self._rng.permutation(self._tree.find(np.minimum(mass, np.nextafter(total, 0.0))))
        probabilities = self._tree.get(slots) / total
        smallest = self._tree.leaves(self._size).min() / total
        weights = (probabilities / smallest) ** -self.beta  # = (N P(i))^-beta / (N P_min)^-beta
        return slots, weights.astype(np.float32)

    def update_priorities(self, slots: np.ndarray, td_errors: np.ndarray) -> None:
        """Priority |TD error| + epsilon for each sampled slot; for a slot sampled twice the last error wins."""
        slots = np.asarray(slots, dtype=np.int64)
        priorities = np.abs(np.asarray(td_errors, dtype=np.float64)) + self.epsilon
        if len(slots) != len(priorities):
            raise ValueError(f"{len(slots)} slots but {len(priorities)} TD errors")
        last = len(slots) - 1 - np.unique(slots[::-1], return_index=True)[1]
        self._tree.set(slots[last], priorities[last] ** self.alpha)
        self._max_priority = max(self._max_priority, float(priorities.max(initial=0.0)))

    def get_metrics(self) -> dict[str, Any]:
        return {**super().get_metrics(), "beta": self.beta, "max_priority": self._max_priority}
