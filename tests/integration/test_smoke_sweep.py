"""The main job end to end on real Ray, RLlib, Tune and MLflow, with a tiny budget, and its model served over HTTP.

A join test of the fast lane (tests/lanes.py): one smoke run of conf/dqn_btc.yaml from the command line, as a user runs
it, read by every test here, and its registered model served by `python -m experiments.serve` on loopback. A second
sweep on the same windows, deflated by the trials ledger, is tests/integration/test_trials_ledger.py's."""
from __future__ import annotations

import math
import os
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

import envs
from envs.trading.env import SpotTradingEnv
from experiments.api.serving import invocation_body
from experiments.config.load import load_experiment
from tests.conftest import REPO
from tests.servers import served_model

BASELINES = [b.name for b in envs.family("trading/Spot-v0").baseline_table()]  # headline first


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    import ray

    ray.shutdown()  # another test module may have left a session behind
    out = tmp_path_factory.mktemp("smoke")
    uri = f"sqlite:///{out / 'mlflow.db'}"
    # As a user runs it, output piped (as in CI or under `| tee`), from the repo folder.
    result = subprocess.run(
        [sys.executable, "-m", "experiments.run", "conf/dqn_btc.yaml", "--smoke-test", "--no-dashboard",
         "--output", str(out), "--set", f"tracking.tracking_uri={uri}", "--set", "tracking.experiment_name=smoke"],
        cwd=REPO, capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONPATH": str(REPO)})
    (out / "stdout.txt").write_text(result.stdout)
    (out / "stderr.txt").write_text(result.stderr)
    return result.returncode, MlflowClient(uri), out


def test_exit_code_and_runs(smoke_run):
    code, client, _ = smoke_run
    assert code == 0
    experiment = client.get_experiment_by_name("smoke")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if r.data.tags.get("role") == "sweep"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(parents) == 1 and len(children) == 2
    assert all(r.data.tags["mlflow.parentRunId"] == parents[0].info.run_id for r in children)
    assert all(r.info.status == "FINISHED" for r in runs)
    # The smoke test keeps the two most recent walk-forward folds and samples one searched point for both.
    assert sorted(r.data.tags["fold"] for r in children) == ["2", "3"]
    assert {r.data.params["training.n_step"] for r in children} in ({"1"}, {"3"})
    for child in children:
        assert {"training.n_step", "environment.env_config.fold", "seed", "hardware/preset"} <= set(child.data.params)
        history = client.get_metric_history(child.info.run_id, "env_runners/num_env_steps_sampled_lifetime")
        assert [m.step for m in history] == [1, 2] and history[-1].value > history[0].value
    assert "eval/sharpe" in parents[0].data.metrics and "eval/buy_and_hold_sharpe" in parents[0].data.metrics


def test_checkpoint_and_evaluation_artifacts(smoke_run):
    _, client, out = smoke_run
    parent = next(r for r in client.search_runs([client.get_experiment_by_name("smoke").experiment_id])
                  if r.data.tags.get("role") == "sweep")
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"evaluation", "best_checkpoint", "experiment.yaml"} <= artifacts
    evaluation = {a.path for a in client.list_artifacts(parent.info.run_id, "evaluation")}
    assert {"evaluation/evaluation.csv", "evaluation/evaluation.png"} <= evaluation
    assert list(out.glob("dqn_btc/tune/dqn_btc-*/*DQN*/checkpoint_*"))  # Tune kept checkpoints
    verdict = {a.path for a in client.list_artifacts(parent.info.run_id, "verdict")}
    assert {"verdict/per_fold.csv", "verdict/summary.csv", "verdict/verdict.txt", "verdict/oos_returns.parquet",
            "verdict/folds.png"} <= verdict
    assert {"verdict/dsr/buy_and_hold", "verdict/wins/flat", "verdict/agent_sharpe_mean"} <= set(parent.data.metrics)


