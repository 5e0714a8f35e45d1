"""What the plan says of a universe before Ray: the batch capped to the preset's memory; and a command refused in one
line for a family that lacks its ability."""
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


def test_retrain_refuses_a_family_without_the_ability_and_names_those_with_it(capsys) -> None:
    """A universe retrains (tests/unit/test_retrain_universe.py); a CI history's model does not."""
    from experiments.retrain import main as retrain

    assert retrain([str(REPO / "conf" / "dqn_testprio_iofrol.yaml"), *OUT]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "python -m experiments.transfer" in err
    assert "has no retrain (envs.abilities.Retrains: trading/Spot-v0, trading/Portfolio-v0 have one)" in err
