"""What an algorithm is to the platform: an `Algorithm` (an entry of the table, `algos.ALGORITHMS`) and its `Learner`.

The platform (`experiments/`) knows algorithms only through these two classes. `Algorithm` is what it reads before
any training, without importing Ray or torch: the model of the `training` section, the action spaces it acts in, the
greedy rule that turns its policy's output into actions, its smoke-test budget, and the hints the hardware plan and
the dry run take (speed, replay ratio, mixed precision, exploration, uneven batch splits, what it needs of the env).
`Learner` is how it trains (the learner interface): the config built from plain values (`algos.inputs.BuildInputs`),
what Tune runs, the result keys its trials report, and the numpy export of the policy it trained. RLlib's algorithms
are one implementation (`algos.rllib.learner.RLlibLearner`); the direct learner (algos/direct/) runs inside RLlib's
PPO algorithm object with a training step of its own, so its learner extends PPO's (`DirectLearner`).
"""
from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from algos.export.torch_layers import not_exportable
from algos.greedy import GreedyRule
from algos.inputs import BuildInputs, TrainingBase
from envs.errors import InputError

if TYPE_CHECKING:
    from algos.export.numpy_policy import NumpyPolicy

# The gymnasium action-space kinds an algorithm may declare (Algorithm.action_spaces).
ACTION_SPACE_KINDS: dict[str, type[gym.Space]] = {"discrete": gym.spaces.Discrete, "box": gym.spaces.Box}
# The heads the numpy forward pass runs after the encoder: one head, or a dueling DQN's two streams.
DUELING_HEADS = ("af", "vf")


@dataclass(frozen=True)
class NumpyLayouts:
    """What a numpy export of a learner's trained modules may hold (`Learner.numpy_layouts`), read by the loader
    (algos/export/numpy_policy.py) without torch, which refuses a file whose nets are none of these."""

    # The net names (encoder and heads) of its default RLModule's export, each layout one tuple (DQN: dueling or
    # not); (): it exports no default module.
    default: tuple[tuple[str, ...], ...] = ()
    # Whether that default module acts in a 1-d Box (its bounds are exported; the greedy rule turns the head's
    # Gaussian inputs into an action in it); else in a discrete space (the action is the argmax of the head).
    box: bool = False
    # Whether it exports a portfolio module's policy net (algos/networks/, training.model: shared_assets or flat).
    portfolio: bool = False

    def __post_init__(self) -> None:
        if not self.default and not self.portfolio:
            raise InputError("numpy layouts: give the default module's layouts, or portfolio=True, or none at all")
        for layout in self.default:
            heads = sorted(set(layout) - {"encoder"})
            if "encoder" not in layout or len(layout) != len(set(layout)) or (
                    len(heads) != 1 and heads != sorted(DUELING_HEADS)):
                raise InputError(f"numpy layout {list(layout)} is not an encoder and one head, or an encoder and "
                                 f"the dueling {' and '.join(DUELING_HEADS)}")

    @property
    def action_key(self) -> str:
        """The structure key of the default module's action count: a Box's size, or the discrete actions."""
        return "action_size" if self.box else "num_actions"

    def serves(self, kind: str) -> bool:
        """Whether it exports a policy for action spaces of `kind` (a key of ACTION_SPACE_KINDS)."""
        return self.serves_default(kind) or (kind == "box" and self.portfolio)

    def serves_default(self, kind: str) -> bool:
        """Whether it exports its default module (RLlib's MLP, no portfolio model) in action spaces of `kind`."""
        return bool(self.default) and self.box == (kind == "box")


