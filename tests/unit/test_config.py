"""Experiment files: strict keys with hints, overrides, search spaces, and the CLI's exit codes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from envs.errors import InputError
from experiments.config.load import load_experiment
from tests.conftest import REPO, shipped_experiments

CONFS = shipped_experiments()
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
    exp = load_experiment(path, ["rl_module.fcnet_hiddens=[32, 32]"])
    assert exp.rl_module.fcnet_hiddens == [32, 32] and exp.pinned == {}
    assert exp.num_trials() == 3 * 2 * 2


def test_a_set_of_a_searched_key_pins_it(tmp_path):
    """--set training.lr=1e-4 must not lose to tune.search_space: the key leaves the search and is reported."""
    path = write(tmp_path, BASE + "tune:\n  search_space:\n    training.gamma: {grid: [0.9, 0.99]}\n"
                 "    training.lr: {loguniform: [1e-4, 1e-3]}\n")
    exp = load_experiment(path, ["training.lr=1e-4", "training.gamma=0.95"])
    assert exp.training.lr == 1e-4 and exp.training.gamma == 0.95
    assert exp.tune.search_space == {} and exp.pinned == {"training.lr": 1e-4, "training.gamma": 0.95}
    assert exp.num_trials() == 1
    assert exp.model_copy().pinned == exp.pinned  # survives the smoke version's copies


def test_relative_paths_resolve_against_the_experiment_file_and_set_against_the_cwd(tmp_path, monkeypatch):
    conf_dir, elsewhere = tmp_path / "project" / "conf", tmp_path / "elsewhere"
    (conf_dir.parent / "data").mkdir(parents=True)
    conf_dir.mkdir()
    elsewhere.mkdir()
    (conf_dir.parent / "data" / "x.parquet").write_bytes(b"")
    (elsewhere / "y.parquet").write_bytes(b"")
    path = conf_dir / "exp.yaml"
    path.write_text("name: t\nenvironment: {env: trading/Spot-v0, env_config: {data_path: ../data/x.parquet}}\n")
    monkeypatch.chdir(elsewhere)
    assert load_experiment(path).environment.env_config["data_path"] == str(conf_dir.parent / "data" / "x.parquet")
    overridden = load_experiment(path, ["environment.env_config.data_path=y.parquet"])
    assert overridden.environment.env_config["data_path"] == str(elsewhere / "y.parquet")
    with pytest.raises(InputError, match="resolve against the file's folder") as info:
        load_experiment(path, ["environment.env_config.data_path=nope.parquet"])
    assert str(elsewhere / "nope.parquet") in str(info.value)


def test_a_searched_data_file_grid_resolves_against_the_experiment_file(tmp_path, monkeypatch):
    (tmp_path / "a.parquet").write_bytes(b"")
    path = write(tmp_path, "name: t\nenvironment: {env: trading/Spot-v0}\ntune:\n  search_space:\n"
                 "    environment.env_config.data_path: {grid: [a.parquet, s3://bucket/b.parquet]}\n")
    monkeypatch.chdir(tmp_path.parent)
    grid = load_experiment(path).tune.search_space["environment.env_config.data_path"]["grid"]
    assert grid == [str(tmp_path / "a.parquet"), "s3://bucket/b.parquet"]


def test_search_space_forms_become_tune_domains():
    from ray import tune

    from experiments.config.search_space import check_search_space, to_domains

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
    with pytest.raises(ValueError, match="low < high"):  # bounds are checked when the file is read, before Ray
        check_search_space({"x": {"uniform": [1, 0]}})
    with pytest.raises(ValueError, match="positive"):
        check_search_space({"x": {"loguniform": [0, 1]}})


@pytest.mark.parametrize("conf", CONFS, ids=[c.name for c in CONFS])
def test_every_shipped_conf_dry_runs(conf, tmp_path, monkeypatch, capsys):
    """From a fresh clone and from any folder: shipped confs read only bundled data, found from the conf. Every file
    in this one process (`experiments.run.main`, as `python -m experiments.run` calls it), each from its own folder
    outside the repository, where its dry run stores the features it computed."""
    from experiments.run import main

    assert "../shared" not in conf.read_text()
    monkeypatch.chdir(tmp_path)
    code = main([str(conf), "--dry-run"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "hardware preset" in out and "resolved experiment" in out


def test_every_shipped_conf_starts_with_its_command():
    for conf in CONFS:
        first = conf.read_text().splitlines()[0]
        assert first == f"# Run:    .venv/bin/python -m experiments.run conf/{conf.name}", conf


# A wall time in a comment ("about 3 minutes", "74 s", "~65 s per pair"): timings live in one place.
TIMING = re.compile(r"\b\d+(\.\d+)?\s*(s|sec|seconds?|min|minutes?|hours?)\b(?![-/])", re.I)


def test_conf_comments_hold_no_timings_and_their_commands_run_in_a_plain_shell():
    """Every command printed in a conf works as printed without an activated venv, and wall times are
    stated once, in the README's "Measured" table (not in headers that drift from it)."""
    for conf in CONFS:
        comments = [line for line in conf.read_text().splitlines() if line.lstrip().startswith("#")
                    or " # " in line]
        for line in comments:
            comment = line[line.index("#"):]
            assert not TIMING.search(comment), f"{conf.name}: {comment}"
            assert "python -m" not in comment.replace(".venv/bin/python -m", ""), f"{conf.name}: {comment}"