def test_buy_and_hold_row_matches_hand_computation(smoke_run):
    _, client, _ = smoke_run
    parent = next(r for r in client.search_runs([client.get_experiment_by_name("smoke").experiment_id])
                  if r.data.tags.get("role") == "sweep")
    local = client.download_artifacts(parent.info.run_id, "evaluation/evaluation.csv")
    table = pd.read_csv(local, index_col=0)
    assert list(table.index) == ["agent", *BASELINES]  # a row per baseline of the family's table, in its order
    # The registered policy is the most recent fold's: its evaluation is on fold 3's test window.
    env = SpotTradingEnv({**load_experiment(REPO / "conf/dqn_btc.yaml").environment.env_config, "fold": 3,
                          "split": "test"})
    lo, hi = env.market.bounds["test"]
    assert hi == len(env.market.closes)
    fill = env.market.opens[lo + 1] * (1 + 2e-4)      # conf: slippage 2 bps
    units = 1.0 / ((1 + 10e-4) * fill)                # conf: fee 10 bps on the entry
    expected = units * env.market.closes[hi - 1] - 1.0
    assert math.isclose(table.loc["buy_and_hold", "total_return"], expected, rel_tol=1e-9)
    assert table.loc["flat", "total_return"] == 0.0


def test_best_policy_is_registered_apart_from_the_real_model_and_loads(smoke_run):
    """A smoke run registers `<name>-smoke`, never a version of the real `dqn_btc`; the version says what
    made it; the model takes a batch, one observation or float64 and refuses a wrong shape briefly."""
    import gymnasium as gym
    import mlflow
    import numpy as np

    _, client, out = smoke_run
    assert not client.search_model_versions("name = 'dqn_btc'")
    versions = client.search_model_versions("name = 'dqn_btc-smoke'")
    assert len(versions) == 1
    tags = versions[0].tags
    assert tags["smoke_test"] == "True" and tags["experiment"] == "dqn_btc" and tags["fold"] == "3"
    assert tags["data"].endswith("BTC-USD_1h.parquet")
    assert "named dqn_btc-smoke, not dqn_btc: a --smoke-test run" in (out / "stdout.txt").read_text()
    assert client.get_experiment_by_name("smoke").tags["mlflow.experimentKind"] == "custom_model_development"
    mlflow.set_tracking_uri(client.tracking_uri)
    model = mlflow.pyfunc.load_model(f"models:/dqn_btc-smoke/{versions[0].version}")
    env = gym.make("trading/Spot-v0")
    observations = np.array([env.reset(seed=s)[0] for s in range(5)], dtype=np.float32)
    actions = model.predict(observations)
    assert actions.shape == (5,) and set(actions) <= {0, 1}
    assert np.array_equal(model.predict(observations.astype(np.float64)), actions)
    assert np.array_equal(model.predict(observations[2]), actions[2:3])  # one observation
    assert np.array_equal(model.predict(observations.tolist()), actions)
    # One line, as an MlflowException: what `mlflow models serve` answers with a 400 (docs/operations.md)
    with pytest.raises(MlflowException, match=r"must have shape") as error:
        model.predict(observations[:, :-1])
    assert len(str(error.value)) < 200 and "\n" not in str(error.value)


def test_the_run_says_how_long_it_took_next_to_the_estimate(smoke_run):
    """The plan's estimate once said 1.8 min for a 3-6 min run: now each run prints both, so they can be compared."""
    _, _, out = smoke_run
    text = (out / "stdout.txt").read_text()
    took = re.search(r"took ([\d.]+) (s|min|h), estimated ([\d.]+) (s|min|h) \(preset cpu", text)
    assert took, text[-3000:]
    assert "trial start(s) x 6 s + 35 s to start and score" in text
    assert "numbers from " in text and "--cross-cpu" in text  # the verdict names its machine


def test_the_runs_are_tagged_with_their_machine(smoke_run):
    _, client, _ = smoke_run
    parent = next(r for r in client.search_runs([client.get_experiment_by_name("smoke").experiment_id])
                  if r.data.tags.get("role") == "sweep")
    assert parent.data.tags["numerics"] == "native" and parent.data.tags["machine/cpu"]
    assert parent.data.tags["machine/torch_cpu_capability"]  # DEFAULT, AVX2, AVX512, ... (torch picks by CPU)


