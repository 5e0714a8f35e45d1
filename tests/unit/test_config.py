"""Experiment files: strict keys with hints, overrides, search spaces, and the CLI's exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from envs.errors import InputError
from experiments.config import load_experiment
from tests.conftest import REPO

CONFS = sorted((REPO / "conf").glob("*.yaml"))
BASE = "name: t\nenvironment: {env: CartPole-v1}\n"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text, fragment",
    [
        (BASE + "traning: {lr: 0.1}\n", "did you mean 'training'"),
        (BASE + "training: {lr: fast}\n", "training.lr"),
        (BASE + "training: {replay_buffer: {alpah: 0.5}}\n", "did you mean 'training.replay_buffer.alpha'"),
        (BASE + "tune: {search_space: {training.lrr: {choice: [1]}}}\n", "did you mean 'training.lr'"),
        (BASE + "tune: {search_space: {training.lr: {normal: [0, 1]}}}\n", "loguniform"),
        ("environment: {env: CartPole-v1}\n", "missing key 'name'"),
        (BASE + "evaluation: {env_config: {split: test}}\n", "must not see the test split"),
        (BASE + "training: [1, 2\n", "not valid YAML"),
    ],
)
def test_bad_experiment_files_name_the_key(tmp_path, text, fragment):
    path = write(tmp_path, text)
    with pytest.raises(InputError, match=fragment) as info:
        load_experiment(path)
    assert str(path) in str(info.value) or "YAML" in str(info.value)


def test_overrides_and_trial_count(tmp_path):
    path = write(
        tmp_path,
        BASE + "tune:\n  num_samples: 3\n  seeds: [0, 1]\n  search_space:\n"
        "    training.gamma: {grid: [0.9, 0.99]}\n    training.lr: {loguniform: [1e-4, 1e-3]}\n",
    )
    exp = load_experiment(path, ["training.lr=1e-4", "rl_module.fcnet_hiddens=[32, 32]"])
    assert exp.training.lr == 1e-4 and exp.rl_module.fcnet_hiddens == [32, 32]
    assert exp.num_trials() == 3 * 2 * 2


def test_relative_data_paths_become_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write(
        tmp_path, "name: t\nenvironment: {env: trading/Spot-v0, env_config: {data_path: data/x.parquet}}\n"
    )
    assert load_experiment(path).environment.env_config["data_path"] == str(tmp_path / "data/x.parquet")


def test_search_space_forms_become_tune_domains():
    from ray import tune

    from experiments.search_space import to_domains

    domains = to_domains(
        {
            "a": {"choice": [1, 2]},
            "b": {"grid": [1, 2]},
            "c": {"uniform": [0, 1]},
            "d": {"loguniform": [1e-4, 1e-2]},
            "e": {"randint": [1, 5]},
            "f": {"quniform": [0, 1, 0.1]},
            "g": {"qloguniform": [1e-4, 1e-2, 1e-4]},
            "h": {"qrandint": [0, 10, 2]},
        }
    )
    assert isinstance(domains["a"], tune.search.sample.Categorical)
    assert domains["b"] == {"grid_search": [1, 2]}
    assert 1e-4 <= domains["d"].sample() <= 1e-2 and domains["h"].sample() % 2 == 0
    with pytest.raises(InputError, match="low < high"):
        to_domains({"x": {"uniform": [1, 0]}})
    with pytest.raises(InputError, match="positive"):
        to_domains({"x": {"loguniform": [0, 1]}})


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "experiments.run", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )


@pytest.mark.parametrize("conf", CONFS, ids=[c.name for c in CONFS])
def test_every_shipped_conf_dry_runs(conf):
    import yaml

    env_config = (yaml.safe_load(conf.read_text()).get("environment") or {}).get("env_config") or {}
    data_path = env_config.get("data_path")
    if data_path and not (REPO / data_path).exists():
        pytest.skip(f"{conf.name}: its data file {data_path} is absent (relative to {REPO})")
    result = run_cli(str(conf), "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "hardware preset" in result.stdout and "resolved experiment" in result.stdout


def test_every_shipped_conf_starts_with_its_command():
    for conf in CONFS:
        first = conf.read_text().splitlines()[0]
        assert first.startswith("# Run:") and f"conf/{conf.name}" in first, conf


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["conf/nope.yaml"], "not found"),
        (["conf/dqn_btc.yaml", "--set", "training.lrr=1"], "did you mean 'training.lr'"),
        (["conf/dqn_btc.yaml", "--set", "environment.env=trading/Spot-v9"], "did you mean 'trading/Spot-v0'"),
        (["conf/dqn_btc.yaml", "--set", "environment.env_config.data_path=/missing.parquet"], "not found"),
        (["conf/dqn_btc.yaml", "--hardware", "rtx_4090ti"], "rtx_4090"),
    ],
)
def test_cli_errors_exit_2_with_one_clear_message(args, fragment):
    result = run_cli(*args, "--dry-run")
    assert result.returncode == 2
    assert fragment in result.stderr and "Traceback" not in result.stderr
