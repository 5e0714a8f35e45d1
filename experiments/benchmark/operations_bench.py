"""`operations`: retraining, deciding and paper trading, on the bundled bars with their last two months held back.

The loop of docs/operations.md, timed as a user runs it (fresh processes, a temporary tracking store):
- an incremental retrain against a full one of the main job (conf/dqn_btc.yaml; --quick: its smoke budget), both
  from the command line, the full one making the first champion with --promote;
- one decision from raw bars in process (the registered model's predict) against the policy's forward pass alone on
  a ready observation, and through `mlflow models serve` (HTTP on 127.0.0.1) against in process;
- paper trading replaying a year of hourly bars (8,760) against the backtest of the same bars' decisions.
"""
from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from experiments.api.serving import LOOPBACK, invocation_body
from experiments.benchmark.common import REPO, Budget, Figure, Report
from experiments.plan.ports import pick_free_port

HOURS_A_YEAR = 8760


def _module(root: Path, tracking_uri: str, *args: str) -> float:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=3600,
                          env={**os.environ, "PYTHONPATH": str(REPO), "MLFLOW_TRACKING_URI": tracking_uri})
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:2])} failed ({proc.returncode}): {(proc.stdout + proc.stderr)[-800:]}")
    return time.perf_counter() - started


def _wait_until_up(url: str, timeout: float = 120) -> None:
    import requests

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if requests.get(url, timeout=2).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{url}: the model server did not come up in {timeout:.0f} s")


def _median_ms(call, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def numpy_vs_torch_forward_ms(observation_size: int, repeats: int) -> tuple[float, float]:
    """One decision through the numpy forward pass a registered model serves with, against the same RLModule's torch
    `forward_inference` (the main job's 128x128 ReLU dueling DQN, untrained: the time does not depend on the
    weights), median ms over `repeats` after a warm-up."""
    import gymnasium as gym
    import numpy as np
    import torch
    from ray.rllib.algorithms.dqn import DQNConfig

    import algos

    config = DQNConfig().environment(observation_space=gym.spaces.Box(-10, 10, (observation_size,), np.float32),
                                     action_space=gym.spaces.Discrete(3))
    module = config.training(dueling=True).rl_module(
        model_config={"fcnet_hiddens": [128, 128], "fcnet_activation": "relu"}).get_rl_module_spec().build()
    module.eval()
    policy = algos.algorithm("dqn").numpy_policy(module)
    observation = np.random.default_rng(3).standard_normal((1, observation_size)).astype(np.float32)

    def torch_decision() -> None:
        with torch.no_grad():
            module.forward_inference({"obs": torch.as_tensor(observation)})

    for decide in (lambda: policy(observation), torch_decision):  # warm-up
        for _ in range(50):
            decide()
    return _median_ms(lambda: policy(observation), repeats), _median_ms(torch_decision, repeats)


def run(budget: Budget) -> Report:
    import mlflow
    import requests

    from envs.trading.data import load_bars, save_bars

    smoke = ["--smoke-test"] if budget.quick else []
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        uri = f"sqlite:///{root / 'mlflow.db'}"
        bars = load_bars(REPO / "data" / "raw" / "BTC-USD_1h.parquet")
        data = save_bars(bars.iloc[:-1440], root / "BTC-USD_1h.parquet", "BTC-USD", "1h")
        fresh = save_bars(bars.iloc[-1440:], root / "fresh.parquet", "BTC-USD", "1h")
        retrain = ["experiments.retrain", "conf/dqn_btc.yaml", *smoke, "--no-dashboard", "--output", str(root / "runs"),
                   "--set", f"environment.env_config.data_path={data}"]
        full = _module(root, uri, *retrain, "--mode", "full", "--promote")
        _module(root, uri, "experiments.data", "update", str(data), "--from", str(fresh))
        incremental = _module(root, uri, *retrain, "--mode", "incremental")
        name = "dqn_btc-smoke" if smoke else "dqn_btc"
        mlflow.set_tracking_uri(uri)
        model = mlflow.pyfunc.load_model(f"models:/{name}@champion")
        inner = model.unwrap_python_model()
        reader, policy = inner.inputs, inner.policy
        window = bars.iloc[-reader.bars_needed:].assign(position=0.0).reset_index()
        observation, _ = reader.read(window.drop(columns="position"), 0.0)
        repeats = 20 if budget.quick else 200
        in_process = _median_ms(lambda: model.predict(window), repeats)
        forward_pass = _median_ms(lambda: policy(observation), repeats)
        numpy_ms, torch_ms = numpy_vs_torch_forward_ms(observation.shape[1], repeats)
        port = pick_free_port(LOOPBACK)
        server = subprocess.Popen([sys.executable, "-m", "experiments.serve", f"models:/{name}@champion",
                                   "--port", str(port)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  env={**os.environ, "PYTHONPATH": str(REPO), "MLFLOW_TRACKING_URI": uri},
                                  start_new_session=True)
        try:
            _wait_until_up(f"http://127.0.0.1:{port}/health")
            body = invocation_body(window.set_index("timestamp"))
            http = _median_ms(lambda: requests.post(f"http://127.0.0.1:{port}/invocations", json=body, timeout=30),
                              repeats)
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
        year = str(bars.index[-HOURS_A_YEAR])
        paper = _module(root, uri, "experiments.paper", f"models:/{name}@champion", "--bars", str(data),
                        "--start", year)
    budget_note = "the smoke budget (--quick)" if smoke else "the main job's budget"
    return Report("operations", __doc__.splitlines()[0], "experiments.retrain / serve / paper", "see each row", [
        Figure("incremental retrain vs full retrain (command line, each with its forward test)", "s", incremental,
               full, higher_is_better=False, target="<= 0.25x", met=incremental <= 0.25 * full, note=budget_note),
        Figure("one decision from the last bars, in process, vs the forward pass alone", "ms", in_process,
               forward_pass, higher_is_better=False, target="<= 20 ms", met=in_process <= 20.0,
               note=f"{reader.bars_needed} bars in, features and normalization computed; median of {repeats}"),
        Figure("the forward pass alone: numpy (what the registered model serves with) vs torch forward_inference of "
               "the same RLModule (128x128 dueling DQN)", "ms", numpy_ms, torch_ms, higher_is_better=False,
               note=f"one observation of {observation.shape[1]} floats; median of {repeats}"),
        Figure("one decision through mlflow models serve (HTTP, 127.0.0.1) vs in process", "ms", http, in_process,
               higher_is_better=False, target="<= 100 ms", met=http <= 100.0, note=f"median of {repeats}"),
        Figure(f"paper trading a year of hourly bars ({HOURS_A_YEAR:,}), command line, logged to MLflow", "s", paper,
               None, higher_is_better=False, target="<= 60 s", met=paper <= 60.0,
               note="includes loading the model and replaying its test window for the drift band"),
    ], {"full_s": full, "incremental_s": incremental, "paper_s": paper, "budget": budget_note})
