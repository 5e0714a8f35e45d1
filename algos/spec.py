"""What an algorithm brings to the platform (`algos.ALGORITHMS`), without importing Ray.

Each algorithm module defines one `AlgorithmSpec`: the model of its `training` section, the builder
that turns plain values (`BuildInputs`) into an RLlib config, what Tune runs, the action spaces it acts
in, how its RLModule's output becomes greedy actions, its smoke-test budget and the result keys its
learners report. The platform (`experiments/`) knows algorithms only through this.
"""
from __future__ import annotations

import importlib
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

import gymnasium as gym
import numpy as np
from pydantic import Field

from envs.errors import InputError
from envs.validation import StrictModel

# The gymnasium action-space kinds an algorithm may declare (AlgorithmSpec.action_spaces).
ACTION_SPACE_KINDS: dict[str, type[gym.Space]] = {"discrete": gym.spaces.Discrete, "box": gym.spaces.Box}
DEFAULT_BATCH = 32  # training.train_batch_size_per_learner's default: the batch of one update per learner


class TrainingBase(StrictModel):
    """Keys every algorithm's `training` section has: the hardware plan reads the batch and lr."""

    lr: float = Field(default=5e-4, gt=0, description="The optimizer's learning rate (a hardware preset's lr rule "
                                                      "scales it with batch_scaling: preset).")
    gamma: float = Field(default=0.99, gt=0, le=1,
                         description="The discount factor: how much a reward later counts now; closer to 1 looks "
                                     "further ahead.")
    train_batch_size_per_learner: int = Field(
        default=DEFAULT_BATCH, ge=1,
        description="The batch of one update per learner. A hardware preset never changes it (data-parallel presets "
                    "split it over their learners) unless batch_scaling: preset.")
    batch_scaling: Literal["none", "preset"] = Field(
        default="none",
        description="preset opts in to the hardware preset's large_batch and its lr rule (a bigger batch per update "
                    "on big GPUs); none keeps the batch and lr as written.")
    grad_clip: float | None = Field(default=40.0, gt=0,
                                    description="Clip the gradients' global norm to this; None: no clipping.")


def slice_sizes(batch: int, learners: int) -> tuple[int, ...]:
    """How one update's `batch` items are split over `learners`: as even as it gets, larger slices first."""
    base, extra = divmod(batch, learners)
    return tuple(base + (1 if j < extra else 0) for j in range(learners))


def slice_weights(batch: int, learners: int) -> tuple[float, ...]:
    """Each slice's loss factor: DDP averages the learners' gradients (1/N each), the single-learner update
    weighs each item 1/batch, so slice j's mean loss is scaled by N x size_j / batch (1.0 when even)."""
    return tuple(learners * size / batch for size in slice_sizes(batch, learners))


@dataclass(frozen=True)
class Resources:
    """Resources of one trial, settled by the platform from the experiment and the hardware plan."""

    num_env_runners: int
    num_envs_per_env_runner: int
    num_cpus_per_env_runner: float
    num_learners: int
    num_gpus_per_learner: float
    mixed_precision: str = "none"
    torch_compile_learner: bool = False
    custom_resources: dict[str, float] = field(default_factory=dict)  # of the trial's main process
    # The whole batch of one update when it does not split evenly over the learners (FastDQN weights the
    # slices, experiments/hardware/batch.py); None: train_batch_size_per_learner x learners.
    update_batch_size: int | None = None


@dataclass(frozen=True)
class SelectionRule:
    """How a checkpoint's selection score comes from the validation scores (tune.checkpoint.select): the mean of the
    last `smooth` iterations' scores, and none before `explore_until` env steps (while exploration decays)."""

    smooth: int = 1
    explore_until: int = 0

    def score(self, history: list[float], env_steps: float, mode: str) -> float:
        """The selection score of the newest iteration, given every iteration's validation score so far."""
        worst = float("-inf") if mode == "max" else float("inf")
        recent = history[-self.smooth:]
        if env_steps < self.explore_until or not recent or not all(math.isfinite(v) for v in recent):
            return worst
        return float(sum(recent) / len(recent))


@dataclass(frozen=True)
class BuildInputs:
    """Everything a builder needs, as plain values: the experiment's sections as dicts (search domains
    already in place, the batch and lr already planned for the hardware), resources, the selection
    metric and the seed."""

    env_id: str
    sections: dict[str, Any]   # environment, env_runners, learners, training, rl_module, evaluation, reporting
    resources: Resources
    metric: str
    mode: str
    seed: Any = None
    has_vector_env: bool = False
    selection: SelectionRule = field(default_factory=SelectionRule)
    warm_start: str | None = None  # an algorithm checkpoint whose learner state every trial starts from
    system_metrics_interval_s: float | None = None  # sample the trial's system use this often (None: never)
    greedy: "GreedyRule | None" = None  # the algorithm's greedy rule, for an env family's validation scores


