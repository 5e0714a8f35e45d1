"""Crash findings: exceptions a program does not document, deduplicated, each with the first input.

A finding is identified by (exception type, where it was raised): the innermost traceback frame inside
the program's traced files, else the innermost frame at all (an error raised in a helper the program
calls). Fuzzers hit the same bug thousands of times; counting distinct sites is the usual proxy for
distinct bugs, and the first input that reached a site is kept as its reproducer.
"""
from __future__ import annotations

import sys
import traceback
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

MESSAGE_CHARS = 120


@dataclass(frozen=True)
class Finding:
    """One distinct crash: its exception type, site, message and the first input that raised it."""

    exception: str  # qualified type name, e.g. "RecursionError", "email.errors.HeaderParseError"
    location: str   # "file:line (function)", the file relative to its sys.path entry
    message: str    # the exception's text, truncated
    input: bytes

    @property
    def key(self) -> tuple[str, str]:
        """What identifies the bug: (exception type, site)."""
        return self.exception, self.location


def crash_site(error: BaseException, files: frozenset[str]) -> str:
    """Where `error` was raised: the innermost frame in `files`, else the innermost frame.

    A RecursionError is raised wherever the stack happened to run out, so it is named by its cycle
    instead: among the frames that recur most (within one of the maximum count), the first in source
    order. Nesting arrays and nesting tables in TOML are then two findings, not one per depth."""
    frames = [(frame.f_code, line) for frame, line in traceback.walk_tb(error.__traceback__)]
    if not frames:
        return "?"
    inside = [frame for frame in frames if frame[0].co_filename in files] or frames
    code, line = inside[-1]
    if isinstance(error, RecursionError):
        counts = Counter(inside)
        most = max(counts.values())
        code, line = min((frame for frame, n in counts.items() if n >= most - 1),
                         key=lambda frame: (frame[0].co_filename, frame[1]))
    return f"{_short(code.co_filename)}:{line} ({code.co_name})"


def _short(filename: str) -> str:
    """`filename` relative to the longest sys.path entry that holds it (stable across machines)."""
    path = Path(filename)
    for root in sorted((p for p in sys.path if p), key=len, reverse=True):
        if path.is_relative_to(root):
            return path.relative_to(root).as_posix()
    return path.as_posix()


def exception_name(error: BaseException) -> str:
    """The exception's type, qualified by its module unless it is a builtin."""
    kind = type(error)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


class Findings:
    """The distinct crashes of one run, in the order they were found."""

    def __init__(self, files: frozenset[str]) -> None:
        self.files = files
        self.unique: dict[tuple[str, str], Finding] = {}

    def record(self, error: BaseException, data: bytes) -> bool:
        """Count one crash; True when its (type, site) is new (then `data` is kept as its input)."""
        finding = Finding(exception_name(error), crash_site(error, self.files),
                          str(error)[:MESSAGE_CHARS], bytes(data))
        if finding.key in self.unique:
            return False
        self.unique[finding.key] = finding
        return True

    def __len__(self) -> int:
        return len(self.unique)
