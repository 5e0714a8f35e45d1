"""A numpy forward pass for the platform's trained policies: serving one needs neither torch nor Ray.

An algorithm exports its trained RLModule with `Algorithm.export_numpy` (its learner reads the module's nets: a
default DQN or PPO RLModule, MLP encoder, MLP heads, discrete actions; a default SAC RLModule's policy network in a
1-d Box; a portfolio module's policy net) into a flat dict of numpy arrays that `np.savez` stores: the weights, a
Box's bounds, and the structure as JSON in a 0-d string array, which names the algorithm by its key in
`algos.ALGORITHMS`. `NumpyPolicy` runs that dict in float32 and returns the greedy actions (the algorithm's
`Algorithm.greedy`), so the platform's scorer and a served model compute actions with the very same code. This
module knows no algorithm by name: the layouts an algorithm's export may have come from its learner in the table
(`Learner.numpy_layouts`), so a servable algorithm is one entry there.

The nets run through `algos.export.mlp_numpy` (one observation at a time, so a row's action does not depend on its
batch: that module's docstring says why); an export of the layout "portfolio" runs its policy net on every asset's
row (`algos.networks.portfolio_numpy`).
"""
from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import algos
from algos.export.mlp_numpy import MLPNets, array_of
from algos.greedy import GreedyRule
from algos.networks.portfolio_numpy import (
    CASH_KEY,
    PORTFOLIO,
    PORTFOLIO_NETS,
    SCORES,
    portfolio_outputs,
    portfolio_sizes,
)
from envs.errors import InputError

FORMAT = "rlplatform-numpy-policy/1"
STRUCTURE_KEY = "structure"
# The arrays of a Box export's bounds (Learner.numpy_layouts.box: SAC's), each float32 (action_size,).
BOUNDS = ("action.low", "action.high")


def _served(name: Any) -> Any:
    """The algorithm (`algos.base.Algorithm`) an exported structure names; InputError when no algorithm of this
    version serves that name. Reads the table, which imports neither torch nor Ray."""
    table = algos.ALGORITHMS
    algorithm = table.get(name) if isinstance(name, str) else None
    if algorithm is None or algorithm.learner.numpy_layouts is None:
        servable = sorted(key for key, entry in table.items() if entry.learner.numpy_layouts is not None)
        raise InputError(f"numpy policy algorithm {name!r} is not one of {servable}")
    return algorithm


