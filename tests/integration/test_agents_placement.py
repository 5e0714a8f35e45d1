"""Agents side by side get the GPUs the placement promises, on GPUs this CPU machine only declares.

Each agent is its own Ray driver (as `experiments.api.side_by_side` runs each listed experiment as its own
process) asking for its share's GPU fraction and concurrency (`experiments.plan.placement.share_machine` ->
`resolve_plan`, capped as the listing run caps it). Ray hands out GPU ids for declared GPUs without CUDA, so
CPU-only trials show the placement: which agent held which GPU id, and when.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from experiments.hardware import load_preset, resolve_plan
from experiments.plan.placement import share_machine

ray = pytest.importorskip("ray")


TRIALS_PER_AGENT = 2
DRIVER = Path(__file__).with_name("agent_placement_driver.py")


@pytest.fixture()
def three_fake_gpus() -> Iterator[str]:
    """A local Ray declaring 3 GPUs (and CPUs for every trial at once); yields its address."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    if ray.is_initialized():
        ray.shutdown()
    context = ray.init(num_cpus=8, num_gpus=3, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    yield context.address_info["gcs_address"]
    ray.shutdown()


def _run_agents(preset_name: str, agents: int, address: str, tmp_path: Path) -> list[dict[str, Any]]:
    """Every agent's sweep at once, each in its own driver process; returns every trial's record."""
    shared = tmp_path / "shared"
    shared.mkdir()
    processes = []
    shares = share_machine(load_preset(preset_name), agents)
    expect = sum(min(TRIALS_PER_AGENT, share.max_trials or TRIALS_PER_AGENT) for share in shares)
    for index, share in enumerate(shares):
        plan = resolve_plan(share.preset, None, num_trials=TRIALS_PER_AGENT)
        if share.max_trials:
            plan = plan.with_concurrency(min(plan.max_concurrent_trials, share.max_trials))
        spec = {"address": address, "agent": f"agent{index}", "gpus_per_trial": plan.gpus_per_trial,
                "max_concurrent_trials": plan.max_concurrent_trials, "trials": TRIALS_PER_AGENT,
                "expect": min(expect, len(shares)), "shared": str(shared), "storage": str(tmp_path / "tune")}
        spec_path = tmp_path / f"agent{index}.json"
        spec_path.write_text(json.dumps(spec))
        processes.append(subprocess.Popen([sys.executable, str(DRIVER), str(spec_path)], stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
    for process in processes:
        output, _ = process.communicate(timeout=300)
        assert process.returncode == 0, output[-3000:]
    return [json.loads(p.read_text()) for p in sorted(shared.glob("record_*.json"))]


def _overlapping(records: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(a, b) for i, a in enumerate(records) for b in records[i + 1:]
            if a["start"] < b["end"] and b["start"] < a["end"]]


def test_workstation_3gpu_gives_each_of_three_agents_its_own_gpu(three_fake_gpus: str, tmp_path: Path) -> None:
    records = _run_agents("workstation_3gpu", 3, three_fake_gpus, tmp_path)
    assert len(records) == 3 * TRIALS_PER_AGENT
    assert all(len(r["gpu_ids"]) == 1 for r in records)
    pairs = _overlapping(records)
    across = [(a, b) for a, b in pairs if a["agent"] != b["agent"]]
    assert {frozenset((a["agent"], b["agent"])) for a, b in across} == {
        frozenset(p) for p in (("agent0", "agent1"), ("agent0", "agent2"), ("agent1", "agent2"))}  # side by side
    assert all(a["gpu_ids"] != b["gpu_ids"] for a, b in across)  # never the same GPU at the same time
    assert all(a["agent"] != b["agent"] for a, b in pairs)  # one trial per agent at a time: one GPU each


def test_four_agents_share_three_gpus_two_per_gpu(three_fake_gpus: str, tmp_path: Path) -> None:
    records = _run_agents("workstation_3gpu", 4, three_fake_gpus, tmp_path)
    assert len(records) == 4 * TRIALS_PER_AGENT
    assert all(len(r["gpu_ids"]) == 1 for r in records)
    for probe in records:  # at any instant, no GPU id is held by more than two agents
        holders: dict[str, set[str]] = {}
        for r in records:
            if r["start"] <= probe["start"] < r["end"]:
                holders.setdefault(r["gpu_ids"][0], set()).add(r["agent"])
        assert all(len(agents) <= 2 for agents in holders.values()), holders
    assert max(sum(r["start"] <= p["start"] < r["end"] for r in records) for p in records) == 4  # all four at once
