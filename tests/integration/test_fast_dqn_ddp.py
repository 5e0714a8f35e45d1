"""FastDQN with data-parallel learners (what multi_gpu_learners presets build), run on CPU: two RLlib
learner actors with torch DDP over gloo. No GPU here; the GPU presets' configs are checked in
test_preset_rllib_configs.py, this test runs the code path that differs: each learner takes its slice
of every update's batch, DDP all-reduces the gradients, and the TD errors come back in batch order
for the priorities."""
from __future__ import annotations

import numpy as np

from tests.conftest import REPO


def test_two_ddp_learners_with_uneven_slices_stay_identical_and_feed_priorities(ray_session):
    from experiments.config.load import load_experiment
    from experiments.hardware import load_preset, resolve_plan
    from experiments.sweep.rllib_config import build_config

    exp = load_experiment(REPO / "conf" / "canary_planted.yaml", [
        "learners.num_learners=2", "training.replay_buffer.type=prioritized",
        "training.train_batch_size_per_learner=33", "evaluation.evaluation_interval=null"])  # 17 + 16, weighted
    algo = build_config(exp, resolve_plan(load_preset("cpu"), exp.timeframe, 1), seed=0).build_algo()
    try:
        for _ in range(2):
            result = algo.train()
        weights = algo.learner_group.foreach_learner(
            lambda learner: {k: v.detach().cpu().numpy().copy() for k, v in
                             learner.module["default_policy"].unwrapped().state_dict().items()})
        first, second = [reply.get() for reply in weights]
        buffer = algo.local_replay_buffer
    finally:
        algo.stop()
    assert result["learners"]["__all_modules__"]["num_module_steps_trained_lifetime"] > 0
    assert set(first) == set(second)
    for key in first:  # DDP averaged the gradients: both replicas took the same steps
        np.testing.assert_array_equal(first[key], second[key], err_msg=key)
    # Priorities came back from the learners' TD errors (new items start at the max priority, 1.0).
    leaves = buffer._tree.leaves(len(buffer))
    assert np.unique(leaves).size > 10
