"""A numpy forward pass for the platform's trained RLlib policies: serving one needs neither torch nor Ray.

`export_module` turns an RLModule that an algorithm's numpy export names (`algos.spec.NumpyExport`, in its SPEC: a
default DQN or PPO RLModule, MLP encoder, MLP heads, discrete actions; a default SAC RLModule's policy network, MLP
encoder and head, Box actions) into a flat dict of numpy arrays that `np.savez` stores: the weights, a Box's bounds,
and the structure as JSON in a 0-d string array, which names the algorithm by its key in `algos.ALGORITHMS`.
`NumpyPolicy` runs that dict in float32 and returns the greedy actions (the algorithm's `AlgorithmSpec.greedy`), so
the platform's scorer and a served model compute actions with the very same code. This module knows no algorithm by
name: what it must know of one comes from the algorithm table, so a servable algorithm is one entry there.

Bit-reproducibility: a batched matmul (BLAS gemm) sums a row's products in an order that depends on where the row
sits in its batch: OpenBLAS's kernels tile the rows and split them among threads, so one observation's action
could depend on the batch it came in (seen on an AMD EPYC 7003: a row's bits changed with its position in a 32-row
block). `NumpyPolicy` therefore multiplies every row by a weight matrix on its own, one vector-matrix product per
row (numpy's stacked matmul: the loop over rows is numpy's, each product is BLAS's gemv), from scratch rows that
each start on a 64-byte boundary: the same call on the same bits, wherever the row sits, so its result is the same
bits in a batch of n as alone (tests/unit/test_numpy_policy.py checks every position in a block and other strides).
Observations go through in blocks of CHUNK_ROWS rows, which bounds the scratch memory. (Across machines, numpy's
BLAS picks its kernels by CPU, so the last bit may differ there, as it does for torch.) Only the export needs
torch and Ray; the export's functions (and the algorithms' `NumpyExport.nets`) import them inside, never at
load: loading a policy imports its algorithm's spec, which imports neither.

A portfolio module (algos/portfolio_module.py, `training.model: shared_assets | flat`) is exported with the layout
"portfolio": its policy net `pi`, which the shared model runs on every asset's row as its own row here (so a model
trained on N assets runs on any N: observations (n, N, D) of any N), plus cash's learned (mean, log-std); the flat
model runs `pi` on the flattened universe (its N only). Its outputs are the Gaussian's inputs (n, 2(N+1)), an
untradable asset's set as the module sets them; its greedy actions are the scores (n, N+1), cash first, that the env
maps to weights: the mean in [-1, 1] (PPO), tanh of the mean (SAC). They equal the torch module's within float32
rounding (torch multiplies the rows in one batched product; tests/unit/test_portfolio_module.py: 1e-6).
"""
from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import algos
from algos.portfolio_model import TRADABLE_ABOVE, TRADABLE_COLUMN, UNTRADABLE_LOG_STD, UNTRADABLE_MEAN
from algos.spec import GreedyRule, NumpyExport, class_path, not_exportable
from envs.errors import InputError

FORMAT = "rlplatform-numpy-policy/1"
STRUCTURE_KEY = "structure"
ACTIVATIONS = ("relu", "tanh", "silu", "elu")
# A Gaussian head's last op: its log-stds (the second half of the outputs) clipped to [-bound, bound], as RLlib's
# TorchMLPHead with clip_log_std does (a greedy Box action reads the means only, so actions never depend on it).
CLIP_LOG_STD = "clip_log_std"
# The arrays of a Box export's bounds (NumpyExport.box: SAC's), each float32 (action_size,).
BOUNDS = ("action.low", "action.high")
# A portfolio module's export (module docstring): its layout, its one net and its array of cash's (mean, log-std).
PORTFOLIO = "portfolio"
PORTFOLIO_NETS = ("pi",)
CASH_KEY = "cash"
# A portfolio's scores are in [-1, 1] whatever N (algos.portfolio_module.universe_of refuses other bounds): the Box
# its greedy rule puts them in, its bounds broadcast over the N+1 scores.
SCORES = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
# Observations run through the net in blocks of up to this many rows, through scratch rows reused from block to
# block; a large batch (a CI cycle's round robin of test pairs) costs one numpy call per layer per block, whose loop
# over the rows is numpy's.
CHUNK_ROWS = 32
ALIGNMENT = 64  # bytes: every scratch row starts on this boundary (a cache line, the widest SIMD register: AVX-512)


