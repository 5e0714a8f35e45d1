"""An ensemble of exported policies as one policy: its decision is the mean of its members', in numpy (no torch or Ray).

Members are `algos.export.numpy_policy.NumpyPolicy`s of one run (e.g. a configuration's seeds, per fold). What is
averaged is what each member's decision is made of, so that an ensemble of identical members decides what each of them
does:

- `q_values`: a discrete policy whose greedy action is the argmax of its outputs as they are (DQN's Q-values): the
  mean of the members' outputs, then its argmax;
- `probabilities`: a discrete policy whose outputs are a categorical's logits (Algorithm.greedy.argmax, PPO):
  the mean of the members' action probabilities (softmax of the logits), then its argmax;
- `weights`: a portfolio policy (its scores, cash first, are mapped to weights by the env): each member's scores ->
  weights with the env's own rule (`WeightRule`, algos/families/portfolio_weights.py: the portfolio family's map,
  the tradable mask from the observation's last column), their mean, and scores that the env maps to exactly that
  mean (`weights_to_scores`);
- `exposure`: a policy acting in a Box (a target exposure, SAC's): the mean of the members' actions.

An ensemble is stored as one file in the numpy export's form: its own `structure` entry (FORMAT, the kind, the number
of members, the portfolio's weight rule) and every member's arrays under `member<i>/`. `load_policy` reads either kind
of file, so a registered ensemble serves, paper-trades and is scored as any exported policy. Each observation is
decided on its own (each member's outputs are, and the mean is taken element by element), so a row's decision does
not depend on its batch: a paper replay is its backtest to the last digit.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

import algos
from algos.export.numpy_policy import STRUCTURE_KEY, NumpyPolicy, read_arrays
from algos.families.portfolio_weights import WeightRule, weights_to_scores
from algos.networks.portfolio_model import TRADABLE_ABOVE, TRADABLE_COLUMN
from envs.errors import InputError

FORMAT = "rlplatform-numpy-ensemble/1"
MEMBER_PREFIX = "member{}/"
# What each kind averages, for the plan and the verdict's line ("the mean of its members' ...").
AVERAGED = {"q_values": "Q-values", "probabilities": "action probabilities", "weights": "weights",
            "exposure": "target exposures"}


def kind_of(member: NumpyPolicy) -> str:
    """What an ensemble averages of this member (module docstring), from its layout and its algorithm's greedy rule."""
    if member.portfolio:
        return "weights"
    if member.action_space is not None:
        return "exposure"
    return "probabilities" if algos.algorithm(member.algorithm).greedy.argmax else "q_values"


def _inputs(member: NumpyPolicy) -> str:
    """What a member reads and answers, in words: members must agree on it."""
    if member.portfolio:
        assets = "any number of" if member.num_assets is None else str(member.num_assets)
        return f"rows of {member.row_size} floats for {assets} assets"
    space = member.action_space
    answers = (f"{space.shape[0]} floats in {space.low.tolist()}..{space.high.tolist()}" if space is not None
               else f"one of {member.num_actions} actions")
    return f"{member.observation_size} floats, answering {answers}"


