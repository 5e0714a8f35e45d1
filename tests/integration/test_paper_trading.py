"""Serving and paper trading the champion of the operations loop (tests/integration/conftest.py): a real
`experiments.serve` process on 127.0.0.1, paper trading in process and through it, a replay of the backtest's test
window to the last digit, and a killed paper trader that resumes without a fill twice or missed. What the served model
answers (a decision, a 400 that says why) is the join test's, on the main job's smoke model
(tests/integration/test_smoke_sweep.py)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import REPO
from tests.servers import served_model


@pytest.fixture(scope="module")
def served(operations_loop):
    """The champion served by `python -m experiments.serve models:/...@champion --port 0`, as a user starts it
    (tests/servers.py); the served smoke model's answers are tests/integration/test_smoke_sweep.py's."""
    log = operations_loop.root / "serve.log"
    with served_model(f"models:/{operations_loop.model}@champion", operations_loop.tracking_uri, log, REPO) as url:
        yield url, log


def equity_history(client, run_id: str) -> list:
    return sorted(client.get_metric_history(run_id, "equity"), key=lambda m: m.step)


def test_paper_replay_of_the_champions_test_window_is_its_backtest_to_the_last_digit(operations_loop):
    client = operations_loop.client
    version = client.get_model_version(operations_loop.model, "1")
    trained_on = client.get_run(version.run_id).data.params["environment.env_config.data_path"]
    result = operations_loop.call("experiments.paper", f"models:/{operations_loop.model}/1", "--bars", trained_on,
                                    "--start", version.tags["test_start"])
    assert result.returncode == 0, result.stdout + result.stderr
    backtest = client.get_run(version.run_id).data.metrics
    paper = client.search_runs([client.get_experiment_by_name(f"{operations_loop.model}-paper").experiment_id],
                               "tags.bars = '" + trained_on + "'")[0]
    history = equity_history(client, paper.info.run_id)
    assert history[-1].value == backtest["eval/final_equity"]  # to the last digit
    assert paper.data.metrics["fills"] == backtest["eval/trades"]
    assert pd.Timestamp(history[0].step, unit="s", tz="UTC") == pd.Timestamp(version.tags["test_start"])
    [replayed] = paper.inputs.dataset_inputs  # the bars it replayed, as the runs table's Dataset column shows
    assert replayed.dataset.name == f"{Path(trained_on).stem}[paper]"


def test_killed_paper_trading_resumes_without_a_fill_twice_or_missed_and_agrees_with_the_served_model(
        operations_loop, served):
    from envs.trading.data import load_bars, save_bars

    loop, (url, _) = operations_loop, served
    bars = load_bars(loop.data)
    growing = save_bars(bars.iloc[:-200], loop.root / "live.parquet", "BTC-USD", "1h")
    model = f"models:/{loop.model}@champion"
    follow = subprocess.Popen([sys.executable, "-m", "experiments.paper", model, "--bars", growing, "--follow",
                               "--poll-seconds", "0.2"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              env={**os.environ, "PYTHONPATH": str(REPO), "MLFLOW_TRACKING_URI": loop.tracking_uri},
                              start_new_session=True)
    client = loop.client
    deadline = time.monotonic() + 120
    run = None
    while time.monotonic() < deadline and run is None:
        time.sleep(1)
        experiment = client.get_experiment_by_name(f"{loop.model}-paper")
        runs = client.search_runs([experiment.experiment_id], f"tags.bars = '{growing}'") if experiment else []
        if runs and "paper.state" in runs[0].data.tags:
            run = runs[0]
    assert run is not None, follow.stdout.read().decode() if follow.poll() is not None else "no state logged"
    save_bars(bars, loop.root / "live.tmp.parquet", "BTC-USD", "1h").replace(growing)  # 200 bars arrive
    time.sleep(0.5)
    os.killpg(follow.pid, signal.SIGKILL)  # mid-stream: no chance to flush anything
    follow.wait(timeout=20)
    resumed = loop.call("experiments.paper", model, "--bars", growing)
    assert resumed.returncode == 0 and "resumed after" in resumed.stdout, resumed.stdout + resumed.stderr
    history = equity_history(client, run.info.run_id)
    steps = [m.step for m in history]
    assert steps == sorted(set(steps))  # no bar twice
    expected = bars.index[bars.index > pd.Timestamp(client.get_model_version(loop.model, "1").tags["data_end"])]
    assert steps == [int(t.timestamp()) for t in expected]  # none missed
    # The same bars through the served model (HTTP) give the same account, fill for fill
    through_http = loop.call("experiments.paper", model, "--bars", loop.data, "--serve-url", url)
    assert through_http.returncode == 0, through_http.stdout + through_http.stderr
    other = client.search_runs([client.get_experiment_by_name(f"{loop.model}-paper").experiment_id],
                               f"tags.bars = '{loop.data}'")[0]
    assert [m.value for m in equity_history(client, other.info.run_id)] == [m.value for m in history]
    fills = client.get_metric_history(run.info.run_id, "fills")
    assert np.all(np.diff([m.value for m in sorted(fills, key=lambda m: m.step)]) >= 0)


def test_an_alias_that_does_not_exist_is_refused_in_one_line(operations_loop):
    for command in (["experiments.paper", f"models:/{operations_loop.model}@nope", "--bars", operations_loop.data],
                    ["experiments.serve", f"models:/{operations_loop.model}@nope"]):
        result = operations_loop.module(*command)
        assert result.returncode == 2 and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
        assert "no such registered model version or alias (its aliases: challenger, champion)" in result.stderr


LOAD_AND_DECIDE = """
import json, sys
import mlflow
from envs.trading.data import load_bars
model = mlflow.pyfunc.load_model(sys.argv[1])
decision = model.predict(load_bars(sys.argv[2]).iloc[-model.unwrap_python_model().inputs.bars_needed:])
print(json.dumps({"action": int(decision["action"].iloc[0]),
                  "imported": sorted(m for m in ("torch", "ray") if m in sys.modules)}))
