"""Google's Atheris (libFuzzer for Python) on the same program, seeds, dictionary and input cap: the peer.

libFuzzer owns its process (it calls exit() when done and on a crash), so Atheris runs in a child
process: `python -m envs.agents.testgen.atheris_peer` (`_child_main`; Atheris is imported there only).
The child imports the program, adds Atheris' bytecode instrumentation to every function defined in the
program's traced files (the feedback libFuzzer steers by), and fuzzes with `-runs`, `-seed`, `-max_len`,
the seeds as its corpus folder and the auto-dictionary as a `-dict` file. Its TestOneInput runs the same
harness as the environment under the same `ArcTracer`, so coverage is measured identically, records the
coverage after every execution, catches the exceptions the program does not document (libFuzzer would
stop at the first one) and writes it all to a JSON file the parent reads.

Instrumentation goes function by function rather than through `atheris.instrument_imports()`: Atheris
itself imports urllib.parse and ipaddress before any import hook could see them, and
`atheris.instrument_all()` would also instrument our tracer and harness, feeding libFuzzer coverage of
our own bookkeeping. The program is warmed up (`envs.agents.testgen.harness`) before it is instrumented,
as in the environment's process. Atheris' rewritten bytecode gives the tracer the arcs of the plain code
(checked on every program's seeds), except one extra self-arc on a `yield from` line of email.iterators.
The same -seed gives close but not always identical runs (a few arcs apart at 2,000 executions).

Budget: libFuzzer first executes the empty input, then each seed, then `budget` mutants; `-runs` counts
all of them, so it is 1 + seeds + budget, and the curve starts (index 0) after that initial corpus, as
the environment's episodes start after their seeds. The extra empty-input execution can only add coverage
to Atheris' starting point. The child refuses non-loopback network access (an audit hook); none of the
programs reaches for the network.
"""
from __future__ import annotations

import gc
import importlib.util
import ipaddress
import json
import os
import subprocess
import sys
import tempfile
import time
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from envs.agents.testgen.coverage_tracer import CoverageMap
from envs.agents.testgen.findings import Finding, Findings
from envs.agents.testgen.harness import harness
from envs.agents.testgen.programs import program

REPO = Path(__file__).resolve().parents[3]
MIN_EXECS_PER_S = 50  # the child is given 60 s plus the budget at this rate before it is stopped
NOT_INSTALLED = "atheris not installed (pip install atheris==3.0.0): no peer row"


@dataclass(frozen=True)
class PeerRun:
    """One Atheris run: coverage after the initial corpus (index 0) and after each later execution."""

    curve: np.ndarray
    lines: int
    findings: list[Finding]
    execs_per_s: float


def atheris_installed() -> bool:
    """Whether the child can import atheris (checked without importing it here)."""
    return importlib.util.find_spec("atheris") is not None


def run_atheris(name: str, budget: int, seed: int, max_input_bytes: int) -> PeerRun:
    """Fuzz program `name` with Atheris for `budget` executions after its seeds; RuntimeError if the child
    fails."""
    target = program(name)
    with tempfile.TemporaryDirectory(prefix="testgen-atheris-") as folder:
        work = Path(folder)
        corpus = work / "corpus"
        corpus.mkdir()
        for index, data in enumerate(target.seeds):
            (corpus / f"seed{index}").write_bytes(data[:max_input_bytes])
        dictionary = work / "auto.dict"
        dictionary.write_text(libfuzzer_dict(harness(name).dictionary), encoding="ascii")
        result = work / "result.json"
        total = 1 + len(target.seeds) + budget
        # libFuzzer reads -seed=0 as "seed from the clock": shift by one so every seed is reproducible.
        flags = [f"-runs={total}", f"-seed={seed + 1}", f"-max_len={max_input_bytes}", f"-dict={dictionary}",
                 f"-artifact_prefix={work}/", "-print_final_stats=0", str(corpus)]
        job = {"program": name, "executions": total, "start": 1 + len(target.seeds), "out": str(result)}
        path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        completed = subprocess.run(
            [sys.executable, "-m", "envs.agents.testgen.atheris_peer", json.dumps(job), *flags], cwd=work,
            env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True,
            timeout=60 + budget / MIN_EXECS_PER_S, check=False)
        if not result.exists():
            tail = " | ".join(completed.stderr.strip().splitlines()[-3:])
            raise RuntimeError(f"atheris on {name} wrote no result (exit {completed.returncode}): {tail}")
        report = json.loads(result.read_text(encoding="utf-8"))
    findings = [Finding(item["exception"], item["location"], item["message"], bytes.fromhex(item["input"]))
                for item in report["findings"]]
    curve = np.asarray(report["curve"], dtype=np.int64)
    return PeerRun(curve, report["lines"], findings, report["execs_per_s"])


