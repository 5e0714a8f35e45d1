"""An algorithm whose policy can be served is one entry: its learner's numpy layouts (algos.base.NumpyLayouts) are all
algos/export/numpy_policy.py knows of it, and `algos.base.check_servable` refuses, before Ray starts and before any
training, an algorithm whose best policy registration would refuse after the whole sweep."""
from __future__ import annotations

import ast
import copy
import subprocess
import sys

import pytest

import algos
from algos.base import Algorithm, NumpyLayouts, check_servable, check_servable_space
from algos.greedy import GreedyRule
from envs.errors import InputError
from tests.conftest import REPO


def _refusal(name: str, algorithm: Algorithm) -> str:
    with pytest.raises(InputError) as refusal:
        check_servable(name, algorithm)
    message = str(refusal.value)
    assert message.startswith(f"algorithm: {name}") and "\n" not in message
    return message


def _changed(name: str, **attributes: object) -> Algorithm:
    """A copy of the table's entry `name` with other attributes (the table's own entry unchanged)."""
    changed = copy.copy(algos.algorithm(name))
    for key, value in attributes.items():
        setattr(changed, key, value)
    return changed


def _with_layouts(name: str, layouts: NumpyLayouts | None) -> Algorithm:
    """A copy of entry `name` whose learner's numpy export may hold `layouts`."""
    learner = copy.copy(algos.algorithm(name).learner)
    learner.numpy_layouts = layouts
    return _changed(name, learner=learner)


@pytest.mark.parametrize("name", list(algos.ALGORITHMS))
def test_every_shipped_algorithm_can_be_served(name):
    algorithm = algos.algorithm(name)
    assert check_servable(name, algorithm) is None  # accepted before Ray starts
    layouts = algorithm.learner.numpy_layouts
    # what the check accepted: a numpy export, serving every action-space kind the entry declares
    assert layouts is not None and layouts.default and all(layouts.serves(kind) for kind in algorithm.action_spaces)


def test_a_made_up_algorithm_without_a_numpy_export_is_refused_before_training():
    message = _refusal("made_up", _with_layouts("dqn", None))
    assert "no numpy export" in message and "numpy_layouts and export_nets" in message


@pytest.mark.parametrize("name, rule, fix", [
    ("dqn", GreedyRule(output="action_dist_inputs", squash=True), "set argmax=True"),
    ("dqn", GreedyRule(output="action_dist_inputs", box_mean=True), "set argmax=True"),
    ("sac", GreedyRule(output="action_dist_inputs"), "set squash=True"),
    ("ppo", GreedyRule(output="action_dist_inputs", argmax=True), "box_mean=True"),  # its portfolio module's Box
])
def test_a_greedy_rule_that_does_not_match_the_export_is_refused(name, rule, fix):
    message = _refusal(name, _changed(name, greedy=rule))
    assert "does not match its numpy export" in message and fix in message


def test_an_action_space_no_export_serves_is_refused():
    message = _refusal("dqn", _changed("dqn", action_spaces=("discrete", "box")))
    assert "action_spaces names box but its numpy export serves no box policy" in message
    message = _refusal("ppo", _with_layouts("ppo", NumpyLayouts(portfolio=True)))
    assert "serves no discrete policy" in message


@pytest.mark.parametrize("fields, refusal", [
    ({}, "give the default module's layouts, or portfolio=True"),
    ({"default": (("encoder", "pi", "q"),)}, "is not an encoder and one head, or an encoder and the dueling af and vf"),
    ({"default": (("pi",),)}, "is not an encoder"),
])
def test_malformed_numpy_layouts_are_refused_when_the_learner_is_defined(fields, refusal):
    with pytest.raises(InputError, match=refusal):
        NumpyLayouts(**fields)


def test_the_numpy_side_names_no_algorithm():
    """What the numpy policy and the exports must know of an algorithm comes from its entry: no key of the algorithm
    table is spelled in their code (docstrings and comments may name them)."""
    paths = [*(REPO / "algos" / "export").glob("*.py"), REPO / "algos" / "rllib" / "export.py",
             REPO / "algos" / "networks" / "portfolio_numpy.py"]
    for path in paths:
        tree = ast.parse(path.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and ast.get_docstring(node)}
        spelled = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
                   and id(node) not in docstrings and isinstance(node.value, str) and node.value in algos.ALGORITHMS}
        assert spelled == set(), path.relative_to(REPO)


def test_the_check_imports_neither_torch_nor_ray():
    code = ("import sys, algos; from algos.base import check_servable; "
            "[check_servable(name, algos.algorithm(name)) for name in algos.ALGORITHMS]; "
            "print(sorted(m for m in ('torch', 'ray') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            cwd=REPO, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_default_module_in_a_space_its_export_does_not_serve_is_refused_before_training(tmp_path):
    """PPO's default module exports in discrete spaces only: on a one-asset continuous env it would train its whole
    sweep and then fail to register, so the dry run refuses it in one line naming the algorithms that fit; a portfolio
    model (training.model) exports a Box, and the direct learner's default module does."""
    import gymnasium as gym

    from experiments.config.load import load_experiment

    box = gym.spaces.Box(0.0, 1.0, (1,))
    ppo = load_experiment(REPO / "conf" / "ppo_btc.yaml")
    with pytest.raises(InputError, match=r"^algorithm: ppo with its default module .* box action space.*use "
                                         r"algorithm: .*direct"):
        check_servable_space("ppo", algos.algorithm("ppo"), box, ppo.training)
    check_servable_space("ppo", algos.algorithm("ppo"), gym.spaces.Discrete(3), ppo.training)
    check_servable_space("direct", algos.algorithm("direct"), box, load_experiment(REPO / "conf" / "direct_btc.yaml")
                         .training)
    portfolio = load_experiment(REPO / "conf" / "ppo_portfolio_crypto.yaml")
    assert portfolio.training.model != "default"
    check_servable_space("ppo", algos.algorithm("ppo"), box, portfolio.training)
