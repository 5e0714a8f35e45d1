"""The operators, the action table, the auto-dictionary and its libFuzzer form."""

import numpy as np
import pytest

from envs.agents.testgen.atheris_peer import libfuzzer_dict
from envs.agents.testgen.harness import harness
from envs.agents.testgen.mutators import (
    ACTIONS,
    BASES,
    OPERATORS,
    SCHEDULE_PROBABILITIES,
    SCHEDULES,
    Mutator,
    harvest_dictionary,
)
from envs.agents.testgen.programs import source_files


def test_actions_are_every_schedule_on_every_base_and_schedules_are_distributions():
    assert len(ACTIONS) == len(SCHEDULES) * len(BASES) == len(set(ACTIONS))
    for name, probabilities in SCHEDULE_PROBABILITIES.items():
        assert len(probabilities) == len(OPERATORS) and np.isclose(probabilities.sum(), 1.0), name
        assert (probabilities > 0).all(), name  # every schedule keeps every operator possible


@pytest.mark.parametrize("operator", range(len(OPERATORS)))
def test_every_operator_keeps_inputs_within_the_cap(operator):
    cap = 16
    mutator = Mutator((b"x" * 40, b"[", b"true"), cap)
    rng = np.random.default_rng(operator)
    for data in (b"", b"a", b"b" * cap, bytes(range(cap))):
        for _ in range(50):
            other = bytes(rng.integers(0, 256, size=int(rng.integers(0, 40)), dtype=np.uint8))
            result = mutator.mutate(operator, data, other, rng)
            assert isinstance(result, bytes) and len(result) <= cap


def test_operators_change_their_input_and_depend_only_on_the_seed():
    mutator = Mutator((b"true",), 64)
    data, other = b'title = "TOML"', b"[owner]\nname = 1\n"
    for operator in range(len(OPERATORS)):
        first = [mutator.mutate(operator, data, other, np.random.default_rng(7)) for _ in range(3)]
        again = mutator.mutate(operator, data, other, np.random.default_rng(7))
        assert first[0] == again
        changed = [mutator.mutate(operator, data, other, np.random.default_rng(s)) for s in range(20)]
        assert any(result != data for result in changed), OPERATORS[operator]


def test_the_dictionary_is_harvested_from_the_programs_code():
    tokens = harvest_dictionary(source_files(("tomllib",)))
    assert {b"true", b"false", b"inf", b"nan", b"[", b"="} <= set(tokens)  # tomllib's literals and delimiters
    assert all(0 < len(token) <= 16 for token in tokens)
    assert harness("tomllib").dictionary == tokens
    assert b"Content-Type" in harness("email").dictionary or b"content-type" in harness("email").dictionary


def test_the_libfuzzer_dictionary_escapes_quotes_backslashes_and_bytes():
    text = libfuzzer_dict((b'a"b', b"c\\d", b"\x00\xff", b"ok"))
    assert text.splitlines() == ['kw0="a\\x22b"', 'kw1="c\\x5cd"', 'kw2="\\x00\\xff"', 'kw3="ok"']