"""


def test_the_served_model_decides_from_bars_without_importing_torch_or_ray(operations_loop):
    """Its requirements leave torch and Ray out (no CUDA wheels): loading it and deciding must not need them."""
    result = subprocess.run(
        [sys.executable, "-c", LOAD_AND_DECIDE, f"models:/{operations_loop.model}@champion", str(operations_loop.data)],
        cwd=operations_loop.root, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO), "MLFLOW_TRACKING_URI": operations_loop.tracking_uri})
    assert result.returncode == 0, result.stderr[-2000:]
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["imported"] == [] and answer["action"] in (0, 1)


def test_paper_trading_steps_over_holes_a_file_records_and_refuses_others_before_a_run_opens(operations_loop, served):
    """A file imported with --gaps drop: paper trading in process and through the server step over its holes alike
    and finish (it used to crash mid-run and leave the run RUNNING); the same holes in a file that does not record
    them are refused in one line before any MLflow run opens."""
    from envs.trading.data import load_bars, save_bars

    loop, (url, _) = operations_loop, served
    bars = load_bars(loop.data)
    holed = bars.drop(bars.index[-500:-480]).drop(bars.index[-300:-297])
    recorded = save_bars(holed, loop.root / "holed.parquet", "BTC-USD", "1h", gaps="drop")
    model = f"models:/{loop.model}@champion"
    # The last 600 bars, without the drift band (it replays the model's whole test window first)
    window = ["--start", str(holed.index[-600]), "--drift-bars", str(len(holed))]
    local = loop.call("experiments.paper", model, "--bars", recorded, *window)
    assert local.returncode == 0, local.stdout + local.stderr
    client = loop.client
    experiment = client.get_experiment_by_name(f"{loop.model}-paper").experiment_id
    run = client.search_runs([experiment], f"tags.bars = '{recorded}'")[0]
    assert run.info.status == "FINISHED" and float(run.data.metrics["fills"]) > 0
    steps = [m.step for m in equity_history(client, run.info.run_id)]
    assert int(holed.index[-480].timestamp()) in steps and int(bars.index[-490].timestamp()) not in steps
    served_copy = save_bars(holed, loop.root / "holed_http.parquet", "BTC-USD", "1h", gaps="drop")
    through_http = loop.call("experiments.paper", model, "--bars", served_copy, "--serve-url", url, *window)
    assert through_http.returncode == 0, through_http.stdout + through_http.stderr
    other = client.search_runs([experiment], f"tags.bars = '{served_copy}'")[0]
    assert [m.value for m in equity_history(client, other.info.run_id)] == [
        m.value for m in equity_history(client, run.info.run_id)]

    unrecorded = save_bars(holed, loop.root / "unrecorded.parquet", "BTC-USD", "1h")  # gaps: ffill, yet holes
    refused = loop.call("experiments.paper", model, "--bars", unrecorded, *window)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert "23 missing bars" in refused.stderr and "--gaps drop" in refused.stderr
    assert not client.search_runs([experiment], f"tags.bars = '{unrecorded}'")


def test_paper_trading_a_csv_export_is_paper_trading_its_bars(operations_loop):
    """A CSV export is read through the importer's checks (it used to be refused as not a parquet file) and trades
    bar for bar as the same bars in a parquet."""
    from envs.trading.data import load_bars, save_bars

    loop = operations_loop
    bars = load_bars(loop.data)
    parquet = save_bars(bars, loop.root / "for_csv.parquet", "BTC-USD", "1h")
    export = bars.reset_index()
    export["timestamp"] = export["timestamp"].dt.strftime("%Y-%m-%d %H:%M:%S")
    csv = loop.root / "export.csv"
    export.assign(Symbol="BTCUSD").to_csv(csv, index=False, float_format="%.17g")
    model = f"models:/{loop.model}@champion"
    for path in (parquet, csv):  # the last 300 bars, without the drift band (its replay of the test window)
        result = loop.call("experiments.paper", model, "--bars", path, "--start", str(bars.index[-300]),
                             "--drift-bars", str(len(bars)))
        assert result.returncode == 0, result.stdout + result.stderr
    client = loop.client
    experiment = client.get_experiment_by_name(f"{loop.model}-paper").experiment_id
    histories = [equity_history(client, client.search_runs([experiment], f"tags.bars = '{path}'")[0].info.run_id)
                 for path in (parquet, csv)]
    parquet_steps, csv_steps = ([(m.step, m.value) for m in history] for history in histories)
    assert len(parquet_steps) == 300 and parquet_steps == csv_steps
