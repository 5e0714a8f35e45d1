"""What one portfolio model costs as its universe grows: N = 5, 20, 100 and 500 synthetic planted coins.

conf/ppo_portfolio_500.yaml trains one per-asset network (training.model: shared_assets) for 500 coins, where the
main job (conf/dqn_btc.yaml) trains a sweep per coin. Its parameters do not grow with N, but the data, the env and
every learner batch do, so this measures what grows, on the file's own env_config with only synthetic_assets changed
(the synthetic planted universe, 12,000 hourly bars, window 24, one decision a day, fold 0):

- load + featurize: the first env built in a fresh process (the universe generated, every asset featurized and
  normalized), what each trial process pays once (envs.portfolio.market keeps it for the process's other envs);
- env steps/s: random scores over whole training episodes, the best of 3 runs of at least 1 s;
- learner ms per update: one PPO update of the file's model and settings on 256 of the env's observations (one
  minibatch, one epoch), torch on 1 thread; the median of 10 after 2 warm-ups;
- peak memory: the child's max RSS once the env has stepped (no torch yet), and at its end (Ray and torch imported,
  the learner built and updated).

Each N runs in its own fresh subprocess (`--one N`), so neither the first-construction times nor the peaks mix.

The whole file (2 folds x 50 iterations of 4,000 decisions at N = 500) is too long to run for a measurement on 2
cores, so `--pipeline` runs the real pipeline (`experiments.run`) on it for 2 iterations and one fold instead, times
its phases from its --status-file, reads each iteration's time_this_iter_s from Tune's result.json, and extrapolates
the file's wall time from them; then sets it beside 500 per-coin models at the main job's measured wall time
(README.md, "Measured"). The pipeline's MLflow store is kept in its output folder, so its trials ledger never
deflates a real verdict. `python -m experiments.studies.portfolio_scale --pipeline` printed the tables in
docs/portfolio.md ("One model for 500 coins").
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from experiments.api.child_process import start as start_run
from experiments.api.options import RunOptions
from experiments.shell import exit_code

CONF = Path("conf/ppo_portfolio_500.yaml")
SIZES = (5, 20, 100, 500)
BATCH = 256                   # observations per learner update: one minibatch, one epoch
WARMUPS, UPDATES = 2, 10
STEP_REPEATS, STEP_MIN_S = 3, 1.0
PIPELINE_ITERATIONS = 2
PIPELINE_TIMEOUT_S = 900      # past this the pipeline is stopped: measure it at a smaller N (--pipeline-assets)
TRIALS_AT_ONCE = 2            # what the cpu preset's plan runs of the file's 2 trials (its --dry-run says so)
# The main job's measured wall time and trials, one coin: README.md, "Measured", `experiments.run conf/dqn_btc.yaml`
# (3 min 01 s; 4 folds x 2 seeds x 2 configurations, 2 trials at once).
MAIN_JOB_WALL_S, MAIN_JOB_TRIALS = 181.0, 16
COINS = 500


def load_file() -> Any:
    """conf/ppo_portfolio_500.yaml, validated (no Ray, no torch)."""
    from experiments.config.load import load_experiment

    return load_experiment(CONF)


def env_config(exp: Any, n_assets: int) -> dict[str, Any]:
    """The file's env_config at `n_assets` coins, on the training split of fold 0, without a feature store: a first
    construction computes every asset's features, as a fresh universe does."""
    return {**exp.environment.env_config, "synthetic_assets": n_assets, "feature_store": None}


