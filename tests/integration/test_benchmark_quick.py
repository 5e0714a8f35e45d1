"""Every sub-benchmark of `python -m experiments.benchmark` runs end to end with a tiny budget.

Real RLlib, SB3, Tune's MLflow callback and MLflow stores. No wall-clock time or ratio is asserted:
they depend on the machine and its load; only that both sides were measured and recorded.
"""
from __future__ import annotations

import importlib.util
import json

import pytest

from experiments.benchmark.__main__ import main

NEEDS_SB3 = pytest.mark.skipif(importlib.util.find_spec("stable_baselines3") is None,
                               reason='stable-baselines3 (the peer) is not installed: pip install -e ".[bench]"')


def _document(tmp_path, name):
    return json.loads((tmp_path / f"{name}.json").read_text())


@NEEDS_SB3
def test_train_quick(tmp_path, ray_session):
    assert main(["train", "--steps", "200", "--output", str(tmp_path)]) == 0
    document = _document(tmp_path, "train")
    details = document["details"]
    assert details["platform"]["env_steps"] >= 200 and details["peer"]["env_steps"] >= 200
    figure = document["figures"][0]
    assert figure["platform"] > 0 and figure["peer"] > 0
    assert details["platform_algorithm"]["implementation"] == "fast"  # the conf as shipped
    assert details["platform_algorithm"]["replay_buffer"] == "prioritized"
    assert set(details["variants"]) == {"uniform replay (as SB3)", "stock RLlib DQN (training.implementation: rllib)"}
    # the SB3 side is configured for the platform's replay ratio
    settings = details["sb3_settings"]
    assert settings["batch_size"] * settings["gradient_steps"] / settings["train_freq"] == pytest.approx(
        settings["replay_ratio"])
    # SAC: the peer's critics are RLlib's Q network with the conf's fusion net; its own critics are a variant row
    sac = details["sac"]
    assert sac["sb3_settings"]["q_network"] == {"hiddens": [128, 128], "activation": "relu", "fusion": [256, 256],
                                                "head_hiddens": []}
    same, own = document["figures"][-2:]
    assert "the same Q network both sides" in same["what"] and same["target"] == ">= 1.0x peer"
    assert own["what"].startswith("same, SB3's own critics") and own["platform"] == same["platform"]
    assert same["peer"] > 0 and own["peer"] > 0 and sac["peer_own_critics"]["env_steps"] >= 200


@NEEDS_SB3
def test_solve_quick(tmp_path, ray_session):
    assert main(["solve", "--steps", "400", "--seeds", "1", "--time-limit", "60", "--output", str(tmp_path)]) == 0
    details = _document(tmp_path, "solve")["details"]
    for side in ("platform", "platform_stock_rllib", "platform_ppo", "peer"):
        (run,) = details[side]
        assert run["env_steps"] >= 400 or run["solved_s"] is not None
        assert run["history"], f"{side} recorded no evaluation"


def test_tracking_quick(tmp_path):
    assert main(["tracking", "--quick", "--output", str(tmp_path)]) == 0
    document = _document(tmp_path, "tracking")
    details = document["details"]
    assert details["numeric_keys_per_result"] > 150  # a real RLlib result (196 numeric keys besides its config)
    assert details["platform"]["check"][0], details["platform"]["check"][1]
    assert details["peer"]["check"][0], details["peer"]["check"][1]


def test_cli_benchmark_times_a_dry_run(tmp_path):
    """The target row is a dry run with an empty feature cache (a fresh storage root); the second, the same again; the
    third, a refused file (exit 2, or the benchmark fails)."""
    assert main(["cli", "--quick", "--output", str(tmp_path)]) == 0
    document = json.loads((tmp_path / "cli.json").read_text())
    cold, warm, refused = document["figures"]
    assert cold["platform"] > 0 and cold["target"] == "<= 3 s" and "empty feature cache" in cold["what"]
    assert warm["platform"] > 0 and warm["target"] is None and "warm" in warm["what"]
    assert "--storage <fresh folder>" in document["details"]["command"]
    assert refused["platform"] > 0 and refused["what"].startswith("same, a refused file")
