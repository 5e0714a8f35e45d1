"""algos.fast.replay: the flat uniform and prioritized replay behind FastDQN, and algos.fast.sum_tree (numpy only, no
Ray)."""
from __future__ import annotations

import numpy as np
import pytest

from algos.fast.replay import FlatReplayBuffer

GAMMA = 0.5


def chunk(buffer, episode_id, start, length, terminated=False, done=False):
    """An episode chunk whose observations and rewards encode the step index."""
    obs = np.arange(start, start + length + 1, dtype=np.float32)[:, None]
    first = buffer._added  # what add() does for each episode chunk it is given
    buffer._store(episode_id, obs, np.zeros(length, dtype=np.int64), np.arange(start, start + length, dtype=np.float32)
                  + 1.0, terminated, done)
    buffer._on_stored(first)


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


# --- prioritized replay and its sum tree -----------------------------------------------------------

def test_sum_tree_sampling_frequencies_match_the_priorities():
    """A chi-square test on a fixed tree: 200k proportional draws against p_i / sum(p)."""
    from scipy import stats

    from algos.fast.sum_tree import SumTree

    priorities = np.array([5.0, 0.0, 1.0, 3.0, 0.5, 2.5, 0.0, 8.0, 1.0])  # 9 leaves: not a power of two
    tree = SumTree(len(priorities))
    tree.set(np.arange(len(priorities)), priorities)
    assert tree.total == pytest.approx(priorities.sum())
    rng = np.random.default_rng(1)
    drawn = tree.find(rng.random(200_000) * tree.total)
    counts = np.bincount(drawn, minlength=len(priorities))
    assert counts[priorities == 0].sum() == 0  # a zero-priority item is never drawn
    expected = priorities / priorities.sum() * len(drawn)
    nonzero = priorities > 0
    assert stats.chisquare(counts[nonzero], expected[nonzero]).pvalue > 1e-3
    # ...and the test has power: the uniform frequencies are rejected.
    uniform = np.full(nonzero.sum(), len(drawn) / nonzero.sum())
    assert stats.chisquare(counts[nonzero], uniform).pvalue < 1e-12


def test_sum_tree_never_returns_an_empty_leaf_at_the_top_of_the_range():
    from algos.fast.sum_tree import SumTree

    tree = SumTree(6)
    tree.set(np.array([0, 1, 2]), np.array([0.1, 0.2, 0.3]))
    found = tree.find(np.array([0.0, 0.1, 0.6, np.nextafter(0.6, 1.0), 0.6 + 1e-9]))
    assert set(found.tolist()) <= {0, 1, 2}
    assert found[0] == 0 and found[2] == 2


def per_buffer(capacity=100, **kwargs):
    from algos.fast.replay import PrioritizedFlatReplayBuffer

    return PrioritizedFlatReplayBuffer(capacity=capacity, seed=0, **kwargs)


def test_prioritized_sampling_follows_updated_priorities_and_weights_match_the_formula():
    buffer = per_buffer(alpha=0.7, beta=0.5, beta_final=0.5)
    chunk(buffer, "a", 0, 10, terminated=True, done=True)  # transitions 0..9 (obs = index)
    td_errors = np.arange(1.0, 11.0)
    buffer.update_priorities(np.arange(10), td_errors)
    batch = buffer.sample(50_000, n_step=1, gamma=GAMMA)
    items = batch["obs"][:, 0].astype(int)
    np.testing.assert_array_equal(batch["indices"], items)  # slots = insertion order before wrap-around
    p = (td_errors + buffer.epsilon) ** 0.7
    probabilities = p / p.sum()
    frequencies = np.bincount(items, minlength=10) / len(items)
    np.testing.assert_allclose(frequencies, probabilities, atol=0.01)
    # w_i = (N P(i))^-beta / max_j (N P(j))^-beta with N = 10 stored transitions.
    expected = (10 * probabilities) ** -0.5 / ((10 * probabilities.min()) ** -0.5)
    np.testing.assert_allclose(batch["weights"], expected[items], rtol=1e-5)
    assert batch["weights"].max() == pytest.approx(1.0)