def libfuzzer_dict(tokens: tuple[bytes, ...]) -> str:
    """A libFuzzer dictionary file: one `kwN="..."` line per token; quotes, backslashes and bytes outside
    printable ASCII written as \\xNN (libFuzzer's escape)."""
    def escape(token: bytes) -> str:
        return "".join(chr(b) if 0x20 <= b < 0x7F and b not in b'"\\' else f"\\x{b:02x}" for b in token)
    return "".join(f'kw{index}="{escape(token)}"\n' for index, token in enumerate(tokens))


def _loopback_only(event: str, args: tuple[Any, ...]) -> None:
    """Audit hook: refuse any socket use that names a host other than loopback."""
    if event in ("socket.connect", "socket.sendto", "socket.bind"):
        address = args[-1]
        host = address[0] if isinstance(address, tuple) else None  # AF_UNIX paths are local
    elif event == "socket.getaddrinfo":
        host = args[0]
    else:
        return
    if host is None or host in ("", "localhost") or _is_loopback(host):
        return
    raise PermissionError(f"the Atheris peer stays on loopback: {event} to {host!r} refused")


def _is_loopback(host: Any) -> bool:
    try:
        return ipaddress.ip_address(host.decode() if isinstance(host, bytes) else host).is_loopback
    except ValueError:
        return False


def _instrument(atheris: Any, files: frozenset[str]) -> int:
    """Add Atheris' instrumentation to every function defined in `files`; returns how many."""
    functions = [obj for obj in gc.get_objects()
                 if isinstance(obj, types.FunctionType) and obj.__code__.co_filename in files]
    for function in functions:
        atheris.instrument_func(function)
    return len(functions)


def _child_main(job: dict[str, Any], libfuzzer_flags: list[str]) -> None:
    """In the child: fuzz, measure each execution with ArcTracer, write the JSON result at the last one."""
    import atheris  # noqa: PLC0415 - only the child imports it (libFuzzer takes over the process)

    sys.addaudithook(_loopback_only)
    prepared = harness(job["program"])  # warmed up exactly as in the environment's process
    _instrument(atheris, prepared.files)
    prepared.fresh()
    coverage, findings = CoverageMap(), Findings(prepared.files)
    curve: list[int] = []
    started = [0.0]

    def test_one_input(data: bytes) -> None:
        execution, outcome = prepared.execute(data)
        coverage.add(execution.arcs)
        if outcome == "crash":
            findings.record(execution.error, data)
        curve.append(coverage.arcs)
        if len(curve) == job["start"]:
            started[0] = time.perf_counter()
        if len(curve) == job["executions"]:
            elapsed = time.perf_counter() - started[0]
            report = {"curve": curve[job["start"] - 1 :], "lines": coverage.lines(),
                      "execs_per_s": (len(curve) - job["start"]) / elapsed if elapsed > 0 else 0.0,
                      "findings": [{"exception": f.exception, "location": f.location, "message": f.message,
                                    "input": f.input.hex()} for f in findings.unique.values()]}
            Path(job["out"]).write_text(json.dumps(report), encoding="utf-8")

    atheris.Setup([sys.argv[0], *libfuzzer_flags], test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    _child_main(json.loads(sys.argv[1]), sys.argv[2:])
