"""Listings of experiments (conf/agents.yaml): bad input is one line and exit 2 with nothing written, and the
dry run shows each agent's share of the machine and the estimate."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from experiments.hardware import load_preset, resolve_plan
from experiments.plan.placement import share_machine
from experiments.run import main
from tests.conftest import REPO

CARTPOLE = str(REPO / "conf/dqn_cartpole.yaml")


def run(capsys, tmp_path: Path, listing: dict | str, *flags: str) -> tuple[int, str, str]:
    path = tmp_path / "agents.yaml"
    path.write_text(listing if isinstance(listing, str) else yaml.safe_dump(listing))
    out_dir = tmp_path / "out"
    code = main([str(path), "--output", str(out_dir), *flags])
    out, err = capsys.readouterr()
    assert not out_dir.exists()  # refused or dry: nothing written
    return code, out, err


@pytest.mark.parametrize("listing, flags, fragment", [
    ({"name": "a", "experiments": ["missing.yaml"]}, [], "experiments[0]: "),
    ({"name": "a", "experiments": []}, [], "experiments: List should have at least 1 item"),
    ({"name": "a", "experiment": [CARTPOLE]}, ["--dry-run"], "unknown key 'experiment'"),
    ({"name": "a", "experiments": [{"file": CARTPOLE, "sets": ["tune.num_samples=1"]}]}, [],
     "did you mean 'experiments.0.set'"),
    ({"name": "a", "experiments": [CARTPOLE, CARTPOLE]}, ["--dry-run"], "both run experiment 'dqn_cartpole'"),
    ({"name": "a", "experiments": [CARTPOLE]}, ["--set", "training.lr=0.1"], "--set applies to one experiment"),
    ({"name": "a", "experiments": [CARTPOLE]}, ["--resume"], "--resume continues one experiment"),
    ({"name": "a", "experiments": [{"file": CARTPOLE, "set": ["training.lrr=0.1"]}]}, ["--dry-run"],
     "did you mean 'training.lr'"),
    ({"name": "a", "experiments": [CARTPOLE]}, ["--dry-run", "--hardware", "workstation_3gpuu"],
     "did you mean 'workstation_3gpu'"),
])
def test_bad_listings_are_one_line_and_exit_2(capsys, tmp_path: Path, listing, flags, fragment) -> None:
    code, _, err = run(capsys, tmp_path, listing, *flags)
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert fragment in err


def test_circular_listing_is_refused(capsys, tmp_path: Path) -> None:
    (tmp_path / "inner.yaml").write_text(yaml.safe_dump({"name": "inner", "experiments": ["agents.yaml"]}))
    code, _, err = run(capsys, tmp_path, {"name": "outer", "experiments": [CARTPOLE, "inner.yaml"]})
    assert code == 2 and "is circular" in err and "inner.yaml" in err and err.count("\n") == 1


def test_nested_listings_are_flattened(capsys, tmp_path: Path) -> None:
    (tmp_path / "inner.yaml").write_text(yaml.safe_dump({"name": "inner", "experiments": [CARTPOLE]}))
    code, out, err = run(capsys, tmp_path, {"name": "outer", "experiments": [
        "inner.yaml", str(REPO / "conf/dqn_testprio_codec.yaml")]}, "--dry-run", "--hardware", "workstation_3gpu")
    assert code == 0, err
    assert "2 experiments side by side" in out and "dqn_cartpole" in out and "dqn_testprio_codec" in out


def test_dry_run_shows_one_gpu_per_agent_and_the_estimate(capsys, tmp_path: Path) -> None:
    listing = {"name": "three", "experiments": [CARTPOLE, str(REPO / "conf/dqn_testprio_codec.yaml"),
                                                 str(REPO / "conf/dqn_testprio_iofrol.yaml")]}
    code, out, err = run(capsys, tmp_path, listing, "--dry-run", "--hardware", "workstation_3gpu")
    assert code == 0, err
    assert out.count("1 GPU of its own") == 3
    assert "estimate: " in out and "for the longest experiment" in out
    assert out.count("trial_per_gpu, 1 trial(s) at once, 3 CPU + 1 GPU per trial") == 3


def test_dry_run_with_more_agents_than_gpus_shares_them(capsys, tmp_path: Path) -> None:
    listing = {"name": "four", "experiments": [CARTPOLE, str(REPO / "conf/dqn_testprio_codec.yaml"),
                                                str(REPO / "conf/dqn_testprio_iofrol.yaml"),
                                                str(REPO / "conf/ppo_cartpole.yaml")]}
    code, out, err = run(capsys, tmp_path, listing, "--dry-run", "--hardware", "workstation_3gpu")
    assert code == 0, err
    assert out.count("0.5 GPU (2 agents per GPU)") == 4
    assert out.count("shared_gpu, 1 trial(s) at once") == 4


@pytest.mark.parametrize("preset, agents, expected", [
    ("workstation_3gpu", 3, [(1, "trial_per_gpu", 1.0, 1)] * 3),
    ("workstation_3gpu", 4, [(1, "shared_gpu", 0.5, 1)] * 4),
    ("workstation_3gpu", 2, [(2, "trial_per_gpu", 2.0, 2), (1, "trial_per_gpu", 1.0, 1)]),
    ("p4d_24xlarge_ddp", 3, [(3, "multi_gpu_learners", 3.0, 1), (3, "multi_gpu_learners", 3.0, 1),
                             (2, "multi_gpu_learners", 2.0, 1)]),
    ("a100_80gb", 2, [(1, "shared_gpu", 0.5, 2)] * 2),  # 3 trials per GPU; half the CPUs fit 2 of them
])
def test_shares_of_a_gpu_machine(preset: str, agents: int, expected) -> None:
    """(GPUs in the share, strategy, GPUs the agent holds at once, trials it runs at once)."""
    got = []
    for share in share_machine(load_preset(preset), agents):
        plan = resolve_plan(share.preset, None, num_trials=8)
        at_once = min(plan.max_concurrent_trials, share.max_trials or plan.max_concurrent_trials)
        held = plan.gpus_per_trial * at_once
        assert held <= share.gpus + 1e-9  # the agent never asks Ray for more than its share
        got.append((share.preset.gpu_count, share.preset.strategy, round(share.gpus, 4), at_once))
    assert got == expected


def test_cpu_machine_divides_its_cpus() -> None:
    shares = share_machine(load_preset("cpu").model_copy(update={"cpus": 8}), 3)
    assert [s.preset.cpus for s in shares] == [2, 2, 2]
    assert all(s.preset.gpu_count == 0 and s.max_trials is None for s in shares)


def test_the_shipped_listing_puts_each_agent_on_its_own_gpu_of_workstation_3gpu(capsys) -> None:
    code = main([str(REPO / "conf/agents.yaml"), "--dry-run", "--hardware", "workstation_3gpu",
                 "--output", "/nonexistent-never-written"])
    out, err = capsys.readouterr()
    listed = yaml.safe_load((REPO / "conf/agents.yaml").read_text())["experiments"]
    assert code == 0, err
    assert out.count("1 GPU of its own") == len(listed) == 3
    assert "dqn_testgen_tomllib" in out and "dqn_testprio_iofrol" in out and "dqn_btc" in out
