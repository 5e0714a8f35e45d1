"""The seams: algorithms and env families are table entries, and the platform layer is not
shaped like one of them (no algorithm imports the platform, no trading id or key in the platform)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import algos
import envs
from algos.base import Algorithm, Learner
from algos.inputs import TrainingBase
from envs.errors import InputError
from experiments.api.preflight import SMOKE_OVERRIDES
from experiments.config.experiment import experiment_model
from experiments.config.load import load_experiment
from tests.conftest import REPO, shipped_experiments


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_algorithms_do_not_import_the_platform():
    paths = sorted((REPO / "algos").rglob("*.py"))
    assert any(path.parent != REPO / "algos" for path in paths)  # the algorithms' folders are scanned too
    for path in paths:
        offending = {name for name in imported_modules(path) if name.split(".")[0] == "experiments"}
        assert not offending, f"{path.relative_to(REPO)} imports {offending}: learners receive plain values " \
                              "(algos.inputs.BuildInputs)"


def test_envs_import_no_ray_and_no_platform():
    for path in sorted((REPO / "envs").rglob("*.py")):
        offending = {n for n in imported_modules(path) if n.split(".")[0] in ("ray", "experiments", "algos", "torch")}
        assert not offending, f"{path.relative_to(REPO)} imports {offending}"


# Family ids, env_config keys, baselines, metrics, labels and packages that only envs/<family> and its table entry
# may spell: the platform gets them from the envs.EnvFamily it was handed.
FAMILY_NAMES = re.compile(r"Spot-v0|Portfolio-v0|trading/"
                          r"|env_config\.(symbol|timeframe|data_dir|source|fee_bps|positions)\b"
                          r"|(env_config|config)(\.get\(|\[)\"(symbol|timeframe|data_dir|source|synthetic_model)\""
                          r"|buy_and_hold|dqn_btc|eval/(sharpe|nrpa|apfd|arcs)|test period"
                          r"|envs\.(trading|agents|portfolio)\b")
# Examples in help texts and messages ("e.g. conf/dqn_btc.yaml") show a shipped file; they name nothing the code uses.
EXAMPLE = re.compile(r"e\.g\.[^;)]*")
# Modules that still reach into the trading family directly, each with the reason (docs/DESIGN.md, "Still open").
KNOWN_LEAKS: dict[str, str] = {}


# algos/ keeps what it writes for one family's env in this one folder, whose code names the family's package: the
# direct learner's problem of each family (torch, which envs/ never imports), the portfolio ensemble's weight rule,
# the test-prioritization agent's online comparator (docs/DESIGN.md, "Layout").
FAMILY_FOLDER = REPO / "algos" / "families"


def platform_files() -> list[Path]:
    """experiments/ (the benchmarks and studies, which measure named envs against named peers, aside) and algos/ (its
    family folder aside), sub-packages included."""
    skipped = ("benchmark", "studies")
    found = [p for p in (REPO / "experiments").rglob("*.py")
             if p.relative_to(REPO / "experiments").parts[0] not in skipped]
    algorithms = [p for p in (REPO / "algos").rglob("*.py") if not p.is_relative_to(FAMILY_FOLDER)]
    return sorted([*found, *algorithms])


def docstring_lines(source: str) -> set[int]:
    """Line numbers of the module's, classes' and functions' docstrings: prose may name what code must not."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        documented = isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        if documented and ast.get_docstring(node):
            first = node.body[0]
            lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def test_the_platform_spells_no_family_id_key_baseline_or_metric():
    """experiments/ and algos/ know each env family only through its envs.ENVIRONMENTS entry."""
    files = [path for path in platform_files() if str(path.relative_to(REPO)) not in KNOWN_LEAKS]
    assert len(files) > 40  # the sub-packages are scanned too
    for path in files:
        source = path.read_text()
        prose = docstring_lines(source)
        for number, line in enumerate(source.splitlines(), 1):
            code = EXAMPLE.sub("", line.split("#")[0])
            if number in prose or line.lstrip().startswith(("#", "e.g.")):
                continue
            assert not FAMILY_NAMES.search(code), f"{path.relative_to(REPO)}:{number}: {line.strip()}"


def test_the_known_leaks_still_leak():
    """An entry of KNOWN_LEAKS that no longer names a family is removed from the list, so the list stays true."""
    for name in KNOWN_LEAKS:
        assert FAMILY_NAMES.search((REPO / name).read_text()), f"{name} no longer leaks: drop it from KNOWN_LEAKS"


@pytest.mark.parametrize("name", sorted(algos.ALGORITHMS))
def test_every_algorithm_entry_brings_what_the_platform_needs(name):
    entry = algos.algorithm(name)
    assert isinstance(entry, Algorithm) and entry.name == name and isinstance(entry.learner, Learner)
    assert issubclass(entry.training_section, TrainingBase)
    assert experiment_model(name).model_fields["training"].annotation is entry.training_section
    learner = entry.learner
    assert {"training_iteration", "evaluation/env_runners/episode_return_mean"} <= set(learner.result_keys())
    assert all(learner.reports(key) for key in learner.result_keys())
    assert entry.speedup(entry.training_section()) > 0