def _servable() -> dict[str, tuple[GreedyRule, NumpyExport]]:
    """Every algorithm of the table that has a numpy export: its greedy rule and its export, by table key. Imports
    the algorithms' modules, which import neither torch nor Ray."""
    specs = {name: algos.algorithm(name) for name in algos.ALGORITHMS}
    return {name: (spec.greedy, spec.export) for name, spec in specs.items() if spec.export is not None}


def _served(name: Any) -> tuple[GreedyRule, NumpyExport]:
    """The greedy rule and numpy export of the algorithm an exported structure names; InputError when no algorithm
    of this version serves that name. Imports that algorithm's module only, so loading a policy stays cheap."""
    spec = algos.algorithm(name) if isinstance(name, str) and name in algos.ALGORITHMS else None
    if spec is None or spec.export is None:
        raise InputError(f"numpy policy algorithm {name!r} is not one of {sorted(_servable())}")
    return spec.greedy, spec.export


def export_module(module: Any, greedy: GreedyRule) -> dict[str, np.ndarray]:
    """The weights and structure of a torch RLModule whose exact class an algorithm's numpy export names (e.g. a
    default DQN, dueling or not, num_atoms 1, or PPO with discrete actions; a default SAC module's policy network in a
    1-d Box; a portfolio module's policy network, PPO's or SAC's), as a flat dict of numpy arrays for `np.savez`.
    `greedy` is the caller's rule (AlgorithmSpec.greedy), checked against the exporting algorithm's so the numpy
    policy picks the actions `experiments.results.policy` picks. InputError (one line) for anything else: a class no
    algorithm exports (a customised subclass too: it may override the forward pass this module re-implements),
    distributional DQN, LSTM/attention or CNN encoders, default PPO's continuous actions or an unknown layer."""
    path = class_path(type(module))
    exporters = {name: served for name, served in _servable().items()
                 if path in (served[1].module, served[1].portfolio_module)}
    if not exporters:
        raise not_exportable(f"RLModule class {type(module).__name__}")
    # Two algorithms may train the same class: the structure names the one whose rule the caller scores with.
    algorithm = next((name for name, (rule, _) in exporters.items() if rule == greedy), None)
    if algorithm is None:
        first, (rule, _) = next(iter(exporters.items()))
        raise not_exportable(f"greedy rule {greedy} for a {first.upper()} module (it is scored with {rule})")
    export = exporters[algorithm][1]
    arrays: dict[str, np.ndarray] = {}
    if path == export.portfolio_module:
        structure = _export_portfolio(module.pi, algorithm, arrays)
    else:
        structure = _export_default(module, algorithm, export, arrays)
    arrays[STRUCTURE_KEY] = np.array(json.dumps(structure))
    # Checked here as the loader does, so an export that cannot be served fails now, not at serving time.
    NumpyPolicy.from_arrays(arrays)
    return arrays


