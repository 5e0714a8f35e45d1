"""The nets of an exported policy in numpy float32: RLlib's TorchMLP ops (linear, layernorm, relu, tanh, silu, elu and
a Gaussian head's log-std clip) as an encoder and its heads (one head, or a dueling DQN's two streams), run one
observation at a time. `NumpyPolicy` runs every exported network through this: RLlib's default modules, and the
portfolio net on each asset's row.

Bit-reproducibility: a batched matmul (BLAS gemm) sums a row's products in an order that depends on where the row
sits in its batch: OpenBLAS's kernels tile the rows and split them among threads, so one observation's action
could depend on the batch it came in (seen on an AMD EPYC 7003: a row's bits changed with its position in a 32-row
block). `MLPNets` therefore multiplies every row by a weight matrix on its own, one vector-matrix product per
row (numpy's stacked matmul: the loop over rows is numpy's, each product is BLAS's gemv), from scratch rows that
each start on a 64-byte boundary: the same call on the same bits, wherever the row sits, so its result is the same
bits in a batch of n as alone (tests/unit/test_numpy_policy.py checks every position in a block and other strides).
Observations go through in blocks of CHUNK_ROWS rows, which bounds the scratch memory. (Across machines, numpy's
BLAS picks its kernels by CPU, so the last bit may differ there, as it does for torch.)
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from envs.errors import InputError

ACTIVATIONS = ("relu", "tanh", "silu", "elu")
# A Gaussian head's last op: its log-stds (the second half of the outputs) clipped to [-bound, bound], as RLlib's
# TorchMLPHead with clip_log_std does (a greedy Box action reads the means only, so actions never depend on it).
CLIP_LOG_STD = "clip_log_std"
# Observations run through the net in blocks of up to this many rows, through scratch rows reused from block to
# block; a large batch (a CI cycle's round robin of test pairs) costs one numpy call per layer per block, whose loop
# over the rows is numpy's.
CHUNK_ROWS = 32
ALIGNMENT = 64  # bytes: every scratch row starts on this boundary (a cache line, the widest SIMD register: AVX-512)


@dataclass(frozen=True)
class Step:
    """One op of a net, ready to run on a (1, width) row: `weight` is the Linear's transpose (in, out)."""

    op: str
    width: int                    # the row's width after this op
    weight: np.ndarray | None = None
    bias: np.ndarray | None = None
    eps: float = 0.0              # layernorm
    alpha: float = 1.0            # elu; clip_log_std: its bound