def test_priority_updates_land_on_the_right_items_and_the_last_error_wins():
    buffer = per_buffer(alpha=1.0)
    chunk(buffer, "a", 0, 8, terminated=True, done=True)
    buffer.update_priorities(np.array([3, 5, 3]), np.array([100.0, 50.0, 7.0]))  # 3 sampled twice: 7 wins
    leaves = buffer._tree.leaves(8)
    assert leaves[3] == pytest.approx(7.0 + buffer.epsilon)
    assert leaves[5] == pytest.approx(50.0 + buffer.epsilon)
    untouched = np.setdiff1d(np.arange(8), [3, 5])
    np.testing.assert_allclose(leaves[untouched], 1.0)  # new items got the initial max priority 1
    chunk(buffer, "b", 100, 1, done=True)  # a new transition gets the largest priority seen: 100
    assert buffer._tree.get(np.array([8]))[0] == pytest.approx(100.0 + buffer.epsilon)
    assert buffer._tree.total == pytest.approx(buffer._tree.leaves(9).sum())


def test_capacity_wrap_around_replaces_the_overwritten_items_priorities():
    buffer = per_buffer(capacity=100, alpha=1.0)
    chunk(buffer, "a", 0, 100, done=True)
    buffer.update_priorities(np.arange(100), np.full(100, 1e-3))
    buffer.update_priorities(np.array([0, 1]), np.array([40.0, 40.0]))
    chunk(buffer, "b", 1000, 5, done=True)  # overwrites slots 0..4 with max priority (40)
    assert len(buffer) == 100
    leaves = buffer._tree.leaves(100)
    np.testing.assert_allclose(leaves[:5], 40.0 + buffer.epsilon)
    assert buffer._tree.total == pytest.approx(leaves.sum())
    batch = buffer.sample(20_000, n_step=1, gamma=GAMMA)
    # Slots 0..4 now hold transitions 1000..1004: what is sampled there is the new data.
    held = batch["obs"][batch["indices"] < 5, 0]
    assert held.size and set(held.tolist()) <= {1000.0, 1001.0, 1002.0, 1003.0, 1004.0}


def test_beta_anneals_linearly_to_its_final_value():
    buffer = per_buffer(beta=0.4, beta_final=1.0, beta_annealing_steps=1000)
    assert buffer.beta == pytest.approx(0.4)
    buffer.set_env_steps(500)
    assert buffer.beta == pytest.approx(0.7)
    buffer.set_env_steps(5000)
    assert buffer.beta == pytest.approx(1.0)


def test_update_priorities_rejects_mismatched_lengths():
    buffer = per_buffer()
    chunk(buffer, "a", 0, 4, done=True)
    with pytest.raises(ValueError, match="TD errors"):
        buffer.update_priorities(np.array([0, 1]), np.array([1.0]))


def test_sum_tree_sums_stay_exact_after_many_batched_updates():
    from algos.fast.sum_tree import SumTree

    rng = np.random.default_rng(0)
    tree = SumTree(1000)
    truth = np.zeros(1000)
    for _ in range(200):
        index = np.unique(rng.integers(0, 1000, size=rng.integers(1, 300)))
        value = rng.random(len(index)) * 10
        tree.set(index, value)
        truth[index] = value
    np.testing.assert_array_equal(tree.leaves(1000), truth)
    assert tree.total == pytest.approx(truth.sum(), rel=1e-12)
    drawn = tree.find(np.array([0.0, truth[:500].sum() + 1e-9]))
    assert drawn[1] == 500 + np.flatnonzero(truth[500:] > 0)[0]


def test_box_actions_are_stored_as_float_vectors_with_their_transitions():
    """SAC's actions (a Box): each sampled action is the one stored with that observation, as float32 vectors."""
    buffer = FlatReplayBuffer(capacity=100, seed=0)
    obs = np.arange(11, dtype=np.float32)[:, None]
    actions = np.stack([np.linspace(-1, 1, 10), -np.linspace(-1, 1, 10)], axis=1)  # float64 in, float32 stored
    buffer._store("a", obs, actions, np.ones(10, dtype=np.float32), True, True)
    batch = buffer.sample(32)
    assert batch["actions"].dtype == np.float32 and batch["actions"].shape == (32, 2)
    np.testing.assert_array_equal(batch["actions"], actions[batch["obs"][:, 0].astype(int)].astype(np.float32))