def max_rss_mb() -> float:
    """This process's peak resident memory so far (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def steps_per_second(env: Any, rng: np.random.Generator) -> float:
    """Env steps/s with random scores over whole episodes (resets included): the best of STEP_REPEATS runs, each
    going on episode by episode until STEP_MIN_S has passed, so a slow episode is never cut short."""
    best = 0.0
    for _ in range(STEP_REPEATS):
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < STEP_MIN_S:
            env.reset(seed=int(rng.integers(2**31)))
            done = False
            while not done:
                _, _, terminated, truncated, _ = env.step(rng.uniform(-1, 1, env.action_space.shape).astype(np.float32))
                steps += 1
                done = terminated or truncated
        best = max(best, steps / (time.perf_counter() - start))
    return best


def observations(env: Any, rng: np.random.Generator, count: int) -> np.ndarray:
    """`count` observations the env gives under random scores: the learner batch sees real rows (tradable flags,
    weights, features on their scale), not noise."""
    rows = []
    obs, _ = env.reset(seed=0)
    while len(rows) < count:
        rows.append(obs)
        obs, _, terminated, truncated, _ = env.step(rng.uniform(-1, 1, env.action_space.shape).astype(np.float32))
        if terminated or truncated:
            obs, _ = env.reset(seed=int(rng.integers(2**31)))
    return np.stack(rows)


def learner_update_ms(exp: Any, env: Any, obs: np.ndarray, rng: np.random.Generator) -> tuple[float, int]:
    """The median ms of one PPO learner update on `obs` (after WARMUPS), and the module's parameter count. The
    learner is the file's: its training settings (batch, minibatch and epochs aside) and its shared_assets module,
    built as PPOLearner.build (algos/ppo/algorithm.py) builds it; actions and log-probs come from the module,
    advantages and targets are noise (an update costs the same whatever their values)."""
    import torch
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.columns import Columns
    from ray.rllib.evaluation.postprocessing import Postprocessing
    from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

    from algos.networks.portfolio_model import pop_model_config
    from algos.networks.portfolio_module import PortfolioPPOModule, with_portfolio_module

    torch.set_num_threads(1)
    training = exp.training.model_dump()
    training.pop("batch_scaling")
    model = pop_model_config(training)
    if training["grad_clip"] is None:
        training.pop("grad_clip")
    training.update(train_batch_size_per_learner=len(obs), minibatch_size=len(obs), num_epochs=1)
    config = PPOConfig().environment(observation_space=env.observation_space, action_space=env.action_space)
    config = with_portfolio_module(config.training(**training), PortfolioPPOModule, model, exp.rl_module.model_dump())
    learner = config.build_learner(env=None, spaces={"default_policy": (env.observation_space, env.action_space)})
    learner.build()
    module = learner.module["default_policy"]
    with torch.no_grad():
        dist_inputs = module.forward_exploration({Columns.OBS: torch.as_tensor(obs)})[Columns.ACTION_DIST_INPUTS]
    dist = module.get_exploration_action_dist_cls().from_logits(dist_inputs)
    actions = dist.sample()
    noise = {key: rng.standard_normal(len(obs)).astype(np.float32)
             for key in (Postprocessing.ADVANTAGES, Postprocessing.VALUE_TARGETS, Columns.VF_PREDS)}
    batch = MultiAgentBatch({"default_policy": SampleBatch({
        Columns.OBS: obs, Columns.ACTIONS: actions.numpy(), Columns.ACTION_LOGP: dist.logp(actions).numpy(),
        Columns.ACTION_DIST_INPUTS: dist_inputs.numpy(), Columns.LOSS_MASK: np.ones(len(obs), bool), **noise})},
        env_steps=len(obs))
    times = []
    for i in range(WARMUPS + UPDATES):
        start = time.perf_counter()
        learner.update(batch=batch, timesteps={"num_env_steps_sampled_lifetime": len(obs) * (i + 1)})
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times[WARMUPS:]), sum(p.numel() for p in module.parameters())


def measure_here(n_assets: int) -> dict[str, float]:
    """Everything measured at `n_assets` coins, in this process (which must be fresh: `--one` runs it)."""
    from envs.portfolio.env import PortfolioEnv

    exp = load_file()
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    env = PortfolioEnv(env_config(exp, n_assets))
    load_s = time.perf_counter() - start
    rate = steps_per_second(env, rng)
    obs = observations(env, rng, BATCH)
    env_rss = max_rss_mb()
    update_ms, parameters = learner_update_ms(exp, env, obs, rng)
    return {"assets": n_assets, "load_s": load_s, "steps_per_s": rate, "update_ms": update_ms,
            "parameters": parameters, "env_rss_mb": env_rss, "rss_mb": max_rss_mb(),
            "obs_mb": obs.nbytes / 2**20}


def measure(n_assets: int) -> dict[str, float]:
    """`measure_here(n_assets)` in a fresh subprocess; its last stdout line is the JSON of its numbers."""
    done = subprocess.run([sys.executable, "-m", "experiments.studies.portfolio_scale", "--one", str(n_assets)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"N={n_assets}: the measuring subprocess failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def load_average() -> str:
    """The 1-, 5- and 15-minute load averages: other jobs share the 2 cores, so every figure says how busy."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


@dataclass
class PipelineRun:
    """A short run of the real pipeline: its phases' seconds and its measured iterations."""

    assets: int
    wall_s: float
    phases: dict[str, float]             # setup, sweep, scoring, close: seconds each
    iteration_s: list[float]             # time_this_iter_s of each iteration
    env_steps: list[int]                 # env steps sampled in each iteration
    first_split: dict[str, float]        # the first iteration's env sampling and learner update seconds
    load: tuple[str, str]                # load averages at its start and end
    peak_rss_mb: dict[str, float]        # the driver's and the trial process's peak RSS


