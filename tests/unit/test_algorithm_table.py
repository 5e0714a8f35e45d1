"""The seams of issue 13: algorithms and env families are table entries, and the platform layer is not
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
from algos.spec import AlgorithmSpec, TrainingBase
from envs.errors import InputError
from experiments.config import experiment_model, load_experiment
from experiments.preflight import SMOKE_OVERRIDES
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
    for path in sorted((REPO / "algos").glob("*.py")):
        offending = {name for name in imported_modules(path) if name.split(".")[0] == "experiments"}
        assert not offending, f"{path.name} imports {offending}: builders receive plain values (algos.spec)"


def test_envs_import_no_ray_and_no_platform():
    for path in sorted((REPO / "envs").rglob("*.py")):
        offending = {n for n in imported_modules(path) if n.split(".")[0] in ("ray", "experiments", "algos", "torch")}
        assert not offending, f"{path.relative_to(REPO)} imports {offending}"


# Trading ids and env_config keys that only envs/trading and its table entry may spell.
TRADING = re.compile(r"Spot-v0|trading/|env_config\.(symbol|timeframe|data_dir|source|fee_bps|positions)\b"
                     r"|(env_config|config)(\.get\(|\[)\"(symbol|timeframe|data_dir|source|synthetic_model)\"")


def test_the_platform_spells_no_trading_id_or_key():
    """experiments/ (the benchmarks, which measure named envs against named peers, aside) and algos/ know the
    trading family only through its envs.ENVIRONMENTS entry."""
    files = [*sorted((REPO / "experiments").glob("*.py")), *sorted((REPO / "experiments" / "hardware").glob("*.py")),
             *sorted((REPO / "algos").glob("*.py"))]
    for path in files:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#")[0]
            if '"""' in line or line.lstrip().startswith(("#", "e.g.")):
                continue
            assert not TRADING.search(code), f"{path.relative_to(REPO)}:{number}: {line.strip()}"


@pytest.mark.parametrize("name", sorted(algos.ALGORITHMS))
def test_every_algorithm_entry_brings_what_the_platform_needs(name):
    spec = algos.algorithm(name)
    assert isinstance(spec, AlgorithmSpec) and spec.name == name
    assert issubclass(spec.training_section, TrainingBase)
    assert experiment_model(name).model_fields["training"].annotation is spec.training_section
    assert "training_iteration" in spec.result_keys() and "evaluation/env_runners/episode_return_mean" in spec.result_keys()
    assert all(spec.reports(key) for key in spec.result_keys())
    assert spec.speedup(spec.training_section()) > 0


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
    with pytest.raises(InputError, match=r"algorithm 'dqnn' is unknown: did you mean 'dqn'\? \(known: dqn, ppo\)"):
        algos.algorithm("dqnn")


def test_env_families_own_their_tags_data_and_timeframe():
    config = {"symbol": "SOL-USD", "timeframe": "4h", "data_path": None, "source": "synthetic"}
    assert envs.run_tags("trading/Spot-v0", config) == {"symbol": "SOL-USD", "data": "SOL-USD"}
    assert envs.timeframe_of("trading/Spot-v0", config) == "4h"
    assert envs.timeframe_of("agents/TestPrioritization-v0", {"timeframe": "1h"}) is None
    assert envs.run_tags("CartPole-v1", {}) == {"data": "CartPole-v1"}
    assert envs.data_label("agents/TestPrioritization-v0", {"data_path": "/x/ci.csv"}) == "/x/ci.csv"
    assert envs.prepare_data("CartPole-v1", {}, {}, False, print) == []


def test_every_platform_env_has_a_config_model():
    for env_id, entry in envs.ENVIRONMENTS.items():
        assert entry.config_model, env_id
        with pytest.raises(InputError, match="did you mean"):
            envs.check_env_config(env_id, {"splitt": "train"}, "x")


def test_reading_experiment_files_imports_no_ray():
    """Validating a file reads the algorithm table and its training sections; RLlib (and torch with it) is
    imported only to build a config, so a refused file answers without paying that import."""
    confs = [str(path) for path in shipped_experiments()]
    code = ("import sys\nfrom experiments.config import load_experiment\n"
            f"for conf in {confs!r}:\n    load_experiment(conf)\n"
            "print(sorted(m for m in ('ray', 'torch') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", result.stdout
