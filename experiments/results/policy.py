"""Turn an RLlib checkpoint into a greedy `Policy` (observation batch -> action batch).

Only the RLModule is loaded (not the whole Algorithm with its env runners), so scoring a checkpoint is cheap and
needs no Ray cluster. Its weights are exported to numpy (`Algorithm.export_numpy`), and the scorer acts with that
numpy forward pass: the very code a registered model serves with, so what was scored is what is served, to the
bit. A module numpy cannot run (e.g. distributional DQN) is scored with torch through the algorithm's greedy rule
(`Algorithm.greedy`: DQN returns the action, PPO logits to take the argmax of, SAC a squashed Gaussian whose
mean is the action); it cannot be registered.
"""
from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np

from algos.base import Algorithm
from algos.export.numpy_policy import NumpyPolicy
from algos.greedy import GreedyRule
from envs import work_counts
from envs.errors import InputError
from envs.report import Policy

MODULE_SUBPATH = Path("learner_group") / "learner" / "rl_module" / "default_policy"


def numpy_policy(module_dir: str | Path, algorithm: Algorithm) -> NumpyPolicy:
    """The saved RLModule's numpy forward pass; InputError in one line for a module numpy cannot run."""
    from ray.rllib.core.rl_module.rl_module import RLModule

    work_counts.count(work_counts.CHECKPOINT_EXPORTS)
    return algorithm.numpy_policy(RLModule.from_checkpoint(Path(module_dir)))


def load_module_policy(module_dir: str | Path, algorithm: Algorithm) -> Policy:
    """The greedy policy of a saved RLModule folder: numpy where it can run the module, else torch."""
    try:
        return numpy_policy(module_dir, algorithm)
    except InputError:
        return torch_policy(module_dir, algorithm.greedy)


def torch_policy(module_dir: str | Path, greedy: GreedyRule) -> Policy:
    import torch
    from ray.rllib.core.rl_module.rl_module import RLModule

    module = RLModule.from_checkpoint(Path(module_dir))
    module.eval()

    discrete = isinstance(module.action_space, gym.spaces.Discrete)

    def policy(observations: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            out = module.forward_inference({"obs": torch.as_tensor(observations, dtype=torch.float32)})
        actions = greedy.actions(out, module.action_space).cpu().numpy()
        return actions.astype(np.int64) if discrete else actions.astype(np.float32)

    return policy
