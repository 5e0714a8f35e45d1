"""Every hardware preset builds a full RLlib config (DQN and PPO) and a Tune resource request (no GPU needed)."""
from __future__ import annotations

import pytest

from experiments.config.load import load_experiment
from experiments.hardware import available_presets, load_preset, resolve_plan
from tests.conftest import REPO


def bundles_for(preset_name: str, conf: str = "dqn_btc.yaml", overrides: list[str] | None = None):
    from experiments.sweep.rllib_config import build_config

    exp = load_experiment(REPO / "conf" / conf, overrides or [])
    preset = load_preset(preset_name)
    plan = resolve_plan(preset, exp.timeframe, exp.num_trials(), exp.training.train_batch_size_per_learner,
                        exp.training.batch_scaling)
    config = build_config(exp, plan)
    request = config.algo_class.default_resource_request(config)
    return preset, plan, config, request.bundles


def total(bundles, key: str) -> float:
    return sum(b.get(key, 0.0) for b in bundles)


# Batches that every data-parallel preset can split (p4d_24xlarge_ddp: 8 learners, workstation_3gpu_ddp: 3).
SPLITTABLE = "training.train_batch_size_per_learner=48"


@pytest.mark.parametrize("conf", ["dqn_btc.yaml", "ppo_btc.yaml"])
@pytest.mark.parametrize("name", available_presets())
def test_every_preset_builds_rllib_config_and_resource_request(name, conf):
    batch = "training.train_batch_size_per_learner=4008" if conf.startswith("ppo") else SPLITTABLE  # 8 and 3 divide it
    preset, plan, config, bundles = bundles_for(name, conf, overrides=[batch])
    config.validate()
    assert config.num_learners == plan.num_learners
    assert config.num_gpus_per_learner == plan.num_gpus_per_learner
    assert config.num_env_runners == plan.num_env_runners
    assert config.torch_compile_learner == preset.torch_compile_learner
    if config.algo_class.__name__ == "FastDQN":
        assert config.mixed_precision == preset.mixed_precision
    gpus = total(bundles, "GPU")
    assert gpus == pytest.approx(plan.gpus_per_trial, abs=1e-3)
    assert gpus * plan.max_concurrent_trials <= max(preset.gpu_count, 0) + 1e-6
    if preset.gpu_count == 0:
        assert gpus == 0


LEARNING = ("lr", "gamma", "training_intensity", "n_step", "double_q", "dueling", "target_network_update_freq",
            "num_steps_sampled_before_learning_starts", "grad_clip")


@pytest.mark.parametrize("conf", ["dqn_btc.yaml", "dqn_cartpole.yaml"])
@pytest.mark.parametrize("name", available_presets())
def test_no_preset_changes_what_is_learned(name, conf):
    """The invariant of experiments/hardware/batch.py over every preset: without the opt-in, the RLlib config
    learns exactly as the experiment file says (same lr, replay ratio, n-step, ...; the same batch per
    update, split over data-parallel learners). The GPU knobs are checked as configs: no GPU here."""
    exp = load_experiment(REPO / "conf" / conf, [SPLITTABLE])
    _, plan, config, _ = bundles_for(name, conf, [SPLITTABLE])
    training = exp.training
    for key in LEARNING:
        assert getattr(config, key) == getattr(training, key), key
    # The old behaviour (a100_40gb: batch 2048 at the same lr) fails here.
    assert config.train_batch_size_per_learner * max(config.num_learners, 1) == 48
    assert not plan.batch_plan.changes_learning


@pytest.mark.parametrize("name", [n for n in available_presets() if load_preset(n).large_batch is not None])
def test_opted_in_large_batch_follows_the_declared_lr_rule_and_keeps_the_replay_ratio(name):
    import math

    exp = load_experiment(REPO / "conf/dqn_btc.yaml", ["training.batch_scaling=preset"])
    preset, plan, config, _ = bundles_for(name, overrides=["training.batch_scaling=preset"])
    large = preset.large_batch
    batch = large.batch_size_per_timeframe.get("1h", large.default_batch_size)
    assert config.train_batch_size_per_learner * max(config.num_learners, 1) == batch
    ratio = batch / exp.training.train_batch_size_per_learner
    factor = ratio if large.lr_rule == "linear" else math.sqrt(ratio)
    assert config.lr == pytest.approx(exp.training.lr * factor)
    assert config.training_intensity == exp.training.training_intensity  # replayed samples per env step kept
    assert plan.batch_plan.changes_learning


def test_fastdqn_splits_the_main_jobs_batch_over_three_gpus_and_stock_rllib_names_a_batch_that_works():
    from envs.errors import InputError

    _, plan, config, _ = bundles_for("workstation_3gpu_ddp")  # dqn_btc's batch 32 over 3 GPUs: 11, 11, 10
    assert config.update_batch == 32 and config.train_batch_size_per_learner == 11
    with pytest.raises(InputError, match="to 30 or 33"):
        bundles_for("workstation_3gpu_ddp", overrides=["training.implementation=rllib"])


def test_opting_in_on_a_preset_without_large_batch_is_an_input_error():
    from envs.errors import InputError

    with pytest.raises(InputError, match="declares no large_batch"):
        bundles_for("cpu", overrides=["training.batch_scaling=preset"])


@pytest.mark.parametrize("name, trials_at_once, gpu_per_trial, learners", [
    ("a100_80gb", 3, 1 / 3, 0),
    ("p3_8xlarge", 4, 1.0, 0),
    ("workstation_3gpu", 3, 1.0, 0),
    ("p4d_24xlarge_ddp", 1, 8.0, 8),
    ("cpu", 2, 0.0, 0),
])
def test_strategies_of_the_documented_setups(name, trials_at_once, gpu_per_trial, learners):
    _, plan, config, bundles = bundles_for(name, overrides=[SPLITTABLE])
    assert plan.max_concurrent_trials == trials_at_once
    assert total(bundles, "GPU") == pytest.approx(gpu_per_trial, abs=1e-3)
    assert config.num_learners == learners


def test_searched_env_key_is_drawn_once_for_training_and_evaluation():
    """A grid over environment.env_config.symbol makes one trial per symbol, evaluated on the same symbol."""
    from ray.tune.search.variant_generator import generate_variants

    from experiments.sweep.tuner import build_param_space

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


@pytest.mark.parametrize("conf", ["dqn_btc.yaml", "ppo_btc.yaml", "sac_pendulum.yaml"])
def test_every_algorithm_samples_its_trials_system_metrics_unless_switched_off(conf):
    """algos/rllib/system_metrics.py: the trial's own process samples at the configured interval; the switch removes it
    and leaves the selection score's callback."""
    from algos.rllib.system_metrics import attach_samples, start_sampling

    _, _, on, _ = bundles_for("cpu", conf, ["tracking.system_metrics_interval_s=2.5"])
    [sampling] = [c for c in on.callbacks_on_algorithm_init if c.func is start_sampling]
    assert sampling.args == (2.5,) and attach_samples in on.callbacks_on_train_result
    _, _, off, _ = bundles_for("cpu", conf, ["tracking.system_metrics=false"])
    assert not off.callbacks_on_algorithm_init and attach_samples not in off.callbacks_on_train_result
    assert [c.func.__name__ for c in off.callbacks_on_train_result] == ["copy_selection_score"]