class EnsemblePolicy:
    """The mean decision of two or more exported policies that read the same inputs (module docstring):
    observations -> (n,) int64 actions (discrete), (n, size) float32 actions (a Box) or (n, N+1) float64 scores
    (a portfolio, for the env's weight rule)."""

    algorithm = "ensemble"  # what `NumpyPolicy.algorithm` says of a single policy: code that copies one refuses this

    def __init__(self, members: Sequence[NumpyPolicy], weight_rule: WeightRule | None = None) -> None:
        """InputError in one line for fewer than two members, members of different kinds or inputs, and a portfolio
        ensemble without the env's weight rule (or another kind with one)."""
        self.members = list(members)
        if len(self.members) < 2:
            raise InputError(f"an ensemble of {len(self.members)} member(s) is that member: an ensemble needs two or "
                             "more (more seeds in tune.seeds, or ensemble.over: configurations with a search)")
        kinds = {kind_of(member) for member in self.members}
        if len(kinds) > 1:
            raise InputError(f"ensemble members decide in different ways ({', '.join(sorted(kinds))}): an ensemble "
                             "averages one kind of decision")
        self.kind = kinds.pop()
        first = _inputs(self.members[0])
        for index, member in enumerate(self.members[1:], start=1):
            if _inputs(member) != first:
                raise InputError(f"ensemble members read different inputs: member 0 reads {first}, member {index} "
                                 f"{_inputs(member)}: an ensemble's members must read the same observation")
        if (self.kind == "weights") != (weight_rule is not None):
            raise InputError("a portfolio ensemble needs the env's weight rule, and only a portfolio ensemble has one")
        self.weight_rule = weight_rule
        self.portfolio = self.kind == "weights"

    def describe(self) -> str:
        """E.g. 'the mean of 2 members' weights'."""
        return f"the mean of {len(self.members)} members' {AVERAGED[self.kind]}"

    def __call__(self, observations: np.ndarray) -> np.ndarray:
        if self.kind == "weights":
            return self._scores(observations)
        if self.kind == "exposure":
            return self._mean([member(observations) for member in self.members]).astype(np.float32)
        outputs = [member.outputs(observations).astype(np.float64) for member in self.members]
        if self.kind == "probabilities":
            outputs = [_softmax(logits) for logits in outputs]
        return self._mean(outputs).argmax(axis=1).astype(np.int64)

    def _scores(self, observations: np.ndarray) -> np.ndarray:
        """The scores the env maps to the mean of the members' weights (module docstring)."""
        batch = np.asarray(observations, dtype=np.float32)
        tradable = batch[..., TRADABLE_COLUMN] > TRADABLE_ABOVE
        rule = self.weight_rule
        weights = self._mean([rule.weights(member(batch), tradable) for member in self.members])
        return weights_to_scores(weights, tradable, rule)

    @staticmethod
    def _mean(values: list[np.ndarray]) -> np.ndarray:
        """The members' mean, element by element in float64 (so a row's mean does not depend on its batch)."""
        total = np.asarray(values[0], dtype=np.float64).copy()
        for value in values[1:]:
            total += value
        return total / len(values)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """One dict for `np.savez`: the ensemble's structure and each member's arrays under member<i>/."""
        structure = {"format": FORMAT, "kind": self.kind, "members": len(self.members),
                     "weight_rule": asdict(self.weight_rule) if self.weight_rule else None}
        arrays = {STRUCTURE_KEY: np.array(json.dumps(structure))}
        for index, member in enumerate(self.members):
            arrays.update({MEMBER_PREFIX.format(index) + key: value for key, value in member.to_arrays().items()})
        return arrays

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> EnsemblePolicy:
        """The ensemble `to_arrays` stored; InputError in one line for anything else."""
        structure = _structure(arrays)
        if structure.get("format") != FORMAT:
            raise InputError(f"ensemble format {structure.get('format')!r} is not {FORMAT!r}")
        count = structure.get("members")
        if not isinstance(count, int) or isinstance(count, bool) or count < 2:
            raise InputError(f"ensemble members {count!r} is not a count of two or more")
        members = []
        for index in range(count):
            prefix = MEMBER_PREFIX.format(index)
            own = {key.removeprefix(prefix): value for key, value in arrays.items() if key.startswith(prefix)}
            if not own:
                raise InputError(f"ensemble member {index} of {count} has no arrays (no '{prefix}' entries)")
            members.append(NumpyPolicy.from_arrays(own))
        rule = structure.get("weight_rule")
        if rule is not None and not (isinstance(rule, dict) and set(rule) == {"rule", "kappa", "gross_cap"}):
            raise InputError(f"ensemble weight_rule {rule!r} is not {{rule, kappa, gross_cap}}")
        ensemble = cls(members, WeightRule(**rule) if rule else None)
        if ensemble.kind != structure.get("kind"):
            raise InputError(f"ensemble kind {structure.get('kind')!r} is not its members' ({ensemble.kind})")
        return ensemble

    def save(self, path: str | Path) -> None:
        """Store the ensemble at `path` exactly, one file (as NumpyPolicy.save)."""
        with open(path, "wb") as file:
            np.savez(file, **self.to_arrays())

    @classmethod
    def load(cls, path: str | Path) -> EnsemblePolicy:
        return cls.from_arrays(read_arrays(path))


def _structure(arrays: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """A stored file's structure entry as a dict ({} when it has none or it is no JSON object)."""
    if STRUCTURE_KEY not in arrays:
        return {}
    try:
        structure = json.loads(str(arrays[STRUCTURE_KEY][()]))
    except (ValueError, IndexError):
        return {}
    return structure if isinstance(structure, dict) else {}


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def ensemble_for(members: Sequence[NumpyPolicy], env_config: Mapping[str, Any]) -> EnsemblePolicy:
    """The ensemble of `members`, trained in the env that `env_config` builds: a portfolio's with that env's weight
    rule."""
    rule = WeightRule.of_env_config(env_config) if members and members[0].portfolio else None
    return EnsemblePolicy(members, rule)


def load_policy(path: str | Path) -> NumpyPolicy | EnsemblePolicy:
    """The policy a file stores, one exported policy or an ensemble of them; InputError (one line) otherwise."""
    arrays = read_arrays(path)
    if _structure(arrays).get("format") == FORMAT:
        return EnsemblePolicy.from_arrays(arrays)
    return NumpyPolicy.from_arrays(arrays)