def test_the_readme_measures_every_shipped_conf():
    readme = (REPO / "README.md").read_text()
    measured = readme[readme.index("### Measured"):]
    measured = measured[:measured.index("\n#")]
    for conf in CONFS:
        assert f"conf/{conf.name}" in measured or conf.name in measured, conf.name


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["conf/nope.yaml"], "not found"),
        (["conf"], "is a folder"),
        (["conf/dqn_btc.yaml", "--set", "training"], "KEY=VALUE"),
        (["conf/dqn_btc.yaml", "--set", "training.lrr=1"], "did you mean 'training.lr'"),
        (["conf/dqn_btc.yaml", "--set", "environment.env=trading/Spot-v9"], "did you mean 'trading/Spot-v0'"),
        (["conf/dqn_btc.yaml", "--set", "environment.env_config.data_path=/missing.parquet"], "not found"),
        (["conf/dqn_btc.yaml", "--hardware", "rtx_4090ti"], "rtx_4090"),
    ],
)
def test_cli_errors_exit_2_with_one_clear_message(args, fragment, capsys, monkeypatch):
    """In this process, through `main` as `python -m experiments.run` calls it; the process's own exit code and
    stderr are the next test's."""
    from experiments.run import main

    monkeypatch.chdir(REPO)
    code = main([*args, "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2
    assert fragment in err and "Traceback" not in err and err.count("\n") == 1, err


def test_a_refused_file_exits_2_from_the_command_line_with_one_line():
    result = subprocess.run([sys.executable, "-m", "experiments.run", "conf/nope.yaml", "--dry-run"],
                            capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 2
    assert "not found" in result.stderr and "Traceback" not in result.stderr and result.stderr.count("\n") == 1


def test_set_algorithm_starts_training_afresh_and_names_the_ready_made_conf():
    """--set algorithm=ppo on the DQN file failed on training.implementation, one key at a time, blaming the file."""
    from experiments.config.load import load_experiment

    exp = load_experiment(REPO / "conf" / "dqn_btc.yaml", ["algorithm=ppo", "training.lr=1e-4"])
    assert exp.algorithm == "ppo" and exp.training.lr == 1e-4
    assert "training.n_step" not in exp.tune.search_space
    notes = " | ".join(exp.notes)
    assert ("algorithm dqn -> ppo: training, its searches and warm-start settings (training.n_step, "
            "retrain.incremental.settings.training.epsilon) start from ppo's defaults") in notes
    assert "env_runners.rollout_fragment_length: 4 comes from" in notes  # DQN's small fragments, kept: said
    assert "conf/ppo_btc.yaml" in notes
    quiet = load_experiment(REPO / "conf" / "dqn_btc.yaml",
                            ["algorithm=ppo", "env_runners.rollout_fragment_length=auto"])
    assert not any("rollout_fragment_length" in note for note in quiet.notes)
    assert load_experiment(REPO / "conf" / "dqn_btc.yaml", ["algorithm=dqn"]).notes == []


def test_a_smoke_test_without_folds_or_groups_trains_two_different_points():
    """The agents' smoke runs sampled one lr twice: the side-by-side table showed a sweep of one point twice."""
    from experiments.api.preflight import load

    exp = load(REPO / "conf" / "dqn_testprio_codec.yaml", [], smoke_test=True)
    assert exp.num_trials() == 2
    assert exp.tune.search_space["training.lr"] == {"grid": [0.0003, 0.001]}


def test_a_setting_the_protocol_ignores_is_refused():
    """split_fractions: [0.9, 0.2, 0.1] passed the dry run under walk_forward, where it is silently unused."""
    from envs.errors import InputError
    from experiments.config.load import load_experiment

    with pytest.raises(InputError, match=r"environment.env_config.split_fractions is not used when evaluation.protocol "
                                         r"cuts the parts \(type walk_forward\)"):
        load_experiment(REPO / "conf" / "dqn_btc.yaml", ["environment.env_config.split_fractions=[0.9, 0.2, 0.1]"])
