"""--cross-cpu: the same numbers under every CPU dispatch level this machine can emulate.

Another CPU is emulated by the variables its libraries would decide differently on: MKL's code path
(`MKL_CBWR`), torch's kernels (`ATEN_CPU_CAPABILITY`), numpy's SIMD loops (`NPY_DISABLE_CPU_FEATURES`) and the
thread count. Each case is a fresh process running `python -m experiments.cross_cpu`, whose digests cover a
feature matrix, numpy's elementwise kernels and a Q-network trained with Adam.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

AVX2_MACHINE = {"MKL_CBWR": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "OMP_NUM_THREADS": "2",
                "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR"}
OLD_MACHINE = {"MKL_CBWR": "COMPATIBLE", "ATEN_CPU_CAPABILITY": "default", "OMP_NUM_THREADS": "4",
               "MKL_NUM_THREADS": "4", "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR"}
PINNED = ("RLPLATFORM_CROSS_CPU", "MKL_CBWR", "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "NPY_DISABLE_CPU_FEATURES",
          "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def fingerprint(emulated: dict[str, str], *flags: str) -> tuple[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in PINNED}
    result = subprocess.run([sys.executable, "-m", "experiments.cross_cpu", *flags], cwd=REPO, text=True,
                            capture_output=True, timeout=300, env={**env, **emulated})
    assert result.returncode == 0, result.stderr
    digests, machine = result.stdout.splitlines()[:2]
    return digests, machine


def test_cross_cpu_gives_the_same_bits_on_every_emulated_cpu_and_native_numerics_do_not():
    native = {name: fingerprint(machine)[0] for name, machine in (("this", {}), ("old", OLD_MACHINE))}
    pinned = {name: fingerprint(machine, "--cross-cpu") for name, machine in
              (("this", {}), ("avx2", AVX2_MACHINE), ("old", OLD_MACHINE))}
    assert len({digests for digests, _ in pinned.values()}) == 1, pinned
    assert all("with --cross-cpu: any x86-64 CPU gives the same" in machine for _, machine in pinned.values())
    import torch

    if torch.backends.cpu.get_cpu_capability() == "DEFAULT":
        pytest.skip("this CPU has no AVX2: there is no faster kernel whose numbers could differ")
    # The probe can fail: without the mode, the emulated CPUs compute other bits (torch/MKL, and numpy on AVX-512).
    assert native["old"] != native["this"], native
