"""`learner`: one FastDQN and one FastSAC update timed without Ray, minibatch 32 to 4096, fp32, bf16 and compiled;
one direct-learner update against one PPO minibatch of the same per-asset net.

What the learners' minibatch loop runs per update (`algos.fast.learner_math`: forward, loss from `algos.fast.losses`,
backward, global-norm clip, fused Adam, and SAC's soft target update), on torch-only replicas of the RLModules RLlib
builds for conf/dqn_btc.yaml (194 observation features, 2 actions, [128, 128] relu, dueling, double Q, huber, clip
40) and conf/sac_btc.yaml (193 features, 1 action, [128, 128] relu, twin Q; RLlib's Q encoder: an MLP per stream and a
[256, 256] tanh fusion net), checked against RLlib's learners by tests/unit/test_learner_math.py. So the figures are
the update math alone: no replay, no Ray, no tensor conversion, no metrics.

Variants: fp32; bf16 (torch.autocast of forward and loss, as the `mixed_precision: bf16` presets run it); compiled
(torch.compile of the forward pass, inductor, static shapes, as `torch_compile_learner` runs it for one minibatch
size; at 256 and 4096 only, in one child process with a deadline, since a compile cannot be stopped in-process; the
compile time in the note depends on inductor's on-disk cache: a first run compiles from scratch). Device: CUDA when
available, else the CPU with ONE torch thread (what one trial's learner gets on the cpu preset, as the other CPU
benchmarks).

Each row: warm-up, then the median of up to N timed updates (--steps; default 50, --quick 2) within the row's share
of the run's time budget (--time-limit; default 300 s, --quick 30 s; the direct rows below have their own 60 s, so a
run ends within about 6 minutes however loaded the machine). A row whose one update, extrapolated from the batch
before, would not fit its share is skipped, and a variant the device cannot run gets no figure: the note says which
and why. `--quick`: 32 and 256, fp32 and bf16.
These rows have no peer. This process imports torch and numpy only (no Ray, mlflow or pydantic).

The direct rows (`algorithm: direct`, algos/direct/): one update of the direct learner's own code,
`PortfolioProblem.step` on a mini-batch of 64 consecutive decisions of a synthetic universe of N assets (the
observations at the memory's weights, the shared-weights PolicyNet's forward pass, the log growth through the exact
cost), its backward pass and an Adam step, against its peer in the same process: one PPO minibatch update of 256
observations of the same per-asset net ([32, 32], the shipped portfolio confs' `model_hiddens`; its value net too),
the two taken in turn (experiments.studies.portfolio_gpu_timing builds both). The ratio is PPO's time over the
direct one's (>= 1.0x: the direct update costs at most the PPO minibatch, issue 52's target). N = 20 and 500
(--quick: 20). They run in one child process with a deadline of 60 s (--quick too, so it takes up to ~1.5 minutes),
imports and universes included, since the env imports pydantic and the module's file Ray; a row the child did not
finish says why.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from algos.fast.learner_math import DQNNet, DQNUpdate, SACNet, SACUpdate
from experiments.benchmark.common import REPO, Budget, Figure, Report

ALGORITHMS, VARIANTS = ("FastDQN", "FastSAC"), ("fp32", "bf16", "compiled")
BATCHES, COMPILED_BATCHES, QUICK_BATCHES = (32, 256, 1024, 4096), (256, 4096), (32, 256)
HIDDENS = [128, 128]  # conf/dqn_btc.yaml's rl_module, which conf/sac_btc.yaml extends
DQN_OBS, DQN_ACTIONS = 194, 2  # trading/Spot-v0, window 24, positions long_flat
SAC_OBS, SAC_ACTION_DIM = 193, 1  # the same env, positions continuous
# The learner_math rows' budget (half eager, half compiled; all eager with --quick), and the direct rows' own (their
# child imports RLlib and builds the universes: ~25 s at load 13 here, before the first timed update).
RUN_SECONDS, QUICK_SECONDS, DIRECT_SECONDS = 300.0, 30.0, 60.0
CHILD = "import json, sys; from experiments.benchmark.learner_bench import child; child(json.loads(sys.argv[1]))"
DIRECT_CHILD = ("import json, sys; from experiments.benchmark.learner_bench import direct_child; "
                "direct_child(json.loads(sys.argv[1]))")
DIRECT_ASSETS, QUICK_DIRECT_ASSETS = (20, 500), (20,)
DIRECT_BATCH, DIRECT_PEER_BATCH = 64, 256  # consecutive decisions; PPO observations (issue 52, "Update cost")
PORTFOLIO_HIDDENS = [32, 32]  # conf/canary_portfolio_planted.yaml's model_hiddens, which the direct confs keep


@dataclass
class Row:
    """One configuration: measured (median_s, over `updates` timed updates), or not, with the reason in `note`."""

    algorithm: str
    batch: int
    variant: str
    median_s: float | None = None
    updates: int = 0
    compile_s: float | None = None
    note: str = ""

    @property
    def updates_per_s(self) -> float | None:
        return None if self.median_s is None else 1.0 / self.median_s

    @property
    def transitions_per_s(self) -> float | None:
        return None if self.median_s is None else self.batch / self.median_s

    def figure(self) -> Figure:
        note = self.note
        if self.median_s is not None:
            note = (f"{self.transitions_per_s:,.0f} transitions/s; median {self.median_s * 1e3:.2f} ms of "
                    f"{self.updates} updates" + (f"; compiling took {self.compile_s:.0f} s" if self.compile_s else ""))
        return Figure(f"{self.algorithm} update, batch {self.batch}, {self.variant}", "updates/s", self.updates_per_s,
                      None, note=note)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "updates_per_s": self.updates_per_s, "transitions_per_s": self.transitions_per_s}


@dataclass
class DirectRow:
    """The direct learner's update at N assets and its peer's (PPO minibatch), each a median over `updates`."""

    assets: int
    batch: int = DIRECT_BATCH
    peer_batch: int = DIRECT_PEER_BATCH
    median_s: float | None = None
    peer_median_s: float | None = None
    updates: int = 0
    setup_s: float | None = None
    note: str = ""

    def figure(self) -> Figure:
        measured = self.median_s is not None and self.peer_median_s is not None
        figure = Figure(f"direct update, {self.batch} consecutive decisions, N = {self.assets}", "updates/s",
                        1.0 / self.median_s if measured else None, 1.0 / self.peer_median_s if measured else None,
                        target=">= 1.0x peer", note=self.note)
        if measured:
            figure.met = figure.ratio >= 1.0
            figure.note = (f"median {self.median_s * 1e3:.2f} ms; peer (PPO minibatch of {self.peer_batch} "
                           f"observations, the same {PORTFOLIO_HIDDENS} per-asset net) {self.peer_median_s * 1e3:.2f} "
                           f"ms; {self.updates} updates each, in turn; universe and nets built in {self.setup_s:.1f} s")
        return figure


def _batch(algorithm: str, size: int, device: torch.device, seed: int) -> dict[str, torch.Tensor]:
    """A replayed minibatch as the learners receive it (RLlib's column names; n-step 3 for DQN, 1 for SAC)."""
    rng, dqn = np.random.default_rng(seed), algorithm == "FastDQN"
    obs_dim = DQN_OBS if dqn else SAC_OBS
    columns = {"obs": rng.normal(size=(size, obs_dim)).astype(np.float32),
               "new_obs": rng.normal(size=(size, obs_dim)).astype(np.float32),
               "actions": rng.integers(0, DQN_ACTIONS, size) if dqn
               else rng.uniform(-1, 1, (size, SAC_ACTION_DIM)).astype(np.float32),
               "rewards": rng.normal(size=size).astype(np.float32),
               "terminateds": (rng.random(size) < 0.01).astype(np.float32),
               "n_step": np.full(size, 3.0 if dqn else 1.0, np.float32),
               "weights": rng.uniform(0.5, 1.5, size).astype(np.float32)}
    return {key: torch.from_numpy(value).to(device) for key, value in columns.items()}


def _update(algorithm: str, variant: str, device: torch.device) -> DQNUpdate | SACUpdate:
    """A fresh update with the confs' settings: new weights and optimizer state per row."""
    torch.manual_seed(0)
    options = {"precision": "bf16" if variant == "bf16" else "none", "compile_forward": variant == "compiled"}
    if algorithm == "FastDQN":
        return DQNUpdate(DQNNet(DQN_OBS, DQN_ACTIONS, HIDDENS).to(device), lr=5e-4, grad_clip=40.0, **options)
    return SACUpdate(SACNet(SAC_OBS, SAC_ACTION_DIM, HIDDENS).to(device), lr=3e-4, tau=5e-3, initial_alpha=0.2,
                     **options)


def _measure(row: Row, device: torch.device, max_updates: int, seconds: float, seed: int) -> Row:
    """Warm-up (the compile, for the compiled variant; a second call when cheap), then timed updates until
    `max_updates` or `seconds` (at least one)."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    update, batch = _update(row.algorithm, row.variant, device), _batch(row.algorithm, row.batch, device, seed)
    started = time.perf_counter()
    update(batch)
    sync()
    first = time.perf_counter() - started
    row.compile_s = first if row.variant == "compiled" else None
    if row.variant == "compiled" or first < seconds / 10:
        update(batch)
        sync()
    samples: list[float] = []
    deadline = time.perf_counter() + seconds
    while len(samples) < max_updates and (not samples or time.perf_counter() < deadline):
        started = time.perf_counter()
        update(batch)
        sync()
        samples.append(time.perf_counter() - started)
    row.median_s, row.updates = statistics.median(samples), len(samples)
    return row


def _eager(row: Row, device: torch.device, max_updates: int, share: float, predicted: float | None,
           seed: int) -> Row:
    """`row` measured in this process within `share` seconds, or skipped, or failed (bf16 only), with the reason."""
    if predicted is not None and 2 * predicted > share:  # a warm-up and one timed update at least
        row.note = (f"skipped: one update would take ~{predicted:.1f} s here (extrapolated from the batch before), "
                    f"over this row's {share:.0f} s share of the run's time budget")
        return row
    if row.variant == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        row.note = "bf16 autocast is not supported on this GPU"
        return row
    try:
        return _measure(row, device, max_updates, share / 2, seed)
    except RuntimeError as error:  # fp32 must run; bf16 may lack a kernel on this device: said, not fatal
        if row.variant == "fp32":
            raise
        row.note = f"bf16 failed on {device.type}: {_first_line(error)}"
        return row


def _compiled(rows: list[Row], max_updates: int, seconds: float, seed: int) -> list[Row]:
    """The compiled rows, measured in order in one child process (a compile cannot be stopped in-process); each
    row's timed updates get a quarter of its even share. A row the child did not print says why."""
    spec = {"rows": [asdict(row) for row in rows], "max_updates": max_updates,
            "seconds": seconds / len(rows) / 4, "seed": seed}
    lines, why = _child_lines(CHILD, spec, seconds, "torch.compile failed",
                              "compile and timing did not finish within the {seconds:.0f} s the time budget left the "
                              "compiled rows")
    measured = [Row(**json.loads(line)) for line in lines]
    for row in rows[len(measured):]:
        row.note = why
    return measured + rows[len(measured):]


def _direct(rows: list[DirectRow], max_updates: int, seconds: float, seed: int) -> list[DirectRow]:
    """The direct rows, measured in order in one child process within `seconds` (it imports Ray and pydantic, which
    this process does not). A row the child did not print says why."""
    spec = {"rows": [asdict(row) for row in rows], "max_updates": max_updates, "seconds": seconds, "seed": seed}
    lines, why = _child_lines(DIRECT_CHILD, spec, seconds, "the direct update failed",
                              "imports, universes and timing did not finish within the direct rows' {seconds:.0f} s")
    measured = [DirectRow(**json.loads(line)) for line in lines]
    for row in rows[len(measured):]:
        row.note = why
    return measured + rows[len(measured):]


def _child_lines(code: str, spec: dict[str, Any], seconds: float, failed: str, late: str) -> tuple[list[str], str]:
    """The JSON lines a child running `code` on `spec` printed, and why it printed no more: `failed` and its last
    error line, or `late` when it was killed at `seconds` (its own session, so it dies with any workers it started)."""
    child = subprocess.Popen([sys.executable, "-c", code, json.dumps(spec)], cwd=REPO, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = child.communicate(timeout=seconds)
        why = f"{failed}: {(err.strip().splitlines() or ['?'])[-1][:200]}"
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        out, _ = child.communicate()
        why = late.format(seconds=seconds)
    return [line for line in out.splitlines() if line.startswith("{")], why


def _first_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0][:200]}"


