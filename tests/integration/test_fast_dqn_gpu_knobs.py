"""The GPU presets' learner knobs, run for real on CPU: FastDQN's autocast (bf16, fp16 with a grad scaler)
and torch.compile of its forward pass. There is no GPU here or in CI: these show the code paths train and
learn; speed on a GPU is not measured (docs/benchmarks.md says so)."""
from __future__ import annotations

import math

import pytest

from tests.conftest import REPO


def _train(mixed_precision: str = "none", compile_backend: str | None = None) -> list[float]:
    from experiments.config.load import load_experiment
    from experiments.hardware import load_preset, resolve_plan
    from experiments.sweep.rllib_config import build_config

    exp = load_experiment(REPO / "conf" / "canary_planted.yaml", ["training.replay_buffer.type=prioritized"])
    config = build_config(exp, resolve_plan(load_preset("cpu"), exp.timeframe, 1), seed=0)
    config.fast(mixed_precision=mixed_precision)
    if compile_backend:
        config.framework(torch_compile_learner=True, torch_compile_learner_dynamo_backend=compile_backend)
    algo = config.build_algo()
    try:
        results = [algo.train() for _ in range(2)]
        learner = algo.learner_group._learner
        precision = learner._precision()
        if mixed_precision == "none":
            assert not hasattr(precision, "fast_dtype")
        else:  # the knob reached the learner: its forward runs under autocast with that dtype
            assert str(precision.fast_dtype) == {"bf16": "torch.bfloat16", "fp16": "torch.float16"}[mixed_precision]
        assert (getattr(learner, "_grad_scaler", None) is not None) == (mixed_precision == "fp16")
        assert (getattr(learner, "_compiled_forward", None) is not None) == (compile_backend is not None)
    finally:
        algo.stop()
    losses = [r["learners"]["default_policy"]["qf_loss"] for r in results]
    assert all(math.isfinite(loss) for loss in losses), losses
    return [r["evaluation"]["env_runners"]["episode_return_mean"] for r in results]


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_trains_and_learns_the_planted_signal(ray_session, precision):
    returns = _train(mixed_precision=precision)
    assert max(returns) > 60.0, returns  # flat returns 0; full precision reaches ~150 in 4k steps


def test_compiled_forward_trains(ray_session):
    returns = _train(compile_backend="eager")  # dynamo traces the forward; inductor would need a C++ toolchain
    assert max(returns) > 60.0, returns