def test_the_docs_pyfunc_snippet_runs_as_written_from_a_fresh_shell(smoke_run, tmp_path):
    """docs/mlflow.md's snippet, from a folder whose ./mlruns/mlflow.db is the store (the smoke model's name in
    place of the main job's); it must not leave a stray ./mlflow.db."""

    _, client, out = smoke_run
    snippet = re.search(r"```python\n(.*?pyfunc\.load_model.*?)```", (REPO / "docs/mlflow.md").read_text(), re.S)
    code = snippet.group(1).replace("models:/dqn_btc/latest", "models:/dqn_btc-smoke/latest")
    (tmp_path / "mlruns").mkdir()
    (tmp_path / "mlruns" / "mlflow.db").symlink_to(out / "mlflow.db")
    (tmp_path / "data").symlink_to(REPO / "data")  # the snippet reads the bundled bars, as from the repository
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert re.search(r"\[[01] [01]\]\n\[[01]\]", result.stdout), result.stdout
    assert "target_position" in result.stdout and "applies_from" in result.stdout  # the decision from bars
    assert not (tmp_path / "mlflow.db").exists()


def test_the_scored_checkpoint_is_the_best_by_validation(smoke_run):
    """The registered checkpoint is the one with the best validation return of all iterations of the most
    recent fold's trials (each iteration is checkpointed in the smoke run), not the newest."""
    _, client, _ = smoke_run
    experiment_id = client.get_experiment_by_name("smoke").experiment_id
    runs = client.search_runs([experiment_id])
    parent = next(r for r in runs if r.data.tags.get("role") == "sweep")
    latest = [r for r in runs if r.data.tags.get("fold") == "3"]
    history = [(m.value, m.step) for r in latest for m in client.get_metric_history(r.info.run_id, "selection_score")]
    best_value = max(value for value, _ in history)
    assert float(parent.data.tags["best_checkpoint_score"]) == best_value
    # Iterations that tie for the best score (e.g. a policy that stayed flat) are all the best.
    best_steps = {step for value, step in history if value == best_value}
    assert int(parent.data.tags["best_checkpoint_iteration"]) in best_steps
    # selection_score is tune.metric smoothed as the shipped rule says (tune.checkpoint.select.smooth: the mean of the
    # last 3 iterations' validation returns; the smoke test keeps iterations before exploration ends eligible)
    for run in latest:
        validation = [m.value for m in sorted(client.get_metric_history(
            run.info.run_id, "evaluation/env_runners/episode_return_mean"), key=lambda m: m.step)]
        scores = [m.value for m in sorted(client.get_metric_history(run.info.run_id, "selection_score"),
                                          key=lambda m: m.step)]
        assert scores == pytest.approx([np.mean(validation[max(0, i - 2):i + 1]) for i in range(len(validation))],
                                       rel=1e-12)


def test_piped_output_shows_progress_and_no_noise(smoke_run):
    """Piped, the run prints plain progress lines while it trains, each thing once, no library noise."""
    code, _, out = smoke_run
    stdout, stderr = (out / "stdout.txt").read_text(), (out / "stderr.txt").read_text()
    assert code == 0, stderr[-2000:]
    progress = re.findall(r"^\[\d\d:\d\d\] trial (\w+_\d{5}) \((.*)\) (started|training|finished)", stdout, re.M)
    assert {event for *_, event in progress} >= {"started", "finished"}
    assert len({trial for trial, *_ in progress}) == 2 and all("fold=" in params for _, params, _ in progress)
    assert stdout.count("Using profile") == 1  # the plan, once
    assert "[estimate from the preset's declared env steps/s" in stdout  # not eaten as markup
    table = stdout[stdout.index("Ray Tune sweep"):]
    assert "nan" not in table.split("\n\n")[0]  # the last finished return, never nan
    for noise in ("on the new API stack", "TensorBoard", "Configuration for experiment", "\x1b[",
                  "Creating initial MLflow database tables", "Add type hints to the `predict` method",
                  "Validating input example"):
        assert noise not in stdout and noise not in stderr, noise
    command = next(line.split()[0] for line in stdout.splitlines() if " ui --backend-store-uri " in line)
    assert command.endswith("mlflow") and (REPO / command).is_file()  # runs as printed, venv not activated


