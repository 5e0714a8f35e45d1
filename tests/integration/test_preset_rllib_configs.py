"""Every hardware preset builds a full RLlib DQNConfig and a Tune resource request (no GPU needed)."""
from __future__ import annotations

import pytest

from experiments.config import load_experiment
from experiments.hardware import available_presets, load_preset, resolve_plan
from tests.conftest import REPO

pytestmark = pytest.mark.slow


def bundles_for(preset_name: str):
    from ray.rllib.algorithms.dqn import DQN

    from algos.dqn import build_dqn_config

    exp = load_experiment(REPO / "conf/dqn_btc.yaml")
    preset = load_preset(preset_name)
    plan = resolve_plan(preset, exp.timeframe, exp.num_trials())
    config = build_dqn_config(exp, plan)
    request = DQN.default_resource_request(config)
    return preset, plan, config, request.bundles


def total(bundles, key: str) -> float:
    return sum(b.get(key, 0.0) for b in bundles)


@pytest.mark.parametrize("name", available_presets())
def test_every_preset_builds_rllib_config_and_resource_request(name):
    preset, plan, config, bundles = bundles_for(name)
    assert config.num_learners == plan.num_learners
    assert config.num_gpus_per_learner == plan.num_gpus_per_learner
    assert config.num_env_runners == plan.num_env_runners
    assert config.train_batch_size_per_learner == plan.train_batch_size_per_learner == preset.batch_size_per_timeframe.get(
        "1h", preset.default_batch_size)
    gpus = total(bundles, "GPU")
    assert gpus == pytest.approx(plan.gpus_per_trial, abs=1e-3)
    assert gpus * plan.max_concurrent_trials <= max(preset.gpu_count, 0) + 1e-6
    if preset.gpu_count == 0:
        assert gpus == 0


@pytest.mark.parametrize("name, trials_at_once, gpu_per_trial, learners", [
    ("a100_80gb", 3, 1 / 3, 0),
    ("p3_8xlarge", 4, 1.0, 0),
    ("workstation_3gpu", 3, 1.0, 0),
    ("p4d_24xlarge_ddp", 1, 8.0, 8),
    ("cpu", 2, 0.0, 0),
])
def test_strategies_from_the_notes(name, trials_at_once, gpu_per_trial, learners):
    _, plan, config, bundles = bundles_for(name)
    assert plan.max_concurrent_trials == trials_at_once
    assert total(bundles, "GPU") == pytest.approx(gpu_per_trial, abs=1e-3)
    assert config.num_learners == learners


def test_searched_env_key_is_drawn_once_for_training_and_evaluation():
    """A grid over environment.env_config.symbol makes one trial per symbol, evaluated on the same symbol."""
    from ray.tune.search.variant_generator import generate_variants

    from experiments.sweep import build_param_space

    exp = load_experiment(REPO / "conf/dqn_btc.yaml", [
        "tune.search_space={environment.env_config.symbol: {grid: [AAA, BBB, CCC]}, training.lr: {choice: [0.1, 0.2]}}",
        "evaluation.protocol=holdout", "tune.seeds=[0]"])
    plan = resolve_plan(load_preset("cpu"), exp.timeframe, exp.num_trials())
    params = build_param_space(exp, plan)
    variants = [config for _, config in generate_variants(params.space)]
    assert len(variants) == 3
    assert sorted(v["env_config"]["symbol"] for v in variants) == ["AAA", "BBB", "CCC"]
    for variant in variants:
        assert variant["evaluation_config"]["env_config"]["symbol"] == variant["env_config"]["symbol"]
        assert variant["evaluation_config"]["env_config"]["split"] == "validation"
    assert params.search_keys == {"env_config/symbol": "environment.env_config.symbol", "lr": "training.lr"}


def test_gpu_preset_on_a_cluster_without_gpus_fails_before_any_trial(tmp_path, capsys):
    import ray

    from experiments.run import main

    ray.shutdown()
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    code = main([str(REPO / "conf/dqn_btc.yaml"), "--hardware", "p3_8xlarge", "--smoke-test", "--no-dashboard",
                 "--output", str(tmp_path), "--set", f"tracking.tracking_uri={uri}"])
    assert code == 2
    assert "needs 1 GPU per trial, the Ray cluster has 0 GPUs" in capsys.readouterr().err
    assert not list(tmp_path.glob("dqn_btc/tune/*"))  # no trial was started