def _plan(quick: bool) -> list[Row]:
    """Cheap rows first (smaller batch), so the budget's shares adapt to what the machine delivers."""
    rows = [Row(algorithm, batch, variant) for batch in (QUICK_BATCHES if quick else BATCHES)
            for algorithm in ALGORITHMS for variant in VARIANTS[:2]]
    return rows + ([] if quick else [Row(a, b, "compiled") for b in COMPILED_BATCHES for a in ALGORITHMS])


def _measure_all(rows: list[Row], device: torch.device, max_updates: int, budget_s: float,
                 seed: int) -> list[Row]:
    """The eager rows in order, each with an even share of what is left of their half of the budget (all of it
    without compiled rows), then the compiled rows with the rest."""
    deadline = time.perf_counter() + budget_s
    eager, compiled = [r for r in rows if r.variant != "compiled"], [r for r in rows if r.variant == "compiled"]
    eager_deadline = deadline - (budget_s / 2 if compiled else 0.0)
    last: dict[tuple[str, str], Row] = {}
    for index, row in enumerate(eager):
        share = max(eager_deadline - time.perf_counter(), 0.0) / (len(eager) - index)
        before = last.get((row.algorithm, row.variant))
        predicted = None if before is None else before.median_s * row.batch / before.batch
        if _eager(row, device, max_updates, share, predicted, seed).median_s is not None:
            last[(row.algorithm, row.variant)] = row
    return eager + (_compiled(compiled, max_updates, max(deadline - time.perf_counter(), 1.0), seed)
                    if compiled else [])


