"""One validation pass before Ray: everything `--dry-run` can check without a cluster, each refusal one line
and exit 2, and experiment files as deltas of a base."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from envs.errors import InputError
from experiments.config.load import load_experiment
from experiments.run import main
from tests.conftest import REPO

CARTPOLE = """name: t
environment: {env: CartPole-v1}
evaluation: {evaluation_interval: 1}
tune:
  metric: evaluation/env_runners/episode_return_mean
  stop: {training_iteration: 2}
"""
OUT_OF_THE_WAY = ["--output", "/nonexistent-never-written"]


def dry_run(capsys, conf: Path | str, *sets: str) -> tuple[int, str, str]:
    argv = [str(conf), "--dry-run", *OUT_OF_THE_WAY]
    for text in sets:
        argv += ["--set", text]
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def cartpole(tmp_path: Path) -> Path:
    path = tmp_path / "cartpole.yaml"
    path.write_text(CARTPOLE)
    return path


@pytest.mark.parametrize("setting, fragment", [
    ("tune.search_space={training.lr: {uniform: [1, 0]}}", "training.lr: uniform needs low < high"),
    ("tune.search_space={training.lr: {loguniform: [0, 1]}}", "needs a positive low bound"),
    ("tune.search_space={training.lr: {uniform: [low, 1]}}", "bounds are numbers, got 'low'"),
    ("tune.search_space={training.n_step: {randint: [1.5, 4]}}", "bounds are whole numbers"),
    ("tune.search_space={training.lr: {quniform: [0, 1, 0]}}", "positive step q"),
    ("tune.search_space={training.lr: {normal: [0, 1]}}", "write one of choice, grid"),
    ("tune.search_space={training.lr: {choice: [0.1, fast]}}", "tune.search_space.training.lr value 'fast'"),
    ("tune.search_space={training.n_step: {grid: [1, 0]}}",
     "training.n_step: Input should be greater than or equal to 1"),
    ("tune.search_space={training.lrr: {choice: [0.1]}}", "did you mean 'training.lr'"),
    ("tune.metric=training_iteraton", "tune.metric 'training_iteraton' is not a result key dqn reports: did you mean "
                                      "'training_iteration'?"),
    ("tune.stop={episode_reward_mean: 100}", "did you mean 'env_runners/episode_return_mean'?"),
    ("tune.stop={evaluation/env_runners/episode_retrun_mean: 100}",
     "did you mean 'evaluation/env_runners/episode_return_mean'?"),
    ("algorithm=ppx", "algorithm 'ppx' is unknown: did you mean 'ppo'?"),
    ("training.lr=fast", "training.lr: Input should be a valid number"),
])
def test_the_dry_run_refuses_with_one_line(capsys, cartpole, setting, fragment):
    code, out, err = dry_run(capsys, cartpole, setting)
    assert code == 2 and fragment in err, err
    assert err.count("\n") == 1 and "Traceback" not in err and str(cartpole) in err
    assert "resolved experiment" not in out


@pytest.mark.parametrize("setting, fragment", [
    ("tune.search_alg=optuna", "optuna ignores the step of qloguniform"),
    ("tune.search_space={training.epsilon: {choice: [[[0, 1.0], [100, 0.1]]]}}", "optuna chooses among numbers"),
])
def test_optuna_limits_are_checked_before_ray(capsys, cartpole, setting, fragment):
    sets = ["tune.search_alg=optuna", setting]
    if "qloguniform" in fragment:
        sets.append("tune.search_space={training.lr: {qloguniform: [1e-4, 1e-2, 1e-4]}}")
    code, _, err = dry_run(capsys, cartpole, *sets)
    assert code == 2 and fragment in err, err


def test_optuna_cannot_search_a_key_rllib_needs_twice(capsys):
    code, _, err = dry_run(capsys, REPO / "conf" / "dqn_btc.yaml", "evaluation.protocol=null", "tune.seeds=[0]",
                           "tune.search_alg=optuna",
                           "tune.search_space={environment.env_config.window: {choice: [12, 24]}}")
    assert code == 2 and "optuna cannot search a key that RLlib needs twice" in err, err


@pytest.mark.parametrize("setting, fragment", [
    ("environment.env_config.fee_bps=1e9", "environment.env_config.fee_bps: Input should be less than 10000"),
    ("environment.env_config.window=twenty", "environment.env_config.window: Input should be a valid integer"),
    ("environment.env_config.positions=leveraged", "environment.env_config.positions: Input should be 'long_flat'"),
    ("environment.env_config.windw=3", "did you mean 'environment.env_config.window'?"),
    ("tune.search_space={environment.env_config.positions: {grid: [long_flat, leveraged]}}",
     "tune.search_space.environment.env_config.positions value 'leveraged'"),
    ("evaluation.env_config={split: validation, episode_length: 1}",
     "evaluation: environment.env_config.episode_length"),
])
def test_the_families_env_config_is_checked_by_its_model(capsys, setting, fragment):
    code, _, err = dry_run(capsys, REPO / "conf" / "dqn_btc.yaml", setting)
    assert code == 2 and fragment in err, err
    assert err.count("\n") == 1


def test_testprio_env_config_is_checked_by_its_model(capsys):
    code, _, err = dry_run(capsys, REPO / "conf" / "dqn_testprio_codec.yaml", "environment.env_config.features=fancy")
    assert code == 2, err
    assert "environment.env_config.features: Input should be 'basic', 'extended' or 'portable'" in err, err


def test_numbers_written_as_yaml_text_are_numbers(tmp_path):
    """PyYAML reads 1e-4 (no dot) as text; the README's own search space must still search numbers."""
    path = tmp_path / "exp.yaml"
    path.write_text(CARTPOLE + "  search_space:\n    training.lr: {loguniform: [1e-4, 1e-3]}\n"
                    "    training.gamma: {choice: [0.9, 0.99]}\n")
    exp = load_experiment(path)
    assert exp.tune.search_space["training.lr"] == {"loguniform": [0.0001, 0.001]}
    assert load_experiment(path, ["environment.env_config={}", "training.lr=1e-4"]).training.lr == 0.0001