class NumpyPolicy:
    """A greedy policy computed with numpy in float32: observations (n, observation_size) -> actions, (n,) int64
    for discrete actions (DQN, PPO) or (n, action_size) float32 in the Box (SAC); for a portfolio module,
    observations (n, N, row_size) -> scores (n, N+1) float32 in [-1, 1], cash first.

    Built from `Algorithm.export_numpy`'s dict (`from_arrays`) or a file of it (`load`). Each observation is
    evaluated on its own (algos/export/mlp_numpy.py), so the result for one observation does not depend on its
    batch."""

    def __init__(self, structure: dict[str, Any], arrays: Mapping[str, np.ndarray], greedy: GreedyRule,
                 box: bool) -> None:
        """Use `from_arrays` or `load`: they check the dict this trusts, and pass its algorithm's greedy rule and
        whether its default module acts in a Box (NumpyLayouts.box)."""
        self.structure = structure
        # What `outputs` are: "dqn" Q-values, "ppo" logits, "sac" the squashed Gaussian's means, then log-stds.
        self.algorithm: str = structure["algorithm"]
        self._greedy = greedy  # turns a Box's or a portfolio's outputs into the action (a discrete one: the argmax)
        self._arrays = dict(arrays)
        self.portfolio = structure.get("layout") == PORTFOLIO
        self.num_actions: int | None = structure.get("num_actions")  # discrete actions; None for a Box, a portfolio
        # A Box export's space (its bounds rescale the greedy action); None for discrete actions and a portfolio.
        self.action_space: gym.spaces.Box | None = None
        if self.portfolio:
            # A portfolio's row width, its N (None: shared, any N) and cash's (mean, log-std) (None: flat).
            self.row_size: int = structure["row_size"]
            self.num_assets: int | None = None if structure["shared"] else structure["num_assets"]
            self._cash = array_of(self._arrays, CASH_KEY, 1, f"numpy policy {CASH_KEY}") if structure["shared"] \
                else None
            if self._cash is not None and self._cash.shape != (2,):
                raise InputError(f"numpy policy {CASH_KEY}: shape {self._cash.shape}, not (2,) (mean, log-std)")
            # The rows `pi` runs on: one asset's row each (shared), or the flattened universe.
            self.observation_size = self.row_size * (self.num_assets or 1)
            self.num_outputs = 2 * (self.num_assets + 1) if self.num_assets else 2
        else:
            self.observation_size = structure["observation_size"]
            self.num_outputs = self.num_actions
            if box:
                self.action_space = self._box(structure["action_size"])
                self.num_outputs = 2 * structure["action_size"]
        self._nets = MLPNets(structure["nets"], self._arrays, self.observation_size)

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> NumpyPolicy:
        """The policy of an exported dict; InputError in one line if it is not one this version can run."""
        if STRUCTURE_KEY not in arrays:
            raise InputError(f"not a numpy policy: no '{STRUCTURE_KEY}' entry (export it with "
                             "algos.ALGORITHMS[name].export_numpy)")
        try:
            structure = json.loads(str(arrays[STRUCTURE_KEY][()]))
        except (ValueError, IndexError) as exc:
            raise InputError(f"not a numpy policy: its '{STRUCTURE_KEY}' entry is not JSON ({exc})") from None
        if not isinstance(structure, dict) or structure.get("format") != FORMAT:
            found = structure.get("format") if isinstance(structure, dict) else None
            raise InputError(f"numpy policy format {found!r} is not {FORMAT!r}: export the module again with "
                             "this version of algos/export/numpy_policy.py")
        served = _served(structure.get("algorithm"))
        layouts = served.learner.numpy_layouts
        algorithm = structure["algorithm"]
        nets = structure.get("nets")
        heads = sorted(nets) if isinstance(nets, dict) else None
        portfolio = structure.get("layout") == PORTFOLIO
        if portfolio:
            known = (PORTFOLIO_NETS,) if layouts.portfolio else ()
        else:
            known = tuple(tuple(sorted(names)) for names in layouts.default)
        if heads is None or tuple(heads) not in known or not all(isinstance(ops, list) for ops in nets.values()):
            names = " or ".join(", ".join(layout) for layout in known) or "it exports none"
            kind = f"portfolio {algorithm.upper()}" if portfolio else algorithm.upper()
            raise InputError(f"numpy policy nets {heads} are not a {kind}'s ({names}), each a list of ops")
        sizes = portfolio_sizes(structure) if portfolio else ("observation_size", layouts.action_key)
        for key in sizes:
            if not isinstance(structure.get(key), int) or structure[key] < 1:
                raise InputError(f"numpy policy {key} {structure.get(key)!r} is not a positive integer")
        try:
            policy = cls(structure, {key: np.asarray(value) for key, value in arrays.items()}, served.greedy,
                         layouts.box)
        except InputError:
            raise
        except (TypeError, ValueError) as exc:  # an op's number that is not one
            raise InputError(f"numpy policy structure is malformed ({exc})") from None
        for name, steps in policy._nets.heads.items():
            expected = 1 if name == "vf" else policy.num_outputs
            if not steps or steps[-1].width != expected:
                found = steps[-1].width if steps else "no"
                raise InputError(f"numpy policy {name} head has {found} outputs, not {expected}")
        return policy

    def _box(self, size: int) -> gym.spaces.Box:
        """A Box export's (SAC's) space from its BOUNDS arrays, each checked: float32 (size,), no NaN, low <= high."""
        low, high = (array_of(self._arrays, key, 1, f"numpy policy {key}") for key in BOUNDS)
        if low.shape != (size,) or high.shape != (size,) or not np.all(low <= high):
            raise InputError(f"numpy policy action bounds {low} .. {high} are not {size} pairs with low <= high")
        return gym.spaces.Box(low, high, dtype=np.float32)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The dict this policy was built from (what `save` stores)."""
        return dict(self._arrays)

    def save(self, path: str | Path) -> None:
        """Store the policy at `path` exactly (np.savez would add '.npz' to a name without it)."""
        with open(path, "wb") as file:
            np.savez(file, **self._arrays)

    @classmethod
    def load(cls, path: str | Path) -> NumpyPolicy:
        """The policy `save` stored; InputError (one line) for a missing or foreign file. Reads no pickles."""
        return cls.from_arrays(read_arrays(path))

    def outputs(self, observations: np.ndarray) -> np.ndarray:
        """The raw head output per observation, float32 (n, num_outputs): Q-values (DQN), logits (PPO), the
        squashed Gaussian's means then log-stds (SAC, 2 x action_size); for a portfolio, (n, 2(N+1)): the
        Gaussian's means, cash first, then its log-stds."""
        if self.portfolio:
            return portfolio_outputs(lambda rows: self._nets.rows(rows, self.num_outputs), observations,
                                     self.row_size, self.num_assets, self._cash)
        batch = np.asarray(observations, dtype=np.float32)
        if batch.ndim != 2 or batch.shape[1] != self.observation_size:
            raise ValueError(f"observations must have shape (n, {self.observation_size}); "
                             f"got {batch.shape}")
        return self._nets.rows(batch, self.num_outputs)

    def __call__(self, observations: np.ndarray) -> np.ndarray:
        """The greedy actions: (n,) int64, the argmax of `outputs` (the first on a tie, as torch.argmax), or for a
        Box (n, action_size) float32, its algorithm's greedy rule on `outputs` (SAC's: tanh of the mean rescaled to the
        Box); for a portfolio, the scores (n, N+1) float32, cash first: PPO's mean, SAC's tanh of it, in [-1, 1]."""
        outputs = self.outputs(observations)
        if self.portfolio:  # the scores, in [-1, 1] as RLlib's env runners put a sampled action there
            return self._greedy.actions({self._greedy.output: outputs}, SCORES)
        if self.action_space is not None:
            return self._greedy.actions({self._greedy.output: outputs}, self.action_space)
        return outputs.argmax(axis=1).astype(np.int64)


def read_arrays(path: str | Path) -> dict[str, np.ndarray]:
    """The arrays of a stored policy file (one policy's, or an ensemble's: algos/export/ensemble_policy.py), without
    pickles; InputError (one line) for a missing file or one that is no numpy archive."""
    try:
        with np.load(path, allow_pickle=False) as stored:
            return {key: stored[key] for key in stored.files}
    except FileNotFoundError:
        raise InputError(f"{path}: numpy policy file not found") from None
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        reason = " ".join(str(exc).split())
        raise InputError(f"{path}: not a numpy policy file ({reason})") from None