def run(budget: Budget) -> Report:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    threads = torch.get_num_threads()
    if device.type == "cpu":
        torch.set_num_threads(1)
    max_updates, seconds = budget.pick(full=50, quick=2), budget.time_limit_s or (
        QUICK_SECONDS if budget.quick else RUN_SECONDS)
    try:
        rows = _measure_all(_plan(budget.quick), device, max_updates, seconds, budget.seed)
    finally:
        torch.set_num_threads(threads)
    rows.sort(key=lambda r: (ALGORITHMS.index(r.algorithm), r.batch, VARIANTS.index(r.variant)))
    direct = _direct([DirectRow(n) for n in (QUICK_DIRECT_ASSETS if budget.quick else DIRECT_ASSETS)],
                     max_updates, DIRECT_SECONDS, budget.seed)
    where = torch.cuda.get_device_name() if device.type == "cuda" else f"cpu, 1 torch thread ({threads} available)"
    return Report("learner", __doc__.splitlines()[0], f"algos.fast.learner_math and algos/direct on {where}",
                  f"direct rows: a PPO minibatch update of {DIRECT_PEER_BATCH} observations, same net",
                  [row.figure() for row in rows] + [row.figure() for row in direct],
                  {"device": where, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                   "torch": torch.__version__, "max_updates_per_row": max_updates, "time_budget_s": seconds,
                   "rows": [row.as_dict() for row in rows], "direct_rows": [asdict(row) for row in direct]})


