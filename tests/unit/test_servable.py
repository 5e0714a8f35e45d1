"""An algorithm whose policy can be served is one entry: its SPEC's numpy export (algos.spec.NumpyExport) is all
algos/numpy_policy.py knows of it, and `algos.spec.check_servable` refuses, before Ray starts and before any training,
a spec whose best policy registration would refuse after the whole sweep."""
from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys

import pytest

import algos
from algos.dqn import SPEC as DQN_SPEC
from algos.ppo import SPEC as PPO_SPEC
from algos.sac import SPEC as SAC_SPEC
from algos.spec import AlgorithmSpec, GreedyRule, NumpyExport, TrainingBase, check_servable
from envs.errors import InputError
from tests.conftest import REPO


def _refusal(name: str, spec: AlgorithmSpec) -> str:
    with pytest.raises(InputError) as refusal:
        check_servable(name, spec)
    message = str(refusal.value)
    assert message.startswith(f"algorithm: {name}") and "\n" not in message
    return message


@pytest.mark.parametrize("name", list(algos.ALGORITHMS))
def test_every_shipped_algorithm_can_be_served(name):
    spec = algos.algorithm(name)
    assert check_servable(name, spec) is None  # accepted before Ray starts
    export = spec.export
    # what the check accepted: a numpy export, serving every action-space kind the spec declares
    assert export is not None and export.module and all(export.serves(kind) for kind in spec.action_spaces)


def test_a_made_up_algorithm_without_a_numpy_export_is_refused_before_training():
    made_up = AlgorithmSpec(name="made_up", training_section=TrainingBase, build=lambda inputs: None,
                            trainable=lambda training: "X", greedy=GreedyRule(output="actions"),
                            action_spaces=("discrete",))
    message = _refusal("made_up", made_up)
    assert "no numpy export" in message and "export=NumpyExport(" in message


@pytest.mark.parametrize("spec, rule, fix", [
    (DQN_SPEC, GreedyRule(output="action_dist_inputs", squash=True), "set argmax=True"),
    (DQN_SPEC, GreedyRule(output="action_dist_inputs", box_mean=True), "set argmax=True"),
    (SAC_SPEC, GreedyRule(output="action_dist_inputs"), "set squash=True"),
    (PPO_SPEC, GreedyRule(output="action_dist_inputs", argmax=True), "box_mean=True"),  # its portfolio module's Box
])
def test_a_greedy_rule_that_does_not_match_the_export_is_refused(spec, rule, fix):
    message = _refusal(spec.name, dataclasses.replace(spec, greedy=rule))
    assert "does not match its numpy export" in message and fix in message


def test_an_action_space_no_export_serves_is_refused():
    message = _refusal("dqn", dataclasses.replace(DQN_SPEC, action_spaces=("discrete", "box")))
    assert "action_spaces names box but its numpy export serves no box policy" in message
    portfolio_only = NumpyExport(portfolio_module="algos.portfolio_module:PortfolioPPOModule")
    message = _refusal("ppo", dataclasses.replace(PPO_SPEC, export=portfolio_only))
    assert "serves no discrete policy" in message


@pytest.mark.parametrize("fields, refusal", [
    ({}, "name the RLModule class it exports"),
    ({"module": "DefaultDQNTorchRLModule", "nets": lambda module: None, "layouts": (("encoder", "q"),)},
     "is not a class path 'package.module:Class'"),
    ({"module": "ray.x:Module"}, "give its nets"),
    ({"module": "ray.x:Module", "nets": lambda module: None, "layouts": (("encoder", "pi", "q"),)},
     "is not an encoder and one head, or an encoder and the dueling af and vf"),
    ({"module": "ray.x:Module", "nets": lambda module: None, "layouts": (("pi",),)}, "is not an encoder"),
])
def test_a_malformed_numpy_export_is_refused_when_its_spec_is_built(fields, refusal):
    with pytest.raises(InputError, match=refusal):
        NumpyExport(**fields)


def test_the_numpy_policy_names_no_algorithm():
    """What numpy_policy must know of an algorithm comes from its SPEC: no key of the algorithm table is spelled in
    its code (docstrings and comments may name them)."""
    tree = ast.parse((REPO / "algos" / "numpy_policy.py").read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and ast.get_docstring(node)}
    spelled = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and id(node) not in docstrings
               and isinstance(node.value, str) and node.value in algos.ALGORITHMS}
    assert spelled == set()


def test_the_check_imports_neither_torch_nor_ray():
    code = ("import sys, algos; from algos.spec import check_servable; "
            "[check_servable(name, algos.algorithm(name)) for name in algos.ALGORITHMS]; "
            "print(sorted(m for m in ('torch', 'ray') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            cwd=REPO, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