class MLPNets:
    """An export's nets, compiled: an optional `encoder`, then its `heads` (one, or a dueling DQN's `af` and `vf`),
    taking rows of `input_width` floats. Each op and array is checked as it is compiled (InputError, one line)."""

    def __init__(self, nets: Mapping[str, Any], arrays: Mapping[str, np.ndarray], input_width: int) -> None:
        self.encoder = compile_net("encoder", nets["encoder"], input_width, arrays) if "encoder" in nets else []
        latent = self.encoder[-1].width if self.encoder else input_width
        self.heads = {name: compile_net(name, ops, latent, arrays) for name, ops in nets.items() if name != "encoder"}
        self.dueling = "vf" in self.heads
        self._single_head = next(iter(self.heads))  # the one head when not dueling: q or pi
        # The scratch rows of one call, in one allocation: the observation, then each Linear's output
        # (encoder, then heads), each starting on an ALIGNMENT boundary.
        self._row_widths = [input_width]
        self._net_rows: dict[str, slice] = {}
        for name, steps in {"encoder": self.encoder, **self.heads}.items():
            first = len(self._row_widths)
            self._row_widths += [step.width for step in steps if step.op == "linear"]
            self._net_rows[name] = slice(first, len(self._row_widths))
        floats = ALIGNMENT // 4
        padded = [-(-width // floats) * floats for width in self._row_widths]
        self._row_offsets = np.concatenate([[0], np.cumsum(padded)]).tolist()  # each row's, then the total

    def rows(self, batch: np.ndarray, outputs: int) -> np.ndarray:
        """The nets' output, (rows, `outputs`) float32, for each row of a (rows, input_width) float32 batch, each row
        on its own (module docstring)."""
        # Scratch blocks for this call (a policy may be called from several threads at once): every chunk of up to
        # CHUNK_ROWS observations goes through the same buffers, each row on an ALIGNMENT boundary.
        blocks = self._scratch_rows()
        result = np.empty((len(batch), outputs), dtype=np.float32)
        with np.errstate(over="ignore"):  # silu's exp(-x) of a large negative x: inf, then the exact limit
            for start in range(0, len(batch), CHUNK_ROWS):
                rows = min(CHUNK_ROWS, len(batch) - start)
                used = [block[:rows] for block in blocks]  # each row is computed on its own: no padding rows
                used[0][:] = batch[start:start + rows]
                scratch = {name: used[where] for name, where in self._net_rows.items()}
                latent = run(self.encoder, scratch["encoder"], used[0])
                if self.dueling:  # RLlib: advantages centred on their mean, plus the state value
                    advantages = run(self.heads["af"], scratch["af"], latent)
                    value = run(self.heads["vf"], scratch["vf"], latent)
                    np.subtract(advantages, row_mean(advantages), out=advantages)
                    np.add(advantages, value, out=advantages)
                    result[start:start + rows] = advantages
                else:
                    head = self._single_head
                    result[start:start + rows] = run(self.heads[head], scratch[head], latent)
        return result

    def _scratch_rows(self) -> list[np.ndarray]:
        """Fresh (CHUNK_ROWS, width) float32 blocks for one call, every row starting on an ALIGNMENT-byte boundary
        (rows padded to a multiple of it)."""
        raw = np.empty(CHUNK_ROWS * self._row_offsets[-1] + ALIGNMENT // 4, dtype=np.float32)
        base = (-raw.__array_interface__["data"][0] % ALIGNMENT) // 4
        spans = zip(self._row_offsets[:-1], self._row_offsets[1:], self._row_widths, strict=True)
        return [raw[base + CHUNK_ROWS * start:base + CHUNK_ROWS * end].reshape(CHUNK_ROWS, end - start)[:, :width]
                for start, end, width in spans]


def compile_net(net: str, ops: list[Any], width: int, arrays: Mapping[str, np.ndarray]) -> list[Step]:
    """The steps of one net taking rows of `width`, each array checked (present, float32, the width the step before
    gives)."""
    steps: list[Step] = []
    for index, op in enumerate(ops):
        kind = op.get("op") if isinstance(op, dict) else None
        where = f"numpy policy {net} op {index} ({kind})"
        if kind == "linear":
            weight = array_of(arrays, op.get("weight"), 2, where)
            if weight.shape[1] != width:
                raise InputError(f"{where}: weight {weight.shape} takes {weight.shape[1]} inputs, not {width}")
            width = weight.shape[0]
            steps.append(Step("linear", width, np.ascontiguousarray(weight.T),
                              _optional_row(arrays, op.get("bias"), width, where)))
        elif kind == "layernorm":
            steps.append(Step("layernorm", width, _optional_row(arrays, op.get("weight"), width, where),
                              _optional_row(arrays, op.get("bias"), width, where), eps=float(op.get("eps", 0.0))))
        elif kind in ACTIVATIONS:
            steps.append(Step(kind, width, alpha=float(op.get("alpha", 1.0))))
        elif kind == CLIP_LOG_STD and width % 2 == 0 and isinstance(op.get("bound"), (int, float)):
            steps.append(Step(kind, width, alpha=float(op["bound"])))
        else:
            raise InputError(f"{where}: unknown op; this version runs linear, layernorm, {CLIP_LOG_STD} (of an "
                             f"even width, with a bound) and {', '.join(ACTIVATIONS)}")
    return steps


def array_of(arrays: Mapping[str, np.ndarray], key: Any, ndim: int, where: str) -> np.ndarray:
    """A float32 array of the export by key, or InputError naming what it was for."""
    if not isinstance(key, str) or key not in arrays:
        raise InputError(f"{where}: array {key!r} is missing")
    value = arrays[key]
    if value.dtype != np.float32 or value.ndim != ndim:
        raise InputError(f"{where}: array {key!r} is {value.dtype} {value.shape}, not {ndim}-d float32")
    return value


def _optional_row(arrays: Mapping[str, np.ndarray], key: Any, width: int, where: str) -> np.ndarray | None:
    """An op's optional 1-d parameter (a bias, a LayerNorm scale) as a (1, width) row."""
    if key is None:
        return None
    value = array_of(arrays, key, 1, where)
    if value.shape != (width,):
        raise InputError(f"{where}: array {key!r} has shape {value.shape}, not ({width},)")
    return value.reshape(1, width)


def row_mean(row: np.ndarray) -> np.ndarray:
    """A (1, width) row's mean as (1, 1), in float32: the sum divided by the count, as torch's mean."""
    return np.add.reduce(row, axis=1, keepdims=True) / np.float32(row.shape[1])


def run(steps: list[Step], scratch: list[np.ndarray], row: np.ndarray) -> np.ndarray:
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
            np.subtract(row, row_mean(row), out=row)
            np.divide(row, np.sqrt(row_mean(np.square(row)) + np.float32(step.eps)), out=row)
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