def descendants(pid: int) -> list[int]:
    """The live processes under `pid`: Ray's raylet starts the trial's worker from any of its threads, so every
    thread's children are read."""
    found, stack = [], [pid]
    while stack:
        for children in Path(f"/proc/{stack.pop()}/task").glob("*/children"):
            try:
                pids = [int(child) for child in children.read_text().split()]
            except OSError:  # gone meanwhile
                continue
            found += pids
            stack += pids
    return found


def high_water_mb(pid: int) -> tuple[str, float]:
    """A live process's command line and peak RSS so far (VmHWM), or ("", 0) once it is gone."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return "", 0.0
    kib = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), 0)
    return command, kib / 1024


def sample_peaks(driver: int, peaks: dict[str, float]) -> None:
    """Raise `peaks` to the driver's and the trial worker's (Ray names it ray::PPO...) peak RSS so far. A peak
    is a high-water mark, so sampling once a second misses only what a process reaches in its last second."""
    peaks["experiments.run"] = max(peaks.get("experiments.run", 0.0), high_water_mb(driver)[1])
    for pid in descendants(driver):
        command, peak = high_water_mb(pid)
        if command.startswith("ray::PPO"):
            peaks["trial (ray::PPO)"] = max(peaks.get("trial (ray::PPO)", 0.0), peak)


def run_pipeline(exp: Any, n_assets: int, output: Path) -> PipelineRun:
    """`api.run` (in its own process: experiments/api/child.py) on the file for PIPELINE_ITERATIONS iterations of one
    fold (the file's protocol with folds: 1) at `n_assets` coins; the phases come from polling its --status-file
    (every 0.2 s), the processes' peak memory from /proc (every second), the iterations from Tune."""
    protocol = {**exp.evaluation.protocol, "folds": 1}
    status, log = output / "status.json", output / "run.log"
    overrides = [f"tune.stop={{training_iteration: {PIPELINE_ITERATIONS}}}",
                 f"evaluation.protocol={json.dumps(protocol)}", f"environment.env_config.synthetic_assets={n_assets}"]
    options = RunOptions(output=output, status_file=status, dashboard=False, address="local")
    environment = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{output / 'mlruns' / 'mlflow.db'}"}
    (output / "mlruns").mkdir(parents=True)
    load_start = load_average()
    seen: dict[str, float] = {}
    peaks: dict[str, float] = {}
    polls = 0
    start = time.monotonic()
    with log.open("w") as sink:
        process = start_run(CONF, overrides, options, sink, environment)
        while process.poll() is None:
            phase = json.loads(status.read_text()).get("phase") if status.exists() else None
            if phase and phase not in seen:
                seen[phase] = time.monotonic() - start
            if polls % 5 == 0:
                sample_peaks(process.pid, peaks)
            polls += 1
            if time.monotonic() - start > PIPELINE_TIMEOUT_S:
                process.terminate()
                process.wait()
                raise RuntimeError(f"the pipeline at N={n_assets} ran past {PIPELINE_TIMEOUT_S} s: rerun with "
                                   f"--pipeline-assets 100; its log: {log}")
            time.sleep(0.2)
    wall = time.monotonic() - start
    if process.returncode != 0 or "done" not in seen:
        raise RuntimeError(f"the pipeline at N={n_assets} failed (exit {process.returncode}); its log: {log}")
    results = [json.loads(line) for path in output.rglob("result.json") for line in path.read_text().splitlines()]
    results.sort(key=lambda result: result["training_iteration"])
    return PipelineRun(
        assets=n_assets, wall_s=wall,
        phases={"setup": seen["training"], "sweep": seen["scoring"] - seen["training"],
                "scoring": seen["done"] - seen["scoring"], "close": wall - seen["done"]},
        iteration_s=[result["time_this_iter_s"] for result in results],
        env_steps=[result["env_runners"]["num_env_steps_sampled"] for result in results],
        first_split={"sampling": results[0]["timers"]["env_runner_sampling_timer"],
                     "learner": results[0]["timers"]["learner_update_timer"]},
        load=(load_start, load_average()), peak_rss_mb=peaks)


def extrapolate(run: PipelineRun, exp: Any) -> tuple[float, str]:
    """The file's wall time from the short run, and how: the setup and the trial's start once, each of the file's
    iterations at the measured mean iteration time (its trials run TRIALS_AT_ONCE at once, one CPU each as in the
    measured run), and the scoring once per fold (an upper bound where part of it is per run)."""
    iterations = int(exp.tune.stop["training_iteration"])
    folds = int(exp.evaluation.protocol["folds"])
    waves = -(-folds * len(exp.tune.seeds) // TRIALS_AT_ONCE)
    per_iteration = statistics.mean(run.iteration_s)
    trial_start = run.phases["sweep"] - sum(run.iteration_s)
    total = (run.phases["setup"] + waves * (trial_start + iterations * per_iteration) + folds * run.phases["scoring"]
             + run.phases["close"])
    how = (f"setup {run.phases['setup']:.0f} s + {waves} wave(s) x (trial start {trial_start:.0f} s + {iterations} "
           f"iterations x {per_iteration:.1f} s) + {folds} folds x scoring {run.phases['scoring']:.0f} s + close "
           f"{run.phases['close']:.0f} s")
    return total, how


def hours(seconds: float) -> str:
    """Seconds as hours and minutes: the two wall times compared differ by about 40x."""
    return f"{seconds / 3600:.1f} h ({seconds / 60:.0f} min)"


def print_sizes(rows: list[dict[str, float]], loads: list[str]) -> None:
    print("| N | load + featurize (s) | env steps/s | learner ms per update (batch 256) | parameters | "
          "batch obs (MB) | max RSS after env (MB) | max RSS, env + learner (MB) | load average |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row, load in zip(rows, loads, strict=True):
        print(f"| {row['assets']} | {row['load_s']:.2f} | {row['steps_per_s']:,.0f} | {row['update_ms']:.1f} | "
              f"{row['parameters']:,} | {row['obs_mb']:.0f} | {row['env_rss_mb']:,.0f} | {row['rss_mb']:,.0f} | "
              f"{load} |")


def print_pipeline(run: PipelineRun, exp: Any) -> None:
    total, how = extrapolate(run, exp)
    print(f"\npipeline at N={run.assets}, {PIPELINE_ITERATIONS} iterations of one fold: {run.wall_s:.0f} s "
          f"(load average {run.load[0]} at its start, {run.load[1]} at its end); peak RSS: "
          + ", ".join(f"{name} {mb:,.0f} MB" for name, mb in run.peak_rss_mb.items()))
    print("| phase | s |\n|---|---|")
    for phase, seconds in run.phases.items():
        print(f"| {phase} | {seconds:.1f} |")
    print("\n| iteration | time_this_iter_s | env steps |\n|---|---|---|")
    for i, seconds in enumerate(run.iteration_s):
        print(f"| {i + 1} | {seconds:.1f} | {run.env_steps[i]:,} |")
    # RLlib smooths its timers (an exponential mean) from the second iteration on: only the first is that
    # iteration's own split.
    print(f"iteration 1: env sampling {run.first_split['sampling']:.1f} s, learner update "
          f"{run.first_split['learner']:.1f} s (RLlib's timers; later iterations' are smoothed)")
    per_coin = COINS * MAIN_JOB_WALL_S
    print(f"\n{CONF} whole (extrapolated from {PIPELINE_ITERATIONS} measured iterations at N={run.assets}): "
          f"{hours(total)} = {how}")
    print(f"{COINS} per-coin models at the main job's measured cost: {COINS} x {MAIN_JOB_WALL_S:.0f} s "
          f"(conf/dqn_btc.yaml, {MAIN_JOB_TRIALS} trials a coin, README.md 'Measured') = {hours(per_coin)}, "
          f"one coin after another; {per_coin / total:.1f}x the one model")


def main(argv: list[str] | None = None) -> int:
    return exit_code(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.studies.portfolio_scale", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="universe sizes N (default 5,20,100,500)")
    parser.add_argument("--pipeline", action="store_true",
                        help=f"also run {CONF} for {PIPELINE_ITERATIONS} iterations of one fold and extrapolate")
    parser.add_argument("--pipeline-assets", type=int, default=COINS,
                        help="N for the pipeline run (default 500; 100 where 500 cannot finish in 15 minutes)")
    parser.add_argument("--pipeline-output", type=Path, default=None,
                        help="a new folder for the pipeline run (default: a fresh temporary folder)")
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)  # the per-N subprocess
    args = parser.parse_args(argv)
    if args.one is not None:
        print(json.dumps(measure_here(args.one)))
        return 0
    rows, loads = [], []
    for n_assets in (int(size) for size in args.sizes.split(",")):
        loads.append(load_average())
        rows.append(measure(n_assets))
    print(f"{CONF}'s env_config at N coins; each N in a fresh subprocess; {os.cpu_count()} CPUs; torch 1 thread")
    print_sizes(rows, loads)
    if args.pipeline:
        output = args.pipeline_output or Path(tempfile.mkdtemp(prefix="portfolio_scale_"))
        if output.exists() and any(output.iterdir()):
            parser.error(f"--pipeline-output {output} is not empty: the run must start without cached features")
        exp = load_file()
        print_pipeline(run_pipeline(exp, args.pipeline_assets, output), exp)
        print(f"pipeline output: {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