def test_the_table_is_one_object_per_algorithm_read_without_ray_or_torch():
    """`import algos` loads nothing (the plain-torch update math imports it without pydantic); reading the table
    builds one object per entry and imports neither Ray nor torch: learners import them inside their methods."""
    code = ("import sys, algos\n"
            "bare = sorted(m for m in ('pydantic', 'envs', 'ray', 'torch') if m in sys.modules)\n"
            "entries = [algos.algorithm(name) for name in algos.ALGORITHMS]\n"
            "assert [type(e).__name__ for e in entries] == [type(e).__name__ for e in algos.ALGORITHMS.values()]\n"
            "print(bare, sorted(m for m in ('ray', 'torch') if m in sys.modules), len(set(map(id, entries))))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["[]", "[]", str(len(algos.ALGORITHMS))], result.stdout


def test_a_new_algorithm_is_one_object(tmp_path, monkeypatch):
    """docs/DESIGN.md's "Adding an algorithm", followed: its module (a training section, a learner, the entry; here in
    the test), its object in the table, and a conf. The file is read, checked, servable and built; nothing else
    changes."""
    from pydantic import Field

    from algos.base import NumpyLayouts, check_servable
    from algos.greedy import GreedyRule
    from algos.rllib.learner import RLlibLearner
    from experiments.hardware import load_preset, resolve_plan
    from experiments.sweep.rllib_config import build_config

    class CautiousPPOTraining(TrainingBase):
        clip_param: float = Field(default=0.1, gt=0, description="The surrogate objective's clip.")

    class CautiousPPOLearner(RLlibLearner):
        learner_metrics = ("policy_loss",)
        numpy_layouts = NumpyLayouts(default=(("encoder", "pi"),))

        def build(self, inputs):
            from ray.rllib.algorithms.ppo import PPOConfig

            from algos.rllib.config import apply_common

            training = dict(inputs.sections["training"])
            training.pop("batch_scaling")
            return apply_common(PPOConfig().training(**training), inputs)

        def trainable(self, training):
            return "PPO"

    class CautiousPPO(Algorithm):
        name = "cautious_ppo"
        training_section = CautiousPPOTraining
        greedy = GreedyRule(output="action_dist_inputs", argmax=True)
        action_spaces = ("discrete",)
        learner = CautiousPPOLearner()

    monkeypatch.setitem(algos.ALGORITHMS, "cautious_ppo", CautiousPPO())
    path = tmp_path / "exp.yaml"
    path.write_text("name: t\nalgorithm: cautious_ppo\nenvironment: {env: CartPole-v1}\ntraining: {clip_param: 0.2}\n"
                    "tune: {metric: learners/default_policy/policy_loss, mode: min}\n")
    exp = load_experiment(path)
    assert exp.spec is algos.ALGORITHMS["cautious_ppo"] and exp.training.clip_param == 0.2
    assert check_servable(exp.algorithm, exp.spec) is None
    plan = resolve_plan(load_preset("cpu"), exp.timeframe, 1, exp.training.train_batch_size_per_learner)
    config = build_config(exp, plan, seed=0)
    assert type(config).__name__ == "PPOConfig" and config.clip_param == 0.2 and config.env == "CartPole-v1"


@pytest.mark.parametrize("name", sorted(algos.ALGORITHMS))
def test_every_algorithm_smoke_budget_is_a_valid_override(tmp_path, name):
    path = tmp_path / "exp.yaml"
    path.write_text(f"name: t\nalgorithm: {name}\nenvironment: {{env: CartPole-v1}}\n")
    exp = load_experiment(path, [*SMOKE_OVERRIDES, *algos.algorithm(name).smoke_overrides])
    assert exp.algorithm == name and exp.tune.stop == {"training_iteration": 2}


def test_an_algorithm_section_refuses_another_algorithms_keys(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text("name: t\nalgorithm: ppo\nenvironment: {env: CartPole-v1}\ntraining: {n_step: 3}\n")
    with pytest.raises(InputError, match=r"unknown key 'training.n_step'.*known here: lr, gamma"):
        load_experiment(path)


def test_an_unknown_algorithm_names_the_known_ones():
    known = ", ".join(sorted(algos.ALGORITHMS))  # an algorithm added to the table changes no test
    with pytest.raises(InputError, match=rf"algorithm 'dqnn' is unknown: did you mean 'dqn'\? \(known: {known}\)"):
        algos.algorithm("dqnn")


def test_every_platform_env_has_a_config_model():
    for env_id, entry in envs.ENVIRONMENTS.items():
        assert entry.config_model() is not None, env_id
        with pytest.raises(InputError, match="did you mean"):
            envs.family(env_id).check_config({"splitt": "train"}, "x")


def test_reading_experiment_files_imports_no_ray():
    """Validating a file reads the algorithm table and its training sections; RLlib (and torch with it) is
    imported only to build a config, so a refused file answers without paying that import."""
    confs = [str(path) for path in shipped_experiments()]
    code = ("import sys\nfrom experiments.config.load import load_experiment\n"
            f"for conf in {confs!r}:\n    load_experiment(conf)\n"
            "print(sorted(m for m in ('ray', 'torch') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", result.stdout


def test_a_family_sizes_its_own_smoke_runs():
    """The generation agent scores 20 paired seeds as shipped; its smoke runs score 5 (EnvFamily.smoke_overrides),
    and a --set still wins over the family's budget."""
    from experiments.api.preflight import load

    conf = REPO / "conf" / "dqn_testgen_tomllib.yaml"
    assert load(conf, [], smoke_test=False).environment.env_config["eval_seeds"] == 20
    assert load(conf, [], smoke_test=True).environment.env_config["eval_seeds"] == 5
    smoke = load(conf, ["environment.env_config.eval_seeds=3"], smoke_test=True)
    assert smoke.environment.env_config["eval_seeds"] == 3
