"""The arc tracer, the harness and crash findings, on the real programs under test."""

import sys

import pytest

from envs.agents.testgen.coverage_tracer import ArcTracer, CoverageMap, unpack_arc
from envs.agents.testgen.findings import Findings
from envs.agents.testgen.harness import Harness, harness
from envs.agents.testgen.programs import PROGRAMS, Program, source_files


def arcs_of(name: str, data: bytes) -> CoverageMap:
    prepared = harness(name)
    prepared.fresh()
    coverage = CoverageMap()
    coverage.add(prepared.execute(data)[0].arcs)
    return coverage


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_seed_covers_more_than_the_empty_input_and_only_the_programs_files(name):
    prepared = harness(name)
    prepared.fresh()
    execution, outcome = prepared.execute(max(PROGRAMS[name].seeds, key=len))
    assert outcome == "accepted"
    assert sum(map(len, execution.arcs.values())) > arcs_of(name, b"").arcs > 0
    assert set(execution.arcs) <= set(source_files(PROGRAMS[name].modules))
    lines = {line for arcs in execution.arcs.values() for packed in arcs for line in unpack_arc(packed)}
    assert 0 not in lines and any(line < 0 for line in lines) and any(line > 0 for line in lines)


def test_the_tracer_sees_no_code_outside_its_files():
    def outside(data: bytes) -> None:
        sum(range(len(data)))

    assert ArcTracer([__file__]).run(outside, b"abc").arcs.keys() == {__file__}
    assert ArcTracer(source_files(("tomllib",))).run(outside, b"abc").arcs == {}


def test_the_previous_trace_function_is_restored_and_sees_nothing_of_the_program():
    seen_files = set()

    def previous(frame, event, arg):
        seen_files.add(frame.f_code.co_filename)

    files = source_files(("tomllib",))
    tracer = ArcTracer(files)
    sys.settrace(previous)
    try:
        execution = tracer.run(PROGRAMS["tomllib"].run, PROGRAMS["tomllib"].seeds[0])
        restored = sys.gettrace()
    finally:
        sys.settrace(None)
    assert restored is previous
    assert execution.arcs and not seen_files & set(files)


def test_documented_errors_are_rejections_and_others_crashes():
    assert harness("tomllib").execute(b"a = = 1")[1] == "rejected"
    assert harness("urllib.parse").execute(b"http://[::1/")[1] == "rejected"  # ValueError: Invalid IPv6 URL
    assert harness("urllib.parse").execute(b"http://h:99999/")[1] == "rejected"  # .port: out of range
    execution, outcome = harness("tomllib").execute(b"a=" + b"[" * 600)  # tomllib has no nesting limit
    assert outcome == "crash" and isinstance(execution.error, RecursionError)


def test_crashes_are_deduplicated_by_type_and_site_and_keep_the_first_input():
    prepared = harness("html.parser")  # _markupbase asserts on marked sections it does not know
    findings = Findings(prepared.files)
    inputs = [b"<![ead>", b"<![foo bar>", b"<<![[", b"<p>fine</p>", b"<![[x"]
    for data in inputs:
        execution, outcome = prepared.execute(data)
        if outcome == "crash":
            findings.record(execution.error, data)
    assert [(f.exception, f.input) for f in findings.unique.values()] == [
        ("AssertionError", b"<![ead>"), ("AssertionError", b"<<![[")]
    assert all(f.location.startswith("_markupbase.py:") for f in findings.unique.values())


def test_a_recursion_error_is_one_finding_whatever_the_depth():
    prepared = harness("tomllib")
    findings = Findings(prepared.files)
    for data in (b"a=" + b"[" * 600, b"a=" + b"[" * 700, b"a=" + b"{b=" * 400):
        findings.record(prepared.execute(data)[0].error, data)
    assert sorted(f.location.split(" ")[1] for f in findings.unique.values()) == ["(parse_array)",
                                                                                 "(parse_key_value_pair)"]


def test_a_crash_outside_the_traced_files_is_named_by_its_innermost_frame():
    def explode(data: bytes) -> None:
        int(data.decode(), base=99)  # ValueError inside int(): no traced frame at all

    fake = Program(explode, ("tomllib",), (), (b"1",))
    prepared = Harness(fake)
    findings = Findings(prepared.files)
    for data in (b"x", b"y"):
        execution, outcome = prepared.execute(data)
        assert outcome == "crash"
        findings.record(execution.error, data)
    (finding,) = findings.unique.values()
    assert finding.exception == "ValueError" and "(explode)" in finding.location and finding.input == b"x"


def test_memoized_functions_measure_the_same_in_every_run():
    url = b"http://[::1]:8080/a?b=c"  # urlsplit is an lru_cache: warm, it would skip its body
    first = arcs_of("urllib.parse", url).arcs
    assert arcs_of("urllib.parse", url).arcs == first
    warm = CoverageMap()
    warm.add(harness("urllib.parse").execute(url)[0].arcs)
    assert warm.arcs < first
