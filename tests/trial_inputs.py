"""What the platform hands an algorithm's builder for one trial on one CPU (a local env runner and a local learner,
seed 0), for tests that build an algorithm without a sweep."""
from __future__ import annotations

from typing import Any

from algos.inputs import BuildInputs, Resources


def local_trial(env_id: str, training: dict[str, Any], *, rollout_fragment_length: int | str, activation: str,
                steps_per_iteration: int | None = None) -> BuildInputs:
    """A [64, 64] network with `activation`, evaluation off, `steps_per_iteration` env steps per iteration (None:
    the algorithm's own)."""
    sections = {
        "environment": {"env": env_id, "env_config": {}},
        "env_runners": {"rollout_fragment_length": rollout_fragment_length},
        "learners": {},
        "training": training,
        "rl_module": {"fcnet_hiddens": [64, 64], "fcnet_activation": activation, "head_fcnet_hiddens": []},
        "evaluation": {"evaluation_interval": None, "evaluation_duration": 1, "evaluation_duration_unit": "episodes",
                       "env_config": {}},
        "reporting": {"min_sample_timesteps_per_iteration": steps_per_iteration, "min_time_s_per_iteration": None},
    }
    resources = Resources(num_env_runners=0, num_envs_per_env_runner=1, num_cpus_per_env_runner=1, num_learners=0,
                          num_gpus_per_learner=0)
    return BuildInputs(env_id=env_id, sections=sections, resources=resources,
                       metric="env_runners/episode_return_mean", mode="max", seed=0)