def test_runs_carry_their_data_the_verdict_and_system_metrics(smoke_run):
    """The MLflow UI's comparison surface (docs/mlflow.md): each trial's fold of the bars as dataset inputs (the
    parent holds every fold's), the verdict as sortable metrics and filterable tags on the parent, and the trial's
    own system metrics at every iteration."""
    _, client, out = smoke_run
    runs = client.search_runs([client.get_experiment_by_name("smoke").experiment_id])
    parent = min((r for r in runs if r.data.tags.get("role") == "sweep"), key=lambda r: r.info.start_time)
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    for child in children:
        inputs = child.inputs.dataset_inputs
        assert sorted(i.dataset.name for i in inputs) == ["BTC-USD_1h[test]", "BTC-USD_1h[train]",
                                                          "BTC-USD_1h[validation]"]
        assert {t.key: t.value for t in inputs[0].tags}["fold"] == child.data.tags["fold"]
        for name in ("system/cpu_utilization_percentage", "system/system_memory_usage_megabytes",
                     "system/disk_usage_percentage"):
            assert [m.step for m in client.get_metric_history(child.info.run_id, name)] == [1, 2], name
        assert "nvidia-ml-py" in child.data.tags["system_metrics"] or "NVML" in child.data.tags["system_metrics"]
    by_child = {(i.dataset.name, i.dataset.digest) for c in children for i in c.inputs.dataset_inputs}
    assert {(i.dataset.name, i.dataset.digest) for i in parent.inputs.dataset_inputs} == by_child
    assert len(by_child) == 6  # two folds: the same names, other rows
    assert {parent.data.tags[f"verdict.{b}"] for b in BASELINES} <= {
        "supported", "not_supported"}
    assert parent.data.tags["ledger.attempt"] == "1" and len(parent.data.tags["ledger.key"]) == 16
    printed = (out / "stdout.txt").read_text()  # the trials ledger's first attempt on these windows
    assert "verdict over attempt 1 on these windows: 1 configuration(s) tried, effective 1.0" in printed
    assert not any(k.startswith("system/") for k in parent.data.metrics)


@pytest.fixture(scope="module")
def served(smoke_run):
    """The smoke run's first registered model, served by `python -m experiments.serve ... --port 0`."""
    _, client, out = smoke_run
    log = out / "serve.log"
    with served_model("models:/dqn_btc-smoke/1", client.tracking_uri, log, REPO) as url:
        yield url, log


def test_the_served_model_answers_bars_with_the_in_process_decision_and_a_400_that_ends_with_why(smoke_run, served):
    import mlflow
    import requests

    from envs.trading.data import load_bars

    _, client, _ = smoke_run
    url, log = served
    assert "127.0.0.1" in log.read_text() and "warning" not in log.read_text()
    mlflow.set_tracking_uri(client.tracking_uri)
    model = mlflow.pyfunc.load_model("models:/dqn_btc-smoke/1")
    bars = load_bars(REPO / "data" / "raw" / "BTC-USD_1h.parquet")
    needed = model.unwrap_python_model().inputs.bars_needed
    for end in (len(bars), len(bars) - 100, len(bars) - 333):
        window = bars.iloc[end - needed:end].assign(position=1.0)
        answer = requests.post(f"{url}/invocations", json=invocation_body(window), timeout=30)
        assert answer.status_code == 200, answer.text
        served_decision = answer.json()["predictions"][0]
        local = model.predict(window.reset_index()).iloc[0]
        assert served_decision["action"] == local["action"] and served_decision["bar_time"] == local["bar_time"]
    too_few = requests.post(f"{url}/invocations", json=invocation_body(bars.iloc[-10:]), timeout=30)
    assert too_few.status_code == 400
    assert too_few.json()["message"].endswith(f"the model needs the last {needed} 1h bars (features' look-back 96 + "
                                              "window 24 - 1); got 10")
    four_hourly = requests.post(f"{url}/invocations", json=invocation_body(bars.iloc[-4 * needed::4]), timeout=30)
    assert four_hourly.status_code == 400 and "must be consecutive 1h bars" in four_hourly.json()["message"]
    # The model's logged requirements: pinned CPU packages from PyPI, no torch, no Ray (so no CUDA wheels)
    requirements = mlflow.artifacts.download_artifacts("models:/dqn_btc-smoke/1") + "/requirements.txt"
    with open(requirements) as handle:
        listed = handle.read().lower()
    assert "ta-lib==" in listed and "numpy==" in listed and "torch" not in listed and "ray" not in listed