@dataclass(frozen=True)
class GreedyRule:
    """How a forward_inference output becomes greedy actions: the output key, and either that it holds
    per-action scores (logits) whose argmax is the action (`argmax`), or a squashed Gaussian's inputs whose mean
    is the action (`squash`: the first half of the last axis is the mean; the action is tanh(mean), rescaled
    from [-1, 1] to the Box's [low, high] as RLlib's env runners unsquash a sampled action), or neither: the
    output is the action. `box_mean` adds, for a Box action space, a diagonal Gaussian's inputs whose mean (the first
    half of the last axis, not squashed) is the action, rescaled and clipped to the Box as RLlib's env runners
    unsquash a sampled action: PPO's rule is argmax for discrete actions and box_mean for a Box. Data, not code, so
    the registered MLflow model (experiments/results/policy_model.py) applies it without importing the platform.
    Works on numpy arrays and torch tensors alike."""

    output: str
    argmax: bool = False
    squash: bool = False
    box_mean: bool = False

    def __post_init__(self) -> None:
        if self.argmax and self.squash:
            raise InputError(f"greedy rule for {self.output!r}: argmax (discrete) and squash (Box) exclude each other")
        if self.box_mean and self.squash:
            raise InputError(f"greedy rule for {self.output!r}: box_mean (a Gaussian's mean) and squash (tanh of it) "
                             "exclude each other")

    def actions(self, out: dict[str, Any], space: Any = None) -> Any:
        """The greedy actions of a forward_inference output. `space`: the action space (a gymnasium Box, or
        anything with its `low` and `high` arrays), used by `squash` and `box_mean` only; without it (or with
        infinite bounds, which RLlib leaves unscaled too) a squashed action stays in [-1, 1] and `box_mean` does not
        apply (a discrete space has no bounds either)."""
        values = out[self.output]
        if self.box_mean and hasattr(space, "low"):
            return _in_box(values[..., :values.shape[-1] // 2], space)
        if self.argmax:
            return values.argmax(-1)
        if self.squash:
            return _squashed_mean(values, space)
        return values


def _squashed_mean(values: Any, space: Any) -> Any:
    """tanh of the mean half of a squashed Gaussian's inputs, rescaled to `space`'s bounds when they are finite."""
    mean = values[..., :values.shape[-1] // 2]
    unit = mean.tanh() if hasattr(mean, "tanh") else np.tanh(mean)  # a torch tensor keeps its type and device
    return _in_box(unit, space)


def _in_box(unit: Any, space: Any) -> Any:
    """Actions meant for [-1, 1] rescaled to `space`'s bounds when they are finite (else as they are)."""
    if space is None or not (np.isfinite(space.low).all() and np.isfinite(space.high).all()):
        return unit
    low, high = _like(space.low, unit), _like(space.high, unit)
    # As RLlib's unsquash_action (ray/rllib/utils/spaces/space_utils.py) computes it, clip included: the
    # rescaled tanh can land one rounding step outside the bounds.
    return ((unit + 1.0) * (high - low) / 2.0 + low).clip(low, high)


def _like(bound: Any, values: Any) -> Any:
    """An action-space bound as the type, dtype (and device) of `values`, so the arithmetic stays in one library."""
    if hasattr(values, "new_tensor"):
        return values.new_tensor(np.asarray(bound))
    return np.asarray(bound, dtype=values.dtype)


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


# Where a NumpyExport names an RLModule class: "package.module:Class", as envs.EnvFamily names its entry points.
CLASS_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
# The heads numpy_policy's forward pass runs after the encoder: one head, or a dueling DQN's two streams.
DUELING_HEADS = ("af", "vf")


def not_exportable(what: str) -> InputError:
    """The one-line refusal of a module the numpy forward pass does not cover, said alike by algos/numpy_policy.py and
    by an algorithm's `NumpyExport.nets`: the caller then scores the policy with torch, but cannot register it."""
    return InputError(f"{what} is not supported by the numpy policy (algos/numpy_policy.py); "
                      "the policy can still be scored with torch (experiments.results.policy.load_module_policy)")


def load_class(path: str) -> Any:
    """The class a CLASS_PATH names. Imports its module, which may import torch and Ray: call it only where they may
    load (a builder, an export), never to check a spec."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def class_path(cls: type) -> str:
    """The CLASS_PATH of `cls`: what a NumpyExport names it by (exact: a subclass has its own)."""
    return f"{cls.__module__}:{cls.__qualname__}"


@dataclass(frozen=True)
class NumpyExport:
    """What algos/numpy_policy.py must know of an algorithm to export its trained RLModule to numpy and serve it without
    torch or Ray (`AlgorithmSpec.export`). Each algorithm brings it in its SPEC, so numpy_policy keeps no table of
    algorithms: an exported file names its algorithm (its key in algos.ALGORITHMS) and the loader reads this from there.

    Module classes are named as CLASS_PATHs, not imported, so a spec (and `check_servable`) loads without torch or Ray,
    and matched exactly: a subclass may change the forward pass that numpy re-implements."""

    # RLlib's default RLModule the algorithm trains, exported as an MLP encoder and MLP heads; None: none.
    module: str | None = None
    # module -> (its MLP encoder, {head name: MLP head}) as forward_inference runs them; raises `not_exportable` for a
    # configuration numpy cannot run (e.g. distributional DQN). Imports Ray inside, if it must.
    nets: Callable[[Any], tuple[Any, dict[str, Any]]] | None = None
    # The net names (encoder and heads) an export of `module` may have, each layout one tuple (DQN: dueling or not);
    # the loader refuses a file whose nets are none of them.
    layouts: tuple[tuple[str, ...], ...] = ()
    # Whether `module` acts in a 1-d Box (its bounds are exported; the greedy rule turns the head's Gaussian inputs into
    # an action in it); else in a discrete space (the action is the argmax of the head).
    box: bool = False
    # Its module for a universe of assets (algos/portfolio_module.py, training.model: shared_assets or flat), exported
    # as the policy net `pi` that the shared-weights model runs on each asset's row; None: none.
    portfolio_module: str | None = None

    def __post_init__(self) -> None:
        paths = [path for path in (self.module, self.portfolio_module) if path is not None]
        if not paths:
            raise InputError("numpy export: name the RLModule class it exports (module or portfolio_module)")
        for path in paths:
            if not CLASS_PATH.fullmatch(path):
                raise InputError(f"numpy export: {path!r} is not a class path 'package.module:Class'")
        if self.module is not None and (self.nets is None or not self.layouts):
            raise InputError(f"numpy export of {self.module}: give its nets (module -> encoder, heads) and layouts")
        for layout in self.layouts:
            heads = sorted(set(layout) - {"encoder"})
            if "encoder" not in layout or len(layout) != len(set(layout)) or (
                    len(heads) != 1 and heads != sorted(DUELING_HEADS)):
                raise InputError(f"numpy export of {self.module}: layout {list(layout)} is not an encoder and one "
                                 f"head, or an encoder and the dueling {' and '.join(DUELING_HEADS)}")

    @property
    def action_key(self) -> str:
        """The structure key of `module`'s action count: a Box's size, or the discrete actions (the head's width)."""
        return "action_size" if self.box else "num_actions"

    def serves(self, kind: str) -> bool:
        """Whether it exports a policy for action spaces of `kind` (a key of ACTION_SPACE_KINDS)."""
        if kind == "discrete":
            return self.module is not None and not self.box
        return (self.module is not None and self.box) or self.portfolio_module is not None


@dataclass(frozen=True)
class AlgorithmSpec:
    name: str
    training_section: type[TrainingBase]
    build: Callable[[BuildInputs], Any]          # -> ray.rllib AlgorithmConfig
    trainable: Callable[[dict[str, Any]], Any]    # training section (dict) -> what Tune runs (name or class)
    greedy: GreedyRule
    action_spaces: tuple[str, ...]                 # kinds of ACTION_SPACE_KINDS its RLModule acts in
    # How its trained RLModule is exported to numpy, to be scored, registered and served without torch; None: it
    # cannot be registered (check_servable says so before the sweep).
    export: NumpyExport | None = None
    # --set overrides that make a --smoke-test run short, on top of the platform's (2 trials x 2 iterations).
    smoke_overrides: tuple[str, ...] = ()
    learner_metrics: tuple[str, ...] = ()          # keys under learners/<module id>/ beyond the common ones
    free_result_prefixes: tuple[str, ...] = ()     # sub-trees of its own, e.g. replay_buffer/
    # rl_module keys its network reads beyond the shared ones (RLModuleSection.ALGORITHM_KEYS lists all such keys);
    # a file that sets one its algorithm does not read is refused.
    module_keys: tuple[str, ...] = ()
    # Env steps/s relative to the hardware preset's declared rate (stock RLlib DQN), for time estimates.
    speedup: Callable[[Any], float] = field(default=lambda training: 1.0)
    # Replayed samples per sampled env step (a replay ratio, for the plan's "updates per env step"), given the
    # training section, the rollout fragment length and the envs per runner; None when it has none (on-policy).
    replay_ratio: Callable[[Any, int, int], float | None] = field(default=lambda training, fragment, num_envs: None)
    # Whether its learner applies a preset's mixed_precision with these training settings.
    mixed_precision: Callable[[Any], bool] = field(default=lambda training: False)
    # Env steps until its exploration has decayed (DQN: the epsilon schedule's last point; 0: no schedule), for
    # tune.checkpoint.select.after_exploration.
    exploration_steps: Callable[[Any], int] = field(default=lambda training: 0)
    # Whether its learner splits an update's batch unevenly over data-parallel learners, weighting each slice's loss
    # by its share (FastDQN); stock RLlib learners need a batch divisible by the learners.
    splits_batch_unevenly: Callable[[Any], bool] = field(default=lambda training: False)
    # What it needs of the env beyond its action space, checked before Ray starts: (env, env id, training section) ->
    # None, or InputError in one line (the direct learner: a family with a differentiable book, a batch that fits).
    check_env: Callable[[Any, str, Any], None] = field(default=lambda env, env_id, training: None)

    def __post_init__(self) -> None:
        unknown = [kind for kind in self.action_spaces if kind not in ACTION_SPACE_KINDS]
        if unknown or not self.action_spaces:
            raise InputError(f"algorithm {self.name}: action_spaces {list(self.action_spaces)} must name one or more "
                             f"of {', '.join(ACTION_SPACE_KINDS)}")

    def supports(self, space: gym.Space) -> bool:
        """Whether this algorithm acts in the gymnasium action space `space` (a Discrete, a Box, ...)."""
        return any(isinstance(space, ACTION_SPACE_KINDS[kind]) for kind in self.action_spaces)

    def result_keys(self) -> list[str]:
        """Every fixed result key this algorithm reports (tune.metric and tune.stop must name one)."""
        episodes = [f"{where}/{key}" for where in ("env_runners", "evaluation/env_runners") for key in _EPISODES]
        learners = [f"learners/default_policy/{key}" for key in (*_LEARNER, *self.learner_metrics)]
        return [*_TOP, *episodes, *learners]

    def reports(self, key: str) -> bool:
        """Whether `key` ("/"-separated) is a result key of this algorithm."""
        return key in self.result_keys() or key.startswith((*_FREE_PREFIXES, *self.free_result_prefixes))


def check_servable(name: str, spec: AlgorithmSpec) -> None:
    """Refuse, before Ray starts and before any training, an algorithm whose best policy could not be registered.

    Registration (experiments/results/registry.py) runs after the whole sweep: it exports the best trial's RLModule to
    numpy with the algorithm's greedy rule (algos.numpy_policy.export_module), and refuses a module class no algorithm
    exports and a greedy rule that is not the exporting algorithm's; scoring falls back to torch, so nothing fails
    earlier. What can be known from the spec alone is checked here: it has a numpy export; its greedy rule turns the
    export's outputs into the action numpy serves (a discrete module's argmax, a Box's rule on the Gaussian's inputs);
    and some export serves each action-space kind it declares. `name`: its key in algos.ALGORITHMS. InputError in one
    line naming `algorithm: <name>` and the fix. Imports no module class: no torch, no Ray."""
    export, rule = spec.export, spec.greedy
    if export is None:
        raise InputError(f"algorithm: {name} could not be registered or served after its sweep: its SPEC has no "
                         "numpy export; give it export=NumpyExport(...) (algos/spec.py) naming the RLModule class it "
                         "trains")
    if export.serves("discrete") and (rule.squash or (rule.box_mean and not rule.argmax)):
        raise InputError(f"algorithm: {name}: greedy rule {rule} does not match its numpy export, which serves the "
                         "argmax of a discrete module's head: set argmax=True, or name an output that already holds "
                         "the action")
    if export.serves("box") and not (rule.squash or rule.box_mean):
        raise InputError(f"algorithm: {name}: greedy rule {rule} does not match its numpy export, whose Box head gives "
                         "a Gaussian's means and log-stds: set squash=True (tanh of the mean) or box_mean=True (the "
                         "mean)")
    for kind in spec.action_spaces:
        if not export.serves(kind):
            raise InputError(f"algorithm: {name}: action_spaces names {kind} but its numpy export serves no {kind} "
                             f"policy, so a {kind} run could not be registered: export a module that acts in it, or "
                             f"drop {kind} from action_spaces")
