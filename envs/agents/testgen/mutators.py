"""The discrete moves of a fuzzer: mutation schedules over byte-level operators, applied to the current input
or to corpus entries.

An action is (schedule, base): the agent picks *what kind* of change (a schedule: a distribution over the
operators, as MOpt schedules AFL's havoc operators) and *where from* (the input that found coverage last, a
random corpus entry, or either). The operator of each execution is drawn from the schedule and its
randomness (position, chunk, token) from the episode's seeded generator. Single operators as actions were
measured first: every fixed operator covered less than picking operators at random (the diversity of havoc
is what finds coverage), so a policy over single operators could at best tie random; schedules keep that
diversity inside every action and leave the agent the choice of its mix. The operators are AFL's classic
set (bit flip, interesting byte, insert, delete, duplicate, dictionary tokens, splice), so the baselines and
the agent search the same neighbourhood and only the choice among schedules differs.

The dictionary is harvested from the program itself, like AFL's auto-dictionary: every short str/bytes
constant in the code objects of its traced source files (keywords, delimiters, header names). No
program gets hand-written tokens, so a new table entry needs none.
"""
from __future__ import annotations

from pathlib import Path
from types import CodeType
from typing import Iterable, Iterator

import numpy as np

OPERATORS = ("flip_bit", "interesting_byte", "insert_printable", "delete_chunk", "duplicate_chunk",
             "insert_token", "overwrite_token", "splice")
# Schedule -> relative weight of each operator (in OPERATORS order).
SCHEDULES: dict[str, tuple[float, ...]] = {
    "uniform": (1, 1, 1, 1, 1, 1, 1, 1),
    "bytes": (3, 3, 3, 0.5, 0.5, 0.5, 0.5, 0.5),      # small edits: flips, interesting and printable bytes
    "tokens": (0.5, 0.5, 0.5, 0.5, 0.5, 3, 3, 0.5),   # the program's own constants
    "blocks": (0.5, 0.5, 0.5, 3, 3, 0.5, 0.5, 3),     # delete, duplicate, splice: structure
}
SCHEDULE_PROBABILITIES = {name: np.asarray(w) / np.sum(w) for name, w in SCHEDULES.items()}
BASES = ("current", "corpus", "either")
# Action index -> (schedule, base): every schedule on the current input, then on corpus entries, then on either.
ACTIONS: tuple[tuple[str, str], ...] = tuple((schedule, base) for base in BASES for schedule in SCHEDULES)

# AFL's interesting 8-bit values (0, 1, powers of two, 100, the signed extremes) as unsigned bytes.
INTERESTING = np.array([0x80, 0xFF, 0, 1, 16, 32, 64, 100, 127], dtype=np.uint8)
PRINTABLE = np.arange(0x20, 0x7F, dtype=np.uint8)
MAX_CHUNK = 32      # longest chunk deleted or duplicated at once
MAX_TOKEN_BYTES = 16  # longest constant kept in the auto-dictionary (AFL: 32; parsers' tokens are short)


def harvest_dictionary(files: Iterable[str], max_len: int = MAX_TOKEN_BYTES) -> tuple[bytes, ...]:
    """The distinct str/bytes constants of 1..max_len bytes in the code of `files`, shortest first."""
    tokens: set[bytes] = set()
    for file in files:
        code = compile(Path(file).read_text(encoding="utf-8"), file, "exec", dont_inherit=True)
        for constant in _constants(code):
            token = constant.encode("utf-8") if isinstance(constant, str) else constant
            if 0 < len(token) <= max_len:
                tokens.add(token)
    return tuple(sorted(tokens, key=lambda token: (len(token), token)))


def _constants(code: CodeType) -> Iterator[str | bytes]:
    for constant in code.co_consts:
        if isinstance(constant, (str, bytes)):
            yield constant
        elif isinstance(constant, CodeType):
            yield from _constants(constant)
        elif isinstance(constant, (tuple, frozenset)):  # `x in ("a", "b")` folds into one constant
            yield from (item for item in constant if isinstance(item, (str, bytes)))


class Mutator:
    """Applies operator i of OPERATORS to an input; every result is at most `max_input_bytes` long."""

    def __init__(self, dictionary: tuple[bytes, ...], max_input_bytes: int) -> None:
        self.dictionary = dictionary
        self.max_input_bytes = max_input_bytes

    def mutate(self, operator: int, data: bytes, other: bytes, rng: np.random.Generator) -> bytes:
        """One mutation of `data`; `other` is the corpus entry a splice takes its tail from.

        On an empty input the operators that change existing bytes (flip, interesting byte, delete,
        duplicate) return it unchanged: a wasted execution the policy can learn to avoid."""
        buffer = bytearray(data)
        name = OPERATORS[operator]
        n = len(buffer)
        if name == "flip_bit" and n:
            buffer[rng.integers(n)] ^= 1 << int(rng.integers(8))
        elif name == "interesting_byte" and n:
            buffer[rng.integers(n)] = int(rng.choice(INTERESTING))
        elif name == "insert_printable":
            buffer.insert(int(rng.integers(n + 1)), int(rng.choice(PRINTABLE)))
        elif name == "delete_chunk" and n:
            start, length = self._chunk(n, rng)
            del buffer[start : start + length]
        elif name == "duplicate_chunk" and n:
            start, length = self._chunk(n, rng)
            buffer[start:start] = buffer[start : start + length]
        elif name in ("insert_token", "overwrite_token") and self.dictionary:
            token = self.dictionary[int(rng.integers(len(self.dictionary)))]
            at = int(rng.integers(n + 1))
            buffer[at : at + (len(token) if name == "overwrite_token" else 0)] = token
        elif name == "splice":
            buffer = buffer[: rng.integers(n + 1)] + other[rng.integers(len(other) + 1) :]
        return bytes(buffer[: self.max_input_bytes])

    @staticmethod
    def _chunk(n: int, rng: np.random.Generator) -> tuple[int, int]:
        length = int(rng.integers(1, min(n, MAX_CHUNK) + 1))
        return int(rng.integers(n - length + 1)), length
