"""The experiment file describes itself: every key has a description, `python -m experiments.config explain KEY`
reads it with the type, bounds, default and owners, and conf/experiment.schema.json (the editors' schema, named
by every experiment file's modeline) is the schema the models give today."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel, Field

from envs.validation import StrictModel
from experiments.config import catalog
from experiments.config.__main__ import main
from experiments.config.explain import explain
from experiments.config.listing import is_listing
from experiments.config.schema import SCHEMA_FILE, experiment_schema, schema_text
from experiments.shell import exit_code
from tests.conftest import REPO

STUDY = sorted((REPO / "conf" / "study").glob("*.yaml"))
EXPERIMENTS = [path for path in sorted((REPO / "conf").glob("*.yaml")) if not is_listing(path)]
LISTINGS = [path for path in sorted((REPO / "conf").glob("*.yaml")) if is_listing(path)]
HARDWARE = sorted((REPO / "conf" / "hardware").glob("*.yaml"))
MODELINE = "# yaml-language-server: $schema={}experiment.schema.json"


@pytest.fixture(scope="module")
def schema() -> dict:
    return experiment_schema()


def test_the_committed_schema_is_the_one_the_models_give():
    assert SCHEMA_FILE == REPO / "conf" / "experiment.schema.json"
    assert SCHEMA_FILE.read_text() == schema_text(), (
        "conf/experiment.schema.json is stale: .venv/bin/python -m experiments.config schema > "
        "conf/experiment.schema.json")


class _Inner(StrictModel):
    described: int = Field(default=1, description="a key with a description")
    bare: int = 0


class _Tiny(StrictModel):
    inner: _Inner = Field(default_factory=_Inner, description="a section")
    choice: list[_Inner] | None = Field(default=None, description="models inside other types are found too")


def test_every_key_of_every_model_has_a_description():
    models = catalog.all_models()
    names = {model.__name__ for model in models}
    # the walk reaches the algorithms' and the env families' models and the nested sections
    assert {"DQNTraining", "PPOTraining", "SACTraining", "TradingConfig", "PortfolioConfig", "PrioritizationConfig",
            "TestGenerationConfig", "SelectSection", "ReplayBufferSection", "GateSection"} <= names
    assert catalog.undescribed(models) == []
    # the check can fail: a field without a description, two levels down, is found
    assert catalog.models_under([_Tiny]) == [_Tiny, _Inner]
    assert catalog.undescribed(catalog.models_under([_Tiny])) == ["_Inner.bare"]


def test_explain_a_training_key_names_each_algorithm_and_its_default():
    text = explain("training.n_step")
    assert "Rewards summed before bootstrapping" in text
    assert "type:     int" in text and "bounds:   >= 1" in text
    assert "default:  3" in text and "algorithm dqn" in text  # DQN's
    assert "default:  1" in text and "algorithm sac" in text  # SAC's
    assert "ppo" not in text
    lr = explain("training.lr")
    assert "default:  0.0005 (dqn), 0.0003 (ppo)" in lr and "algorithm sac" in lr and "> 0" in lr


def test_explain_an_env_config_key_names_its_env_families():
    text = explain("environment.env_config.fee_bps")
    assert "basis points" in text and "type:     float" in text and "bounds:   >= 0, < 10000" in text
    assert "default:  10.0" in text and "env families trading/Spot-v0, trading/Portfolio-v0" in text
    prio = explain("environment.env_config.time_budget")
    assert "agents/TestPrioritization-v0, agents/TestPrioritizationPairwise-v0" in prio
    assert "> 0, <= 1" in prio and "default:  0.5" in prio


def test_explain_a_section_lists_its_keys():
    text = explain("tune.checkpoint")
    assert "every experiment" in text
    for key in ("frequency", "num_to_keep", "select (section)"):
        assert f"    {key}" in text
    assert "Score a checkpoint by the mean" in explain("tune.checkpoint.select.smooth")
    training = explain("training")
    assert "minibatch_size" in training and "[ppo]" in training and "replay_buffer (section)" in training
    assert "extends" in explain("")


def test_an_unknown_key_is_one_line_and_exit_2(capsys):
    assert exit_code(lambda: main(["explain", "training.n_stepp"])) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown key 'training.n_stepp': did you mean 'training.n_step'?")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert exit_code(lambda: main(["explain", "tune.checkpoint.selct.smooth"])) == 2
    assert "did you mean 'tune.checkpoint.select.smooth'" in capsys.readouterr().err
    assert exit_code(lambda: main(["explain", "environment.env_config.fee_bpss"])) == 2
    assert "did you mean 'environment.env_config.fee_bps'" in capsys.readouterr().err


def test_every_experiment_file_names_the_schema_on_its_second_line():
    assert EXPERIMENTS and STUDY and LISTINGS and HARDWARE
    for path in EXPERIMENTS:
        lines = path.read_text().splitlines()
        assert lines[0].startswith("# Run:") and lines[1] == MODELINE.format(""), path.name
    for path in STUDY:
        assert path.read_text().splitlines()[1] == MODELINE.format("../"), path.name
    for path in [*LISTINGS, *HARDWARE]:  # not experiment files: the schema would refuse them
        assert "yaml-language-server" not in path.read_text(), path.name


def test_no_key_is_required_and_search_forms_are_accepted(schema):
    assert '"required"' not in json.dumps(schema)
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft7Validator(schema)
    assert validator.is_valid({})
    assert validator.is_valid({"tune": {"search_space": {"training.lr": {"loguniform": ["1e-4", 1e-3]},
                                                         "training.n_step": None}}})
    assert not validator.is_valid({"tune": {"search_space": {"training.lr": {"loguniform": [1e-4]}}}})
    assert not validator.is_valid({"training": {"minibatch_size": 64}})  # dqn's when no algorithm is named
    assert validator.is_valid({"algorithm": "ppo", "training": {"minibatch_size": 64}})
    assert validator.is_valid({"extends": "ppo_btc.yaml", "training": {"minibatch_size": 64}})  # the base's
    assert not validator.is_valid({"environment": {"env": "trading/Spot-v0", "env_config": {"fee_bp": 1}}})
    assert validator.is_valid({"environment": {"env": "CartPole-v1", "env_config": {"render_mode": None}}})


@pytest.mark.parametrize("path", [*EXPERIMENTS, *STUDY], ids=lambda path: path.stem)
def test_every_shipped_experiment_file_validates_against_the_schema(path: Path, schema):
    jsonschema = pytest.importorskip("jsonschema")
    errors = [f"{'.'.join(map(str, error.absolute_path))}: {error.message}"
              for error in jsonschema.Draft7Validator(schema).iter_errors(yaml.safe_load(path.read_text()))]
    assert not errors, errors


def test_the_explained_models_are_the_ones_a_file_is_validated_with():
    """explain and the schema read catalog's models: the same ones experiment_model and the families use."""
    from experiments.config.experiment import experiment_model

    for algorithm, model in catalog.training_models().items():
        assert experiment_model(algorithm).model_fields["training"].annotation is model
    assert all(issubclass(model, BaseModel) for model in catalog.env_config_models().values())
