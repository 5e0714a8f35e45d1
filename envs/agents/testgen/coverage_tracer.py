"""Arc coverage of one execution of a program under test, measured with coverage.py's C tracer.

An arc is (from_line, to_line) inside one traced source file (negative lines: entering or leaving a code
object), coverage.py's branch measure. The C tracer packs each arc into one int, so an execution yields
a set of small ints per file and "what is new" is one C-level set difference per file.

The tracer is installed around one call only (`ArcTracer.run`): it never sees the fuzzer, the policy or
anything else, and whatever trace function was set before (a debugger, pytest-cov) is put back after.
Files outside the program's modules are refused once (`should_trace` answers are cached per file name)
and cost the C tracer a pointer check per event.

We drive `coverage.tracer.CTracer` directly, an internal API of coverage.py (pinned exactly for that
reason): Python 3.11 has no sys.monitoring, and a pure-Python `sys.settrace` tracer (a global function
that hands a per-frame line tracer to traced frames only) was measured 2.0-2.7x slower on every program
(executions/s on the seeds and 300 seeded mutants each, best of 3, one core of a 2-core AMD EPYC, the same
arcs recorded; the Python tracer was then deleted):

| program      | no tracer | CTracer | sys.settrace in Python |
|--------------|----------:|--------:|-----------------------:|
| html.parser  |    80,705 |  26,128 |                 12,237 |
| urllib.parse |   131,293 |  31,460 |                 13,653 |
| email        |     2,697 |     996 |                    374 |
| tomllib      |    80,015 |  15,814 |                  5,852 |
| http.cookies |   129,152 |  51,329 |                 25,178 |
| markdown-it  |     6,452 |   1,042 |                    413 |

`python -m experiments.benchmark testgen` measures the environment's rate against Atheris' in one run.
"""
from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from types import FrameType
from typing import Callable, Iterable

from coverage.tracer import CFileDisposition, CTracer

# Per traced file name: the packed arcs (coverage.py's `from_line | to_line << 28`, sign bits 56 and 57).
Arcs = dict[str, set[int]]


def unpack_arc(packed: int) -> tuple[int, int]:
    """(from_line, to_line) of one packed arc (coverage.collector.flush_data's decoding)."""
    from_line, to_line = packed & 0xFFFFFFF, (packed >> 28) & 0xFFFFFFF
    return (-from_line if packed & (1 << 56) else from_line), (-to_line if packed & (1 << 57) else to_line)


@dataclass(frozen=True)
class Execution:
    """What one call did: its arcs and the exception it raised (None: the input was accepted)."""

    arcs: Arcs
    error: Exception | None


class ArcTracer:
    """Runs a callable under coverage.py's C tracer, recording arcs in `files` only."""

    def __init__(self, files: Iterable[str]) -> None:
        self.files = frozenset(files)
        self._tracer = CTracer()
        self._tracer.should_trace = self._should_trace
        self._tracer.should_trace_cache = {}
        self._tracer.trace_arcs = True
        self._tracer.warn = _ignore
        self._tracer.lock_data = self._tracer.unlock_data = _ignore
        self._tracer.file_tracers = {}
        for hook in ("check_include", "concur_id_func", "disable_plugin", "should_start_context",
                     "switch_context"):
            setattr(self._tracer, hook, None)
        self._caches = _caches_in(self.files)

    def clear_caches(self) -> None:
        """Empty the lru_caches of functions in the traced files (urlsplit, tomllib's cached_tz, ...).

        A warm cache skips the body it memoizes, so the same input covers fewer arcs the second time in a
        process: call this before each run that must measure like a fresh process (an episode)."""
        for wrapper in self._caches:
            wrapper.cache_clear()

    def run(self, function: Callable[[bytes], None], data: bytes) -> Execution:
        """`function(data)` with the tracer on for exactly that call; its exception is returned, not raised.

        Exceptions that are not errors of the program (KeyboardInterrupt, SystemExit) propagate."""
        arcs: Arcs = {}
        self._tracer.data = arcs
        previous = sys.gettrace()
        error: Exception | None = None
        self._tracer.start()
        try:
            function(data)
        except Exception as exc:  # noqa: BLE001 - every exception of the program is an outcome to classify
            error = exc
        finally:
            self._tracer.stop()
            sys.settrace(previous)
        return Execution(arcs, error)

    def _should_trace(self, filename: str, frame: FrameType) -> CFileDisposition:
        disposition = CFileDisposition()
        traced = filename in self.files
        disposition.original_filename = disposition.canonical_filename = filename
        disposition.source_filename = filename if traced else None
        disposition.trace = traced
        disposition.reason = "" if traced else "not a module of the program under test"
        disposition.file_tracer = None
        disposition.has_dynamic_filename = False
        return disposition


def _caches_in(files: frozenset[str]) -> list[functools._lru_cache_wrapper]:
    """The functools.lru_caches of the modules loaded from `files`, at module level and in their classes.

    Only those modules' namespaces are searched: scanning every object in the process (gc) would take
    seconds in an RLlib worker and touch unrelated objects."""
    modules = [module for module in list(sys.modules.values()) if getattr(module, "__file__", None) in files]
    found: dict[int, functools._lru_cache_wrapper] = {}
    for module in modules:
        values = list(vars(module).values())
        values += [v for cls in values if isinstance(cls, type) for v in vars(cls).values()]
        for value in values:
            code = getattr(getattr(value, "__wrapped__", None), "__code__", None)
            if isinstance(value, functools._lru_cache_wrapper) and code is not None and code.co_filename in files:
                found[id(value)] = value
    return list(found.values())


def _ignore(*_: object) -> None:
    """The tracer's warn/lock hooks: one thread, nothing to lock, nothing it warns about applies."""


class CoverageMap:
    """Every arc seen so far, per file; `add` says how many of an execution's arcs are new."""

    def __init__(self) -> None:
        self._seen: Arcs = {}
        self.arcs = 0

    def add(self, arcs: Arcs) -> int:
        """Merge one execution's arcs; returns how many were not seen before."""
        new = 0
        for file, packed in arcs.items():
            seen = self._seen.setdefault(file, set())
            before = len(seen)
            seen |= packed
            new += len(seen) - before
        self.arcs += new
        return new

    def lines(self) -> int:
        """Distinct (file, line) pairs reached: the positive ends of the arcs."""
        return sum(len({line for packed in arcs for line in unpack_arc(packed) if line > 0})
                   for arcs in self._seen.values())
