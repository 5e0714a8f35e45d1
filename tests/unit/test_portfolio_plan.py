"""What the plan says of a universe before Ray: the batch capped to the preset's memory, and the commands that do not
apply to the family refused in one line."""
from __future__ import annotations

import re

from experiments.hardware.batch import memory_cap
from experiments.hardware.presets import load_preset
from experiments.run import main
from tests.conftest import REPO

CRYPTO = str(REPO / "conf" / "ppo_portfolio_crypto.yaml")
OUT = ["--output", "/nonexistent-never-written"]


def test_a_batch_whose_observations_overflow_the_presets_memory_is_capped_and_said(capsys) -> None:
    code = main([CRYPTO, "--dry-run", *OUT, "--set", "environment.env_config.window=400",
                 "--set", "training.train_batch_size_per_learner=400000"])
    out = capsys.readouterr().out
    assert code == 0
    line = next(line for line in out.splitlines() if line.startswith("batch CAPPED by memory"))
    cap = int(re.search(r"-> (\d+)$", line).group(1))
    observation = 5 * (400 * 5 + 2) * 4  # 5 coins x (window x features + weight + tradable) float32
    assert cap == memory_cap(observation, load_preset("cpu"), 2)[0]
    assert cap * observation <= 0.25 * 4e9 < (cap + 1) * observation  # a quarter of the cpu preset's 8 GB / 2 trials
    assert f"train_batch_size_per_learner: {cap}" in out  # the experiment that runs is the capped one


def test_a_batch_that_fits_is_left_alone(capsys) -> None:
    assert main([CRYPTO, "--dry-run", *OUT]) == 0
    out = capsys.readouterr().out
    assert "CAPPED" not in out and "train_batch_size_per_learner: 2000" in out


def test_retrain_refuses_a_family_whose_models_take_observations(capsys) -> None:
    from experiments.retrain import main as retrain

    assert retrain([CRYPTO]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has no retrain" in err and "portfolio_zero_shot" in err