def child(spec: dict[str, Any]) -> None:
    """The compiled rows in this process (the child `_compiled` starts): prints each measured row as a JSON line."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cpu":
        torch.set_num_threads(1)
    for row in spec["rows"]:
        measured = _measure(Row(**row), device, spec["max_updates"], spec["seconds"], spec["seed"])
        print(json.dumps(asdict(measured)), flush=True)


def direct_child(spec: dict[str, Any]) -> None:
    """The direct rows in this process (the child `_direct` starts): prints each measured row as a JSON line. Each
    row gets an even share of the time left (the universe's build inside it); at least one timed update each."""
    from experiments.studies.portfolio_gpu_timing import direct_update, ppo_update

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        torch.set_num_threads(1)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    deadline = time.perf_counter() + 0.9 * spec["seconds"]  # before the parent's kill
    rows = [DirectRow(**row) for row in spec["rows"]]
    for index, row in enumerate(rows):
        row_deadline = time.perf_counter() + max(deadline - time.perf_counter(), 0.0) / (len(rows) - index)
        started = time.perf_counter()
        updates = {"direct": direct_update(device, row.assets, row.batch, PORTFOLIO_HIDDENS),
                   "peer": ppo_update(device, row.assets, row.peer_batch, PORTFOLIO_HIDDENS)}
        row.setup_s = time.perf_counter() - started
        samples: dict[str, list[float]] = {name: [] for name in updates}
        for update in updates.values():  # warm-up
            update()
        while len(samples["direct"]) < spec["max_updates"] and (
                not samples["direct"] or time.perf_counter() < row_deadline):
            for name, update in updates.items():
                sync()
                started = time.perf_counter()
                update()
                sync()
                samples[name].append(time.perf_counter() - started)
        row.median_s, row.peer_median_s = statistics.median(samples["direct"]), statistics.median(samples["peer"])
        row.updates = len(samples["direct"])
        print(json.dumps(asdict(row)), flush=True)
