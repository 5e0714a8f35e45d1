"""Every run names what produced its numbers: the machine, and whether another CPU gets the same (--cross-cpu)."""
from __future__ import annotations

from experiments.plan import numerics
from experiments.plan.provenance import machine_line, machine_tags


def test_native_numbers_say_another_cpu_may_differ(monkeypatch):
    monkeypatch.delenv(numerics.FLAG_VARIABLE, raising=False)
    monkeypatch.delenv("MKL_CBWR", raising=False)
    tags = machine_tags()
    assert tags["numerics"] == "native" and tags["machine/cpu"] and int(tags["machine/cores"]) >= 1
    assert "another CPU may give other numbers" in machine_line()


def test_pinned_numbers_say_any_cpu_gives_the_same(monkeypatch):
    for key, value in numerics.pinned_environment().items():
        monkeypatch.setenv(key, value)
    assert machine_tags()["numerics"] == "cross_cpu"
    assert "with --cross-cpu: any x86-64 CPU gives the same" in machine_line()
    assert numerics.describe().startswith("numerics: same on any x86-64 CPU (--cross-cpu: MKL_CBWR=COMPATIBLE")


def test_the_mode_is_asked_for_by_flag_or_environment():
    assert numerics.requested(True, {})
    assert numerics.requested(False, {"RLPLATFORM_CROSS_CPU": "1"})
    assert not numerics.requested(False, {"RLPLATFORM_CROSS_CPU": "0"})
    assert not numerics.requested(False, {})
