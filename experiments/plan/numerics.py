"""Same numbers on another x86-64 CPU (`--cross-cpu`): pin every float kernel choice the CPU would make.

A run is deterministic per machine but not across machines: numpy dispatches `log`/`exp`/`tanh` and reductions
to AVX2 or AVX-512 loops, torch's ATen picks DEFAULT/AVX2/AVX512 kernels, MKL's GEMM picks its code path per CPU
(the matmul alone moved a trial as much as a seed does, docs/verdicts.md), oneDNN has its own ISA choice, and the
number of threads changes summation order. Each of these reads an environment variable when its library loads,
so the mode sets them all and, when the current process was started without them, starts itself again
(`os.execv`) before any of those libraries decide. Ray's workers inherit the driver's environment on a local
cluster, and get the same variables through the runtime environment on a cluster we join.

What it pins, and what the same numbers still need: the same versions of numpy, torch (with its MKL) and ta-lib,
which `scripts/setup.sh` installs, and an x86-64 CPU with numpy's baseline (x86-64-v2). The cost is measured in
docs/verdicts.md (`python -m experiments.run conf/dqn_btc.yaml --cross-cpu`).
"""
from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

FLAG_VARIABLE = "RLPLATFORM_CROSS_CPU"
# Conditional numerical reproducibility: MKL's code path that every Intel and AMD x86-64 CPU runs the same way.
MKL_PATH = "COMPATIBLE"
ATEN_CAPABILITY = "default"  # torch's kernels compiled without AVX, the ones every x86-64 CPU has
ONEDNN_ISA = "SSE41"
THREADS = "1"  # summation order must not depend on the core count


def requested(argv_flag: bool, environ: Mapping[str, str] = os.environ) -> bool:
    """The mode is on by the flag, or by RLPLATFORM_CROSS_CPU=1 (notebooks, `ray job submit`)."""
    return argv_flag or environ.get(FLAG_VARIABLE, "") not in ("", "0")


def numpy_dispatch_features() -> list[str]:
    """numpy's optional SIMD targets above its baseline (X86_V3, X86_V4, AVX512_ICL, ... for numpy 2.4): the ones
    a CPU picks at import. The baseline cannot be turned off (numpy refuses), and is the same for one wheel."""
    from numpy._core import _multiarray_umath  # the list is only public there

    return list(_multiarray_umath.__cpu_dispatch__)


def pinned_environment() -> dict[str, str]:
    """The variables the mode sets, for this process's re-exec and for Ray workers."""
    return {
        FLAG_VARIABLE: "1",
        "MKL_CBWR": MKL_PATH,
        "ATEN_CPU_CAPABILITY": ATEN_CAPABILITY,
        "ONEDNN_MAX_CPU_ISA": ONEDNN_ISA,
        "NPY_DISABLE_CPU_FEATURES": " ".join(numpy_dispatch_features()),
        "OMP_NUM_THREADS": THREADS,
        "MKL_NUM_THREADS": THREADS,
    }


def is_pinned(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether this process started with every pinned variable at its pinned value (numpy, torch and MKL read
    them at load, so a variable set later changes nothing)."""
    return all(environ.get(key) == value for key, value in pinned_environment().items())


def restart_pinned(module: str, argv: list[str]) -> None:
    """Start `python -m module argv...` again in this process with the pinned variables; returns only when they
    are already in place."""
    if is_pinned():
        return
    os.environ.update(pinned_environment())
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", module, *argv])


def describe() -> str:
    """One plan line: whether the numbers are this CPU's or any CPU's."""
    if not is_pinned():
        return "numerics: this CPU's kernels (--cross-cpu: the same numbers on any x86-64 CPU)"
    return (f"numerics: same on any x86-64 CPU (--cross-cpu: MKL_CBWR={MKL_PATH}, ATen {ATEN_CAPABILITY}, numpy "
            f"baseline SIMD only, oneDNN {ONEDNN_ISA}, {THREADS} thread per op)")


def fingerprint(updates: int = 200) -> dict[str, str]:
    """Digests of numbers this machine computes the way a run does: each probing family's features (numpy and
    TA-Lib on real data, envs.abilities.ProbesNumerics), numpy's elementwise kernels on its series, and a Q-network
    of the shipped size trained on those features for `updates` Adam steps (torch and MKL). Two machines (or one
    machine under two emulated CPUs) whose digests match compute a run's numbers the same way."""
    import hashlib

    import numpy as np

    import envs
    from envs.abilities import ProbesNumerics

    probes = [family.numeric_probe() for family in envs.FAMILIES if isinstance(family, ProbesNumerics)]
    series = np.concatenate([probe.series for probe in probes])
    kernels = np.concatenate([np.exp(series * 50), np.tanh(series * 50), np.log1p(np.abs(series))])
    features = np.concatenate([np.ascontiguousarray(probe.features).ravel() for probe in probes])
    weights = np.concatenate([_trained_weights(np.nan_to_num(probe.features[probe.warmup:]), updates)
                              for probe in probes])

    def digest(values: np.ndarray) -> str:
        return hashlib.sha256(np.ascontiguousarray(values).tobytes()).hexdigest()[:16]

    return {"numpy": digest(kernels), "features": digest(features), "network": digest(weights)}


def _trained_weights(inputs: Any, updates: int) -> Any:
    """The weights of a 128x128 Q-network after `updates` seeded Adam steps on a target read from the next row."""
    import torch

    torch.manual_seed(0)
    observations = torch.as_tensor(inputs, dtype=torch.float32)
    network = torch.nn.Sequential(torch.nn.Linear(observations.shape[1], 128), torch.nn.ReLU(),
                                  torch.nn.Linear(128, 128), torch.nn.ReLU(), torch.nn.Linear(128, 3))
    optimizer = torch.optim.Adam(network.parameters(), lr=5e-4)
    generator = torch.Generator().manual_seed(0)
    for _ in range(updates):
        rows = torch.randint(0, len(observations) - 1, (32,), generator=generator)
        target = observations[rows + 1, :3].sum(dim=1, keepdim=True).tanh().expand(-1, 3)
        loss = torch.nn.functional.smooth_l1_loss(network(observations[rows]), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return torch.cat([p.detach().flatten() for p in network.parameters()]).numpy()
