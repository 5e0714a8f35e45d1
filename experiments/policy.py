"""Turn an RLlib checkpoint into a greedy `Policy` (observation batch -> action batch).

Only the RLModule is loaded (not the whole Algorithm with its env runners), so scoring a
checkpoint is cheap and needs no Ray cluster. Which output of the module is the greedy action is the
algorithm's rule (`AlgorithmSpec.greedy`): DQN returns it, PPO returns logits to take the argmax of.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from algos.spec import GreedyRule
from envs.errors import InputError
from envs.report import Policy

MODULE_SUBPATH = Path("learner_group") / "learner" / "rl_module" / "default_policy"


def load_greedy_policy(checkpoint_dir: str | Path, greedy: GreedyRule) -> Policy:
    """The greedy policy of an RLlib algorithm checkpoint (as Tune keeps them)."""
    module_dir = Path(checkpoint_dir) / MODULE_SUBPATH
    if not module_dir.exists():
        raise InputError(f"{checkpoint_dir}: not an RLlib algorithm checkpoint (no {MODULE_SUBPATH})")
    return load_module_policy(module_dir, greedy)


def load_module_policy(module_dir: str | Path, greedy: GreedyRule) -> Policy:
    """The greedy policy of a saved RLModule folder."""
    from ray.rllib.core.rl_module.rl_module import RLModule

    module = RLModule.from_checkpoint(Path(module_dir))
    module.eval()

    def policy(observations: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            out = module.forward_inference({"obs": torch.as_tensor(observations, dtype=torch.float32)})
        return greedy.actions(out).cpu().numpy().astype(np.int64)

    return policy
