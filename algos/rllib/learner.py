"""`RLlibLearner`: RLlib's algorithms as an implementation of the learner interface (algos/base.py, `Learner`).

An RLlib algorithm brings its config builder and what Tune runs, the RLModule classes it trains (RLlib's default
module, and its module for a universe of assets, if any) and how the default module's forward_inference reaches its
nets; this class adds what every RLlib algorithm shares: RLlib's result keys (new API stack) and the numpy export of
those modules. Module classes are imported inside methods (Ray and torch), so a learner loads without them.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from algos.base import Learner
from algos.export.torch_layers import not_exportable

# Result keys every RLlib algorithm reports (new API stack), as paths "a/b/c" into its result.
_TOP = ("training_iteration", "time_total_s", "time_this_iter_s", "time_since_restore", "iterations_since_restore",
        "num_env_steps_sampled_lifetime", "num_training_step_calls_per_iteration", "selection_score")
_EPISODES = ("episode_return_mean", "episode_return_max", "episode_return_min", "episode_len_mean",
             "episode_len_max", "episode_len_min", "episode_duration_sec_mean", "num_episodes",
             "num_episodes_lifetime", "num_env_steps_sampled", "num_env_steps_sampled_lifetime")
_LEARNER = ("total_loss", "default_optimizer_learning_rate", "module_train_batch_size_mean", "num_module_steps_trained",
            "num_module_steps_trained_lifetime", "num_trainable_parameters", "gradients_default_optimizer_global_norm")
# Sub-trees whose keys are free-form (timers, system stats): any key below them is accepted.
_FREE_PREFIXES = ("timers/", "perf/", "fault_tolerance/", "learners/__all_modules__/", "env_runners/module_",
                  "env_runners/agent_", "evaluation/env_runners/module_", "evaluation/env_runners/agent_")


class RLlibLearner(Learner):
    """An RLlib algorithm on the new API stack: `build` returns its AlgorithmConfig, Tune runs its Algorithm."""

    learner_metrics: tuple[str, ...] = ()       # keys under learners/<module id>/ beyond the common ones
    free_result_prefixes: tuple[str, ...] = ()  # sub-trees of its own, e.g. replay_buffer/

    def default_module(self) -> type | None:
        """RLlib's default RLModule class it trains, exported as an MLP encoder and MLP heads; None: none."""
        return None

    def portfolio_module(self) -> type | None:
        """Its RLModule class for a universe of assets (algos/networks/portfolio_module.py), exported as the policy
        net that the shared-weights model runs on each asset's row; None: none."""
        return None

    def policy_nets(self, module: Any) -> tuple[Any, dict[str, Any]]:
        """The default module's (MLP encoder, {head name: MLP head}) as forward_inference runs them; raises
        `not_exportable` for a configuration numpy cannot run (e.g. distributional DQN)."""
        raise not_exportable(f"RLModule class {type(module).__name__}")

    def result_keys(self) -> list[str]:
        episodes = [f"{where}/{key}" for where in ("env_runners", "evaluation/env_runners") for key in _EPISODES]
        learners = [f"learners/default_policy/{key}" for key in (*_LEARNER, *self.learner_metrics)]
        return [*_TOP, *episodes, *learners]

    def reports(self, key: str) -> bool:
        return key in self.result_keys() or key.startswith((*_FREE_PREFIXES, *self.free_result_prefixes))

    def export_nets(self, module: Any, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
        """Its portfolio module's policy net, or its default module's nets, matched by exact class: a subclass may
        change the forward pass that numpy re-implements."""
        layouts, kind = self.numpy_layouts, type(module)
        if layouts is not None and layouts.portfolio and kind is self.portfolio_module():
            from algos.networks.portfolio_numpy import export_portfolio

            return export_portfolio(module.pi, arrays)
        if layouts is not None and layouts.default and kind is self.default_module():
            from algos.rllib.export import action_structure, export_mlp

            actions = action_structure(module.action_space, layouts.box, arrays)
            encoder, heads = self.policy_nets(module)
            return export_mlp(encoder, heads, actions, arrays)
        raise not_exportable(f"RLModule class {kind.__name__}")
