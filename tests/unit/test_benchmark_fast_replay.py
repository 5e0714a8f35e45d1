"""algos.fast_replay.FlatReplayBuffer: the flat replay behind the opt-in FastDQN (numpy only, no Ray)."""
from __future__ import annotations

import numpy as np
import pytest

from algos.fast_replay import FlatReplayBuffer

GAMMA = 0.5


def chunk(buffer, episode_id, start, length, terminated=False, done=False):
    """An episode chunk whose observations and rewards encode the step index."""
    obs = np.arange(start, start + length + 1, dtype=np.float32)[:, None]
    buffer.add_transitions(episode_id, obs, np.zeros(length, dtype=np.int64),
                           np.arange(start, start + length, dtype=np.float32) + 1.0, terminated, done)


def by_obs(batch):
    order = np.argsort(batch["obs"][:, 0], kind="stable")
    return {k: v[order] for k, v in batch.items()}


def test_one_step_batch_columns():
    buffer = FlatReplayBuffer(capacity=100, seed=0)
    chunk(buffer, "a", 0, 5, terminated=True, done=True)
    batch = buffer.sample(64, n_step=1, gamma=GAMMA)
    assert set(batch) >= {"obs", "new_obs", "actions", "rewards", "terminateds", "n_step", "weights"}
    np.testing.assert_array_equal(batch["new_obs"][:, 0], batch["obs"][:, 0] + 1)
    np.testing.assert_array_equal(batch["rewards"], batch["obs"][:, 0] + 1)
    np.testing.assert_array_equal(batch["terminateds"], (batch["obs"][:, 0] == 4).astype(np.float32))
    assert (batch["n_step"] == 1).all()


def test_n_step_returns_follow_the_episode_across_chunks_and_stop_at_its_end():
    buffer = FlatReplayBuffer(capacity=100, seed=0)
    chunk(buffer, "a", 0, 2)                 # steps 0, 1 (episode continues)
    chunk(buffer, "b", 100, 3, done=True)    # another env's episode interleaved (truncated)
    chunk(buffer, "a", 2, 3, terminated=True, done=True)  # steps 2, 3, 4 then terminal
    batch = by_obs(buffer.sample(2000, n_step=3, gamma=GAMMA))
    for start in range(5):
        rows = batch["obs"][:, 0] == start
        assert rows.any()
        steps = min(3, 5 - start)
        expected = sum(GAMMA ** k * (start + k + 1) for k in range(steps))
        assert batch["rewards"][rows][0] == pytest.approx(expected)
        assert batch["n_step"][rows][0] == steps
        assert batch["new_obs"][rows][0, 0] == start + steps
        assert batch["terminateds"][rows][0] == float(start + steps == 5)
    truncated_last = batch["obs"][:, 0] == 102
    assert (batch["n_step"][truncated_last] == 1).all() and (batch["terminateds"][truncated_last] == 0).all()


def test_unfinished_episode_gets_a_shorter_return():
    buffer = FlatReplayBuffer(capacity=100, seed=0)
    chunk(buffer, "a", 0, 2)
    batch = by_obs(buffer.sample(500, n_step=3, gamma=GAMMA))
    last = batch["obs"][:, 0] == 1
    assert (batch["n_step"][last] == 1).all() and (batch["new_obs"][last][:, 0] == 2).all()


def test_overwritten_transitions_are_never_linked():
    buffer = FlatReplayBuffer(capacity=4, seed=0)
    chunk(buffer, "a", 0, 3)                # a's steps 0, 1, 2 in slots 0..2, episode continues
    chunk(buffer, "b", 100, 3, done=True)   # b overwrites slots 3, 0, 1
    chunk(buffer, "a", 3, 1, terminated=True, done=True)  # a's step 3 overwrites slot 2 (its own step 2)
    chunk(buffer, "c", 200, 1, done=True)   # c overwrites slot 3 (b's first step)
    assert len(buffer) == 4
    batch = by_obs(buffer.sample(2000, n_step=3, gamma=GAMMA))
    assert set(np.unique(batch["obs"][:, 0]).tolist()) == {101.0, 102.0, 3.0, 200.0}
    b_second = batch["obs"][:, 0] == 101
    assert (batch["n_step"][b_second] == 2).all() and (batch["new_obs"][b_second][:, 0] == 103).all()
    a_last = batch["obs"][:, 0] == 3
    assert (batch["n_step"][a_last] == 1).all() and (batch["terminateds"][a_last] == 1).all()
    c_only = batch["obs"][:, 0] == 200  # slot 3 now holds c: b's old link into it must not be followed
    assert (batch["n_step"][c_only] == 1).all()


def test_sample_from_empty_buffer_is_an_error():
    with pytest.raises(ValueError):
        FlatReplayBuffer(capacity=10).sample(4)