def _export_portfolio(pi: Any, algorithm: str, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """A portfolio module's policy net (algos.portfolio_module.PolicyNet): its layers, and cash's (mean, log-std)
    when shared, added to `arrays`; the structure that runs it (the flat net's N, the shared one's on any N)."""
    structure = {"format": FORMAT, "algorithm": algorithm, "layout": PORTFOLIO, "shared": bool(pi.shared),
                 "row_size": int(pi.universe.row_size), "nets": {"pi": _export_layers("pi", pi.net, arrays)}}
    if pi.shared:
        arrays[CASH_KEY] = pi.cash.detach().cpu().numpy().copy()
    else:
        structure["num_assets"] = int(pi.universe.num_assets)
    return structure


def _export_default(module: Any, algorithm: str, export: NumpyExport, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """A default RLlib module's nets (as its algorithm's `export.nets` reads them) added to `arrays`; the structure
    that runs them."""
    if export.box:
        actions = _export_box(module.action_space, algorithm, arrays)
    elif isinstance(module.action_space, gym.spaces.Discrete):
        actions = {"num_actions": int(module.action_space.n)}
    else:
        raise not_exportable(f"action space {module.action_space} (only discrete actions have an argmax here)")
    encoder, heads = export.nets(module)
    nets = {"encoder": _export_encoder(encoder, arrays)}
    nets.update({name: _export_head(name, head, arrays) for name, head in heads.items()})
    return {"format": FORMAT, "algorithm": algorithm,
            "observation_size": _first_linear_in(nets["encoder"], arrays), **actions, "nets": nets}


def _export_box(space: Any, algorithm: str, arrays: dict[str, np.ndarray]) -> dict[str, int]:
    """A Box module's action space (SAC's): its bounds added to `arrays` (BOUNDS), its size for the structure. Only a
    1-d Box: RLlib's squashed Gaussian spreads its mean over a flat vector."""
    if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
        raise not_exportable(f"action space {space} (a {algorithm.upper()} policy here acts in a 1-d Box)")
    for key, bound in zip(BOUNDS, (space.low, space.high), strict=True):
        arrays[key] = np.asarray(bound, dtype=np.float32).copy()
    return {"action_size": int(space.shape[0])}


def _export_encoder(encoder: Any, arrays: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """The layers of an MLP encoder; any other encoder (CNN, LSTM, GRU, multi-stream) is refused by name."""
    from ray.rllib.core.models.torch.encoder import TorchMLPEncoder

    if type(encoder) is not TorchMLPEncoder:
        raise not_exportable(f"encoder {type(encoder).__name__}")
    return _export_layers("encoder", encoder.net.mlp, arrays)


def _export_head(name: str, head: Any, arrays: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """The layers of an MLP head, and a Gaussian head's clip of its log-stds (the second half of its outputs) as the
    op `clip_log_std`; a free-log-std head is refused."""
    from ray.rllib.core.models.torch.heads import TorchMLPHead

    if type(head) is not TorchMLPHead:
        raise not_exportable(f"{name} head {type(head).__name__}")
    ops = _export_layers(name, head.net.mlp, arrays)
    if head.clip_log_std:
        ops.append({"op": CLIP_LOG_STD, "bound": float(head.log_std_clip_param_const.item())})
    return ops


def _export_layers(net: str, layers: Any, arrays: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """A TorchMLP's Sequential as ops, its parameters added to `arrays` under "<net>.<index>.<param>"."""
    import torch

    def store(index: int, param: str, tensor: Any) -> str | None:
        if tensor is None:
            return None
        if tensor.dtype != torch.float32:
            raise not_exportable(f"{net} layer {index} {param} of dtype {tensor.dtype} (float32 only)")
        key = f"{net}.{index}.{param}"
        arrays[key] = tensor.detach().cpu().numpy().copy()
        return key

    activations = {torch.nn.ReLU: "relu", torch.nn.Tanh: "tanh", torch.nn.SiLU: "silu"}
    ops: list[dict[str, Any]] = []
    for index, layer in enumerate(layers):
        kind = type(layer)
        if kind is torch.nn.Linear:
            ops.append({"op": "linear", "weight": store(index, "weight", layer.weight),
                        "bias": store(index, "bias", layer.bias)})
        elif kind is torch.nn.LayerNorm and len(layer.normalized_shape) == 1:
            weight, bias = store(index, "weight", layer.weight), store(index, "bias", layer.bias)
            ops.append({"op": "layernorm", "eps": float(layer.eps), "weight": weight, "bias": bias})
        elif kind in activations:
            ops.append({"op": activations[kind]})
        elif kind is torch.nn.ELU:
            ops.append({"op": "elu", "alpha": float(layer.alpha)})
        else:
            raise not_exportable(f"{net} layer {index} ({kind.__name__})")
    return ops


def _first_linear_in(ops: list[dict[str, Any]], arrays: Mapping[str, np.ndarray]) -> int:
    """The observation size: the input width of the encoder's first Linear."""
    for op in ops:
        if op["op"] == "linear":
            return int(arrays[op["weight"]].shape[1])
    raise not_exportable("an encoder without a Linear layer")


def _portfolio_sizes(structure: dict[str, Any]) -> tuple[str, ...]:
    """The size keys a portfolio structure must hold as positive integers: its row width, and N when flat (a shared
    net runs on any N); InputError when `shared` is not a boolean."""
    if not isinstance(structure.get("shared"), bool):
        raise InputError(f"numpy policy shared {structure.get('shared')!r} is not true or false")
    return ("row_size",) if structure["shared"] else ("row_size", "num_assets")


@dataclass(frozen=True)
class _Step:
    """One op of a net, ready to run on a (1, width) row: `weight` is the Linear's transpose (in, out)."""

    op: str
    width: int                    # the row's width after this op
    weight: np.ndarray | None = None
    bias: np.ndarray | None = None
    eps: float = 0.0              # layernorm
    alpha: float = 1.0            # elu; clip_log_std: its bound


class NumpyPolicy:
    """A greedy policy computed with numpy in float32: observations (n, observation_size) -> actions, (n,) int64
    for discrete actions (DQN, PPO) or (n, action_size) float32 in the Box (SAC); for a portfolio module,
    observations (n, N, row_size) -> scores (n, N+1) float32 in [-1, 1], cash first (module docstring).

    Built from `export_module`'s dict (`from_arrays`) or a file of it (`load`). Each observation is evaluated
    on its own (module docstring), so the result for one observation does not depend on its batch."""

    def __init__(self, structure: dict[str, Any], arrays: Mapping[str, np.ndarray], greedy: GreedyRule,
                 box: bool) -> None:
        """Use `from_arrays` or `load`: they check the dict this trusts, and pass its algorithm's greedy rule and
        whether its default module acts in a Box (NumpyExport.box)."""
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
            self._cash = self._array(CASH_KEY, 1, f"numpy policy {CASH_KEY}") if structure["shared"] else None
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
        nets = structure["nets"]
        self._encoder = self._compile("encoder", self.observation_size) if "encoder" in nets else []
        latent = self._encoder[-1].width if self._encoder else self.observation_size
        self._heads = {name: self._compile(name, latent) for name in structure["nets"] if name != "encoder"}
        self._dueling = "vf" in self._heads
        self._single_head = next(iter(self._heads))  # the one head when not dueling: q or pi
        # The scratch rows of one call, in one allocation: the observation, then each Linear's output
        # (encoder, then heads), each starting on an ALIGNMENT boundary.
        nets = {"encoder": self._encoder, **self._heads}
        self._row_widths = [self.observation_size]
        self._net_rows: dict[str, slice] = {}
        for name, steps in nets.items():
            first = len(self._row_widths)
            self._row_widths += [step.width for step in steps if step.op == "linear"]
            self._net_rows[name] = slice(first, len(self._row_widths))
        floats = ALIGNMENT // 4
        padded = [-(-width // floats) * floats for width in self._row_widths]
        self._row_offsets = np.concatenate([[0], np.cumsum(padded)]).tolist()  # each row's, then the total

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> NumpyPolicy:
        """The policy of an exported dict; InputError in one line if it is not one this version can run."""
        if STRUCTURE_KEY not in arrays:
            raise InputError(f"not a numpy policy: no '{STRUCTURE_KEY}' entry (export it with "
                             "algos.numpy_policy.export_module)")
        try:
            structure = json.loads(str(arrays[STRUCTURE_KEY][()]))
        except (ValueError, IndexError) as exc:
            raise InputError(f"not a numpy policy: its '{STRUCTURE_KEY}' entry is not JSON ({exc})") from None
        if not isinstance(structure, dict) or structure.get("format") != FORMAT:
            found = structure.get("format") if isinstance(structure, dict) else None
            raise InputError(f"numpy policy format {found!r} is not {FORMAT!r}: export the module again with "
                             "this version of algos.numpy_policy")
        greedy, export = _served(structure.get("algorithm"))
        algorithm = structure["algorithm"]
        nets = structure.get("nets")
        heads = sorted(nets) if isinstance(nets, dict) else None
        portfolio = structure.get("layout") == PORTFOLIO
        if portfolio:
            layouts = (PORTFOLIO_NETS,) if export.portfolio_module else ()
        else:
            layouts = tuple(tuple(sorted(names)) for names in export.layouts)
        if heads is None or tuple(heads) not in layouts or not all(isinstance(ops, list) for ops in nets.values()):
            known = " or ".join(", ".join(names) for names in layouts) or "it exports none"
            kind = f"portfolio {algorithm.upper()}" if portfolio else algorithm.upper()
            raise InputError(f"numpy policy nets {heads} are not a {kind}'s ({known}), each a list of ops")
        sizes = _portfolio_sizes(structure) if portfolio else ("observation_size", export.action_key)
        for key in sizes:
            if not isinstance(structure.get(key), int) or structure[key] < 1:
                raise InputError(f"numpy policy {key} {structure.get(key)!r} is not a positive integer")
        try:
            policy = cls(structure, {key: np.asarray(value) for key, value in arrays.items()}, greedy, export.box)
        except InputError:
            raise
        except (TypeError, ValueError) as exc:  # an op's number that is not one
            raise InputError(f"numpy policy structure is malformed ({exc})") from None
        for name, steps in policy._heads.items():
            expected = 1 if name == "vf" else policy.num_outputs
            if not steps or steps[-1].width != expected:
                found = steps[-1].width if steps else "no"
                raise InputError(f"numpy policy {name} head has {found} outputs, not {expected}")
        return policy

    def _compile(self, net: str, width: int) -> list[_Step]:
        """The steps of one net, each array checked (present, float32, the width the step before gives)."""
        steps: list[_Step] = []
        for index, op in enumerate(self.structure["nets"][net]):
            kind = op.get("op") if isinstance(op, dict) else None
            where = f"numpy policy {net} op {index} ({kind})"
            if kind == "linear":
                weight = self._array(op.get("weight"), 2, where)
                if weight.shape[1] != width:
                    raise InputError(f"{where}: weight {weight.shape} takes {weight.shape[1]} inputs, "
                                     f"not {width}")
                width = weight.shape[0]
                steps.append(_Step("linear", width, np.ascontiguousarray(weight.T),
                                   self._optional(op.get("bias"), width, where)))
            elif kind == "layernorm":
                steps.append(_Step("layernorm", width, self._optional(op.get("weight"), width, where),
                                   self._optional(op.get("bias"), width, where),
                                   eps=float(op.get("eps", 0.0))))
            elif kind in ACTIVATIONS:
                steps.append(_Step(kind, width, alpha=float(op.get("alpha", 1.0))))
            elif kind == CLIP_LOG_STD and width % 2 == 0 and isinstance(op.get("bound"), (int, float)):
                steps.append(_Step(kind, width, alpha=float(op["bound"])))
            else:
                raise InputError(f"{where}: unknown op; this version runs linear, layernorm, {CLIP_LOG_STD} (of an "
                                 f"even width, with a bound) and {', '.join(ACTIVATIONS)}")
        return steps

    def _box(self, size: int) -> gym.spaces.Box:
        """A Box export's (SAC's) space from its BOUNDS arrays, each checked: float32 (size,), no NaN, low <= high."""
        low, high = (self._array(key, 1, f"numpy policy {key}") for key in BOUNDS)
        if low.shape != (size,) or high.shape != (size,) or not np.all(low <= high):
            raise InputError(f"numpy policy action bounds {low} .. {high} are not {size} pairs with low <= high")
        return gym.spaces.Box(low, high, dtype=np.float32)

    def _array(self, key: Any, ndim: int, where: str) -> np.ndarray:
        """A float32 array of the dict by key, or InputError naming the op it was for."""
        if not isinstance(key, str) or key not in self._arrays:
            raise InputError(f"{where}: array {key!r} is missing")
        value = self._arrays[key]
        if value.dtype != np.float32 or value.ndim != ndim:
            raise InputError(f"{where}: array {key!r} is {value.dtype} {value.shape}, "
                             f"not {ndim}-d float32")
        return value

    def _optional(self, key: Any, width: int, where: str) -> np.ndarray | None:
        """An op's optional 1-d parameter (a bias, a LayerNorm scale) as a (1, width) row."""
        if key is None:
            return None
        value = self._array(key, 1, where)
        if value.shape != (width,):
            raise InputError(f"{where}: array {key!r} has shape {value.shape}, not ({width},)")
        return value.reshape(1, width)

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
            return self._portfolio_outputs(observations)
        batch = np.asarray(observations, dtype=np.float32)
        if batch.ndim != 2 or batch.shape[1] != self.observation_size:
            raise ValueError(f"observations must have shape (n, {self.observation_size}); "
                             f"got {batch.shape}")
        return self._rows(batch)

    def _portfolio_outputs(self, observations: np.ndarray) -> np.ndarray:
        """A portfolio module's forward pass (algos.portfolio_module.PolicyNet) on (n, N, row_size) observations."""
        batch = np.asarray(observations, dtype=np.float32)
        assets = "N" if self.num_assets is None else self.num_assets
        if batch.ndim != 3 or batch.shape[1] < 1 or batch.shape[2] != self.row_size or (
                self.num_assets is not None and batch.shape[1] != self.num_assets):
            raise ValueError(f"observations must have shape (n, {assets}, {self.row_size}); got {batch.shape}")
        n, count = batch.shape[:2]
        if self._cash is not None:  # every asset's row through the one net, as a row of its own
            heads = self._rows(batch.reshape(n * count, self.row_size)).reshape(n, count, 2)
            cash = np.broadcast_to(self._cash, (n, 2))
            means = np.concatenate([cash[:, :1], heads[..., 0]], axis=1)
            log_stds = np.concatenate([cash[:, 1:], heads[..., 1]], axis=1)
        else:
            means, log_stds = np.split(self._rows(batch.reshape(n, count * self.row_size)), 2, axis=1)
        scored = np.concatenate([np.ones((n, 1), bool), batch[..., TRADABLE_COLUMN] > TRADABLE_ABOVE], axis=1)
        means = np.where(scored, means, np.float32(UNTRADABLE_MEAN))
        log_stds = np.where(scored, log_stds, np.float32(UNTRADABLE_LOG_STD))
        return np.concatenate([means, log_stds], axis=1)

    def _rows(self, batch: np.ndarray) -> np.ndarray:
        """The nets' output for each row of a (rows, observation_size) float32 batch, each row on its own."""
        # Scratch blocks for this call (a policy may be called from several threads at once): every chunk of up to
        # CHUNK_ROWS observations goes through the same buffers, each row on an ALIGNMENT boundary.
        blocks = self._scratch_rows()
        result = np.empty((len(batch), self.num_outputs), dtype=np.float32)
        with np.errstate(over="ignore"):  # silu's exp(-x) of a large negative x: inf, then the exact limit
            for start in range(0, len(batch), CHUNK_ROWS):
                rows = min(CHUNK_ROWS, len(batch) - start)
                used = [block[:rows] for block in blocks]  # each row is computed on its own: no padding rows
                used[0][:] = batch[start:start + rows]
                scratch = {name: used[where] for name, where in self._net_rows.items()}
                latent = _run(self._encoder, scratch["encoder"], used[0])
                if self._dueling:  # RLlib: advantages centred on their mean, plus the state value
                    advantages = _run(self._heads["af"], scratch["af"], latent)
                    value = _run(self._heads["vf"], scratch["vf"], latent)
                    np.subtract(advantages, _mean(advantages), out=advantages)
                    np.add(advantages, value, out=advantages)
                    result[start:start + rows] = advantages
                else:
                    head = self._single_head
                    result[start:start + rows] = _run(self._heads[head], scratch[head], latent)
        return result

    def _scratch_rows(self) -> list[np.ndarray]:
        """Fresh (CHUNK_ROWS, width) float32 blocks for one call, every row starting on an ALIGNMENT-byte boundary
        (rows padded to a multiple of it)."""
        raw = np.empty(CHUNK_ROWS * self._row_offsets[-1] + ALIGNMENT // 4, dtype=np.float32)
        base = (-raw.__array_interface__["data"][0] % ALIGNMENT) // 4
        spans = zip(self._row_offsets[:-1], self._row_offsets[1:], self._row_widths, strict=True)
        return [raw[base + CHUNK_ROWS * start:base + CHUNK_ROWS * end].reshape(CHUNK_ROWS, end - start)[:, :width]
                for start, end, width in spans]

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
    """The arrays of a stored policy file (one policy's, or an ensemble's: algos.ensemble_policy), without pickles;
    InputError (one line) for a missing file or one that is no numpy archive."""
    try:
        with np.load(path, allow_pickle=False) as stored:
            return {key: stored[key] for key in stored.files}
    except FileNotFoundError:
        raise InputError(f"{path}: numpy policy file not found") from None
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        reason = " ".join(str(exc).split())
        raise InputError(f"{path}: not a numpy policy file ({reason})") from None


def _mean(row: np.ndarray) -> np.ndarray:
    """A (1, width) row's mean as (1, 1), in float32: the sum divided by the count, as torch's mean."""
    return np.add.reduce(row, axis=1, keepdims=True) / np.float32(row.shape[1])


def _run(steps: list[_Step], scratch: list[np.ndarray], row: np.ndarray) -> np.ndarray:
    """One row through a net, in place in its scratch rows, as torch's TorchMLP computes it."""
    buffers = iter(scratch)
    for step in steps:
        if step.op == "linear":
            out = next(buffers)
            np.matmul(row[:, None, :], step.weight, out=out[:, None, :])  # a product per row (module docstring)
            if step.bias is not None:
                np.add(out, step.bias, out=out)
            row = out
        elif step.op == "layernorm":  # torch: (x - mean) / sqrt(biased var + eps) * weight + bias
            np.subtract(row, _mean(row), out=row)
            np.divide(row, np.sqrt(_mean(np.square(row)) + np.float32(step.eps)), out=row)
            if step.weight is not None:
                np.multiply(row, step.weight, out=row)
            if step.bias is not None:
                np.add(row, step.bias, out=row)
        elif step.op == "relu":
            np.maximum(row, np.float32(0), out=row)
        elif step.op == "tanh":
            np.tanh(row, out=row)
        elif step.op == "silu":  # torch: x * sigmoid(x)
            np.divide(row, np.float32(1) + np.exp(-row), out=row)
        elif step.op == CLIP_LOG_STD:
            log_stds = row[:, row.shape[1] // 2:]
            np.clip(log_stds, np.float32(-step.alpha), np.float32(step.alpha), out=log_stds)
        else:  # elu, torch: x if x > 0 else alpha * (exp(x) - 1)
            np.copyto(row, np.float32(step.alpha) * np.expm1(row), where=row <= 0)
    return row