def test_a_list_valued_key_is_searched_whole(cartpole):
    """Exploration-schedule variants: each choice is one whole schedule, reaching RLlib's epsilon intact."""
    from experiments.hardware import load_preset, resolve_plan
    from experiments.sweep.tuner import build_param_space

    schedules = [[[0, 1.0], [1000, 0.05]], [[0, 1.0], [5000, 0.02]]]
    exp = load_experiment(cartpole, [f"tune.search_space={{training.epsilon: {{grid: {schedules}}}}}"])
    params = build_param_space(exp, resolve_plan(load_preset("cpu"), None, exp.num_trials()))
    assert params.search_keys == {"epsilon": "training.epsilon"}
    assert params.space["epsilon"] == {"grid_search": schedules}


def test_a_refused_file_prints_no_traceback_through_the_real_cli(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(CARTPOLE + "  search_space:\n    training.lr: {uniform: [1, 0]}\n")
    result = subprocess.run([sys.executable, "-m", "experiments.run", str(path), "--dry-run"], capture_output=True,
                            text=True, cwd=REPO, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"error: {path}: tune.search_space: training.lr: uniform needs low < high")


# --- experiment files as deltas ---------------------------------------------------------------------------


def test_the_coins_file_is_a_delta_of_the_main_job():
    coins = load_experiment(REPO / "conf" / "dqn_coins.yaml")
    btc = load_experiment(REPO / "conf" / "dqn_btc.yaml")
    assert "extends: dqn_btc.yaml" in (REPO / "conf" / "dqn_coins.yaml").read_text()
    assert coins.name == "dqn_coins" and coins.environment.env_config["source"] == "synthetic"
    assert coins.training.n_step == btc.training.n_step == 3 and coins.rl_module == btc.rl_module
    assert coins.training.replay_buffer.type == "uniform" and btc.training.replay_buffer.type == "prioritized"
    assert "training.n_step" not in coins.tune.search_space  # removed by the delta's null
    assert len(coins.tune.search_space["environment.env_config.symbol"]["grid"]) == 20
    assert coins.num_trials() == 20 * 3


def test_a_delta_that_changes_the_algorithm_starts_its_training_afresh():
    ppo = load_experiment(REPO / "conf" / "ppo_btc.yaml")
    assert ppo.algorithm == "ppo" and type(ppo.training).__name__ == "PPOTraining"
    assert ppo.environment.env_config == load_experiment(REPO / "conf" / "dqn_btc.yaml").environment.env_config


def test_deltas_resolve_paths_against_the_file_that_wrote_them(tmp_path):
    (tmp_path / "base").mkdir()
    (tmp_path / "data.parquet").write_bytes(b"")
    (tmp_path / "base" / "base.yaml").write_text("name: base\nenvironment:\n  env: trading/Spot-v0\n"
                                                 "  env_config: {data_path: ../data.parquet, window: 12}\n")
    delta = tmp_path / "delta.yaml"
    delta.write_text("extends: base/base.yaml\nname: delta\nenvironment: {env_config: {window: 6}}\n")
    exp = load_experiment(delta)
    assert exp.environment.env_config == {"data_path": str(tmp_path / "data.parquet"), "window": 6}


@pytest.mark.parametrize("files, fragment", [
    ({"a.yaml": "extends: b.yaml\nname: a\n", "b.yaml": "extends: a.yaml\nname: b\n"}, "is circular"),
    ({"a.yaml": "extends: a.yaml\nname: a\n"}, "is circular"),
    ({"a.yaml": "extends: nope.yaml\nname: a\n"}, "nope.yaml not found"),
    ({"a.yaml": "extends: [b.yaml]\nname: a\n"}, "extends: name one experiment file"),
])
def test_bad_extends_are_one_line(tmp_path, capsys, files, fragment):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(InputError, match=fragment):
        load_experiment(tmp_path / "a.yaml")
    code, _, err = dry_run(capsys, tmp_path / "a.yaml")
    assert code == 2 and err.count("\n") == 1


def test_a_delta_that_names_no_algorithm_keeps_its_bases_algorithm_and_training(tmp_path):
    """A delta of a PPO file that changes only the data (conf/canary_portfolio_noise.yaml) is still that PPO run:
    before, a file without `algorithm:` was read as DQN, so the base's PPO training section was dropped for PPO's
    defaults without a word."""
    (tmp_path / "base.yaml").write_text(CARTPOLE + "algorithm: ppo\ntraining: {lr: 0.001, minibatch_size: 64}\n")
    delta = tmp_path / "delta.yaml"
    delta.write_text("extends: base.yaml\nname: delta\n")
    exp = load_experiment(delta)
    assert exp.algorithm == "ppo"
    assert exp.training.lr == 0.001 and exp.training.minibatch_size == 64