class Learner(ABC):
    """The learner interface: how an algorithm trains its policy, what its trials report, and how the policy it
    trained becomes the numpy policy the platform scores and serves. Its methods import Ray and torch inside, never
    at module load."""

    # What a numpy export of its trained modules may hold; None: it has none, so its policy cannot be registered.
    numpy_layouts: NumpyLayouts | None = None

    @abstractmethod
    def build(self, inputs: BuildInputs) -> Any:
        """The config of one trial, or of a whole sweep with Tune domains inside, from plain values (RLlib: an
        AlgorithmConfig)."""

    @abstractmethod
    def trainable(self, training: dict[str, Any]) -> Any:
        """What Tune runs, given the `training` section as a dict: a registered name or a class."""

    @abstractmethod
    def result_keys(self) -> list[str]:
        """Every fixed result key its trials report (tune.metric and tune.stop must name one)."""

    @abstractmethod
    def reports(self, key: str) -> bool:
        """Whether `key` ("/"-separated) is a key its trials report, fixed or in a free-form sub-tree."""

    def export_nets(self, module: Any, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
        """A trained module's nets for the numpy policy: their arrays added to `arrays`, the structure that runs them
        returned (its format and algorithm aside); InputError (`not_exportable`) for a module numpy cannot run."""
        raise not_exportable(f"RLModule class {type(module).__name__} ({type(self).__name__} exports none)")


class Algorithm:
    """An entry of the algorithm table: what the platform reads before training, and the learner that trains it.
    A subclass sets the class attributes and overrides the hints that differ from these defaults."""

    name: str                              # its key in algos.ALGORITHMS, what `algorithm:` names
    training_section: type[TrainingBase]   # the model of its `training` section
    greedy: GreedyRule                     # how its policy's output becomes greedy actions
    action_spaces: tuple[str, ...]         # kinds of ACTION_SPACE_KINDS its policy acts in
    learner: Learner
    # --set overrides that make a --smoke-test run short, on top of the platform's (2 trials x 2 iterations).
    smoke_overrides: tuple[str, ...] = ()
    # rl_module keys its network reads beyond the shared ones (RLModuleSection.ALGORITHM_KEYS lists all such keys);
    # a file that sets one its algorithm does not read is refused.
    module_keys: tuple[str, ...] = ()

    def __init__(self) -> None:
        unknown = [kind for kind in self.action_spaces if kind not in ACTION_SPACE_KINDS]
        if unknown or not self.action_spaces:
            raise InputError(f"algorithm {self.name}: action_spaces {list(self.action_spaces)} must name one or more "
                             f"of {', '.join(ACTION_SPACE_KINDS)}")

    def supports(self, space: gym.Space) -> bool:
        """Whether this algorithm acts in the gymnasium action space `space` (a Discrete, a Box, ...)."""
        return any(isinstance(space, ACTION_SPACE_KINDS[kind]) for kind in self.action_spaces)

    def speedup(self, training: Any) -> float:
        """Env steps/s relative to the hardware preset's declared rate (stock RLlib DQN), for time estimates."""
        return 1.0

    def replay_ratio(self, training: Any, fragment: int, num_envs: int) -> float | None:
        """Replayed samples per sampled env step (the plan's "updates per env step"), given the training section, the
        rollout fragment length and the envs per runner; None when it has none (on-policy)."""
        return None

    def mixed_precision(self, training: Any) -> bool:
        """Whether its learner applies a preset's mixed_precision with these training settings."""
        return False

    def exploration_steps(self, training: Any) -> int:
        """Env steps until its exploration has decayed (0: no schedule), for
        tune.checkpoint.select.after_exploration."""
        return 0

    def splits_batch_unevenly(self, training: Any) -> bool:
        """Whether its learner splits an update's batch unevenly over data-parallel learners, weighting each slice's
        loss by its share (FastDQN); stock RLlib learners need a batch divisible by the learners."""
        return False

    def check_env(self, env: Any, env_id: str, training: Any) -> None:
        """What it needs of the env beyond its action space, checked before Ray starts: InputError in one line."""

    def numpy_policy(self, module: Any) -> NumpyPolicy:
        """The numpy forward pass of a module its learner trained: the learner's nets, under a structure that names
        this algorithm, loaded as a served file is, so an export that cannot be served fails now. InputError (one
        line) for a module numpy cannot run (a customised subclass too: it may override the forward pass the numpy
        policy re-implements)."""
        from algos.export.numpy_policy import FORMAT, STRUCTURE_KEY, NumpyPolicy

        arrays: dict[str, np.ndarray] = {}
        structure = {"format": FORMAT, "algorithm": self.name, **self.learner.export_nets(module, arrays)}
        arrays[STRUCTURE_KEY] = np.array(json.dumps(structure))
        return NumpyPolicy.from_arrays(arrays)

    def export_numpy(self, module: Any) -> dict[str, np.ndarray]:
        """The arrays of `numpy_policy(module)`: what `np.savez` stores and `NumpyPolicy.from_arrays` runs."""
        return self.numpy_policy(module).to_arrays()


def check_servable(name: str, algorithm: Algorithm) -> None:
    """Refuse, before Ray starts and before any training, an algorithm whose best policy could not be registered.

    Registration (experiments/results/registry.py) runs after the whole sweep: it exports the best trial's RLModule to
    numpy (`Algorithm.export_numpy`); scoring falls back to torch, so nothing fails earlier. What can be known from the
    entry alone is checked here: its learner has a numpy export; its greedy rule turns the export's outputs into the
    action numpy serves (a discrete module's argmax, a Box's rule on the Gaussian's inputs); and the export serves each
    action-space kind it declares. `name`: its key in algos.ALGORITHMS. InputError in one line naming
    `algorithm: <name>` and the fix. Imports no module class: no torch, no Ray."""
    layouts, rule = algorithm.learner.numpy_layouts, algorithm.greedy
    if layouts is None:
        raise InputError(f"algorithm: {name} could not be registered or served after its sweep: its learner has no "
                         "numpy export; give it numpy_layouts and export_nets (algos/base.py, Learner)")
    if layouts.serves("discrete") and (rule.squash or (rule.box_mean and not rule.argmax)):
        raise InputError(f"algorithm: {name}: greedy rule {rule} does not match its numpy export, which serves the "
                         "argmax of a discrete module's head: set argmax=True, or name an output that already holds "
                         "the action")
    if layouts.serves("box") and not (rule.squash or rule.box_mean):
        raise InputError(f"algorithm: {name}: greedy rule {rule} does not match its numpy export, whose Box head gives "
                         "a Gaussian's means and log-stds: set squash=True (tanh of the mean) or box_mean=True (the "
                         "mean)")
    for kind in algorithm.action_spaces:
        if not layouts.serves(kind):
            raise InputError(f"algorithm: {name}: action_spaces names {kind} but its numpy export serves no {kind} "
                             f"policy, so a {kind} run could not be registered: export a module that acts in it, or "
                             f"drop {kind} from action_spaces")


def check_servable_space(name: str, algorithm: Algorithm, space: gym.Space, training: Any) -> None:
    """Refuse, before any training, a run whose policy the numpy export could not serve in the env's action `space`:
    RLlib's default module (`training.model: default`, or no such key) exports only the action kind its learner's
    layouts name (PPO: discrete), while a portfolio model (algos/networks/) exports a Box. Without this, PPO on a
    one-asset continuous env trains its whole sweep and then fails to register. InputError in one line with the fix."""
    layouts = algorithm.learner.numpy_layouts
    kind = next((kind for kind, cls in ACTION_SPACE_KINDS.items() if isinstance(space, cls)), None)
    if layouts is None or kind is None or getattr(training, "model", "default") != "default":
        return
    if not layouts.serves_default(kind):
        import algos

        served = [other for other, entry in algos.ALGORITHMS.items() if entry.supports(space) and
                  entry.learner.numpy_layouts is not None and entry.learner.numpy_layouts.serves_default(kind)]
        raise InputError(f"algorithm: {name} with its default module could not be registered or served in a {kind} "
                         f"action space: its numpy export serves its default module in "
                         f"{'box' if layouts.box else 'discrete'} spaces only; use algorithm: "
                         f"{' or '.join(served) or '?'} for this env")

