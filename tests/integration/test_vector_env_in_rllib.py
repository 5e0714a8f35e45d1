"""RLlib's env runners step trading/Spot-v0 through its native vector env (gym_env_vectorize_mode
"vector_entry_point"), and training is bit-identical to gymnasium's SyncVectorEnv over single envs:
same seed, same conf -> the same losses and the same validation return."""
from __future__ import annotations

from tests.conftest import REPO


def _one_iteration(vectorize_mode: str | None):
    from envs.trading.vector_env import SpotTradingVectorEnv
    from experiments.config.load import load_experiment
    from experiments.hardware import load_preset, resolve_plan
    from experiments.sweep.rllib_config import build_config

    exp = load_experiment(REPO / "conf/dqn_btc.yaml", ["reporting.min_sample_timesteps_per_iteration=1500",
                                                       "training.num_steps_sampled_before_learning_starts=500"])
    config = build_config(exp, resolve_plan(load_preset("cpu"), exp.timeframe, 1), seed=3)
    assert config.gym_env_vectorize_mode == "vector_entry_point"
    if vectorize_mode:
        config.env_runners(gym_env_vectorize_mode=vectorize_mode)
    algo = config.build_algo()
    try:
        batched = [isinstance(runner.env.unwrapped, SpotTradingVectorEnv)
                   for runner in (algo.env_runner, algo.eval_env_runner)]  # training and evaluation
        result = algo.train()
    finally:
        algo.stop()
    return batched, result


def test_native_vector_env_trains_exactly_like_sync_vector_env(ray_session):
    batched, native = _one_iteration(None)
    assert batched == [True, True]
    synced, sync = _one_iteration("sync")
    assert synced == [False, False]
    for path in (("learners", "default_policy", "qf_loss"), ("evaluation", "env_runners", "episode_return_mean"),
                 ("env_runners", "num_env_steps_sampled_lifetime")):
        a, b = native, sync
        for key in path:
            a, b = a[key], b[key]
        assert a == b, path
