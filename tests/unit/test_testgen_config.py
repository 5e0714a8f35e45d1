"""The test-generation env_config: defaults, and one readable line for each mistake."""

import pytest

import envs
from envs.agents.testgen.config import parse_config
from envs.agents.testgen.env import TestGenerationEnv
from envs.errors import InputError


def test_defaults_hold_the_test_program_out():
    config = parse_config(None)
    assert config.split == "train" and config.budget > 0 and config.eval_seeds >= 1
    assert not set(config.test_programs) & set(config.train_programs)


@pytest.mark.parametrize("config, fragment", [
    ({"test_programs": ["tomlib"]},
     "env_config.test_programs: program 'tomlib' is unknown: did you mean 'tomllib'? (known: email, html.parser"),
    ({"test_programs": ["email"]}, "env_config.test_programs: 'email' also in train_programs, so not held out"),
    ({"validation_programs": ["tomllib"]}, "'tomllib' also in validation_programs, so not held out"),
    ({"train_programs": []}, "env_config.train_programs: empty: name at least one program (known: email"),
    ({"test_programs": ["tomllib", "tomllib"]}, "a program is listed twice"),
    ({"budgt": 10}, "unknown key 'env_config.budgt': did you mean 'env_config.budget'?"),
    ({"budget": 0}, "env_config.budget: Input should be greater than or equal to 1"),
    ({"split": "tset"}, "env_config.split: Input should be 'train', 'validation' or 'test'"),
])
def test_mistakes_are_one_line_naming_the_key(config, fragment):
    with pytest.raises(InputError) as error:
        parse_config(config)
    assert fragment in str(error.value) and "\n" not in str(error.value)


def test_the_platform_checks_it_with_the_full_key_path():
    with pytest.raises(InputError, match=r"conf/x.yaml: environment\.env_config\.test_programs: program 'tomlib'"):
        envs.family("agents/TestGeneration-v0").check_config({"test_programs": ["tomlib"]}, "conf/x.yaml",
                              "environment.env_config.")


def test_a_reset_to_a_program_of_another_split_is_refused():
    env = TestGenerationEnv({"split": "test"})
    with pytest.raises(InputError, match="'email' is not a test program"):
        env.reset(options={"program": "email"})
