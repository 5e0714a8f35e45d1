"""`tracking`: time MLflow logging adds per Tune result, Tune's stock callback vs the platform's.

Both callbacks get the same calls Tune makes (`on_trial_start`, `on_trial_result`,
`on_trial_complete`) for the same trials, with the same result: a real RLlib 2.60 DQN result of
conf/dqn_btc.yaml (benchmarks/fixtures/rllib_dqn_result.json, ~550 flattened keys of which ~350
are numeric, config included as Tune includes it), each into its own fresh local sqlite store
(store creation is not timed). Peer: `ray.air.integrations.mlflow.MLflowLoggerCallback` (one
`log_metric` call per key). Platform: `experiments.tracking.runs.MlflowTrialCallback` (one `log_batch`
per result, runs nested under a parent run). After the run, the stores are read back to check
that every trial was fully logged: every numeric key at every step, every run FINISHED.
"""
from __future__ import annotations

import copy
import json
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from experiments.benchmark.common import REPO, Budget, Figure, Report

FIXTURE = REPO / "benchmarks" / "fixtures" / "rllib_dqn_result.json"
TARGET_MS = 50.0


class FakeTrial:
    """What the callbacks read from a Tune Trial: id, config, name, local path."""

    def __init__(self, trial_id: str, config: dict[str, Any], local_path: str) -> None:
        self.trial_id = trial_id
        self.config = config
        self.local_path = local_path
        self.evaluated_params: dict[str, Any] = {}

    def __str__(self) -> str:
        return f"DQN_bench_{self.trial_id}"

    def __hash__(self) -> int:
        return hash(self.trial_id)


def load_fixture() -> tuple[dict[str, Any], dict[str, Any]]:
    data = json.loads(FIXTURE.read_text())
    return data["result"], data["config"]


def results_for(trial: FakeTrial, base: dict[str, Any], count: int) -> list[dict[str, Any]]:
    out = []
    for i in range(1, count + 1):
        result = copy.deepcopy(base)
        result.update(training_iteration=i, trial_id=trial.trial_id, config=trial.config)
        result["env_runners"]["num_env_steps_sampled_lifetime"] = 4000.0 * i
        out.append(result)
    return out


def _drive(callback: Any, trials: list[FakeTrial], results: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    start_s, result_s = [], []
    for trial in trials:
        t = time.perf_counter()
        callback.on_trial_start(iteration=0, trials=trials, trial=trial)
        start_s.append(time.perf_counter() - t)
    for step in range(len(next(iter(results.values())))):  # Tune interleaves trials' results
        for trial in trials:
            t = time.perf_counter()
            callback.on_trial_result(iteration=step, trials=trials, trial=trial, result=results[trial.trial_id][step])
            result_s.append(time.perf_counter() - t)
    t = time.perf_counter()
    for trial in trials:
        callback.on_trial_complete(iteration=0, trials=trials, trial=trial)
    complete_s = time.perf_counter() - t
    return {"trial_start_s": start_s, "per_result_s": result_s, "complete_s": complete_s,
            "ms_per_result_mean": 1000 * sum(result_s) / len(result_s),
            "ms_per_result_max": 1000 * max(result_s)}


def _store_counts(db: Path) -> dict[str, Any]:
    with sqlite3.connect(db) as conn:
        per_run = dict(conn.execute(
            "SELECT r.run_uuid, COUNT(m.key) FROM runs r LEFT JOIN metrics m ON m.run_uuid = r.run_uuid "
            "GROUP BY r.run_uuid").fetchall())
        keys = dict(conn.execute("SELECT run_uuid, COUNT(DISTINCT key) FROM metrics GROUP BY run_uuid").fetchall())
        status = dict(conn.execute("SELECT run_uuid, status FROM runs").fetchall())
        tags = dict(conn.execute(
            "SELECT run_uuid, value FROM tags WHERE key = 'trial_name'").fetchall())
    trial_runs = [run for run in per_run if run in tags]
    return {"rows": {r: per_run[r] for r in trial_runs}, "keys": {r: keys.get(r, 0) for r in trial_runs},
            "status": {r: status[r] for r in trial_runs}}


def _fully_logged(counts: dict[str, Any], trials: int, expected_keys: int, steps: int) -> tuple[bool, str]:
    if len(counts["rows"]) != trials:
        return False, f"{len(counts['rows'])} trial runs, expected {trials}"
    bad = [r for r in counts["rows"] if counts["keys"][r] < expected_keys or counts["rows"][r] < expected_keys * steps
           or counts["status"][r] != "FINISHED"]
    if bad:
        r = bad[0]
        return False, (f"run {r}: {counts['keys'][r]} keys / {counts['rows'][r]} rows / {counts['status'][r]}, "
                       f"expected {expected_keys} keys x {steps} steps, FINISHED")
    return True, f"{trials} runs x {expected_keys} keys x {steps} steps, all FINISHED"


def stock_callback(uri: str, name: str):
    from ray.air.integrations.mlflow import MLflowLoggerCallback

    callback = MLflowLoggerCallback(tracking_uri=uri, experiment_name=name, save_artifact=False)
    callback.setup()
    return callback


def platform_callback(uri: str, name: str):
    from experiments.tracking.runs import MlflowTrialCallback, flatten, make_client, open_experiment

    client = make_client(uri)
    experiment_id = open_experiment(client, name, uri)
    parent = client.create_run(experiment_id, run_name="bench-parent", tags={"role": "sweep"})
    callback = MlflowTrialCallback(uri, experiment_id, parent.info.run_id,
                                   lambda trial: flatten(trial.config), {"bench": "tracking"})
    return callback, client, parent.info.run_id


def async_platform_callback(uri: str, name: str):
    """The platform's callback with MLflow's asynchronous log_batch (a proposal for experiments.tracking.runs):
    Tune's loop only enqueues each result; MLflow's writer thread stores it, and a trial's run is
    closed only after all its batches are stored."""
    import time as _time

    from mlflow.entities import Metric

    from experiments.tracking.runs import MlflowTrialCallback, numeric_metrics

    class AsyncMlflowTrialCallback(MlflowTrialCallback):
        pending: dict[str, list[Any]] = {}

        def on_trial_result(self, iteration, trials, trial, result, **info):
            run_id = self._run_for(trial)
            stamp = int(_time.time() * 1000)
            step = int(result.get("training_iteration", 0))
            items = [Metric(k, v, stamp, step) for k, v in numeric_metrics(result).items()]
            for start in range(0, len(items), 1000):
                self.pending.setdefault(trial.trial_id, []).append(
                    self.client.log_batch(run_id, metrics=items[start:start + 1000], synchronous=False))

        def _finish(self, trial, status):
            for operation in self.pending.pop(trial.trial_id, []):
                operation.wait()
            super()._finish(trial, status)

    callback, client, parent_id = platform_callback(uri, name)
    fast = AsyncMlflowTrialCallback(callback.tracking_uri, callback.experiment_id, callback.parent_run_id,
                                    callback.trial_params, callback.tags)
    return fast, client, parent_id


def _warm_store(uri: str) -> None:
    """Create the sqlite schema (about 2 s of migrations) before any clock runs."""
    from mlflow.tracking import MlflowClient

    from experiments.tracking.runs import make_client

    make_client(uri).search_experiments()
    MlflowClient(uri).search_experiments()


def run(budget: Budget) -> Report:
    import logging
    import warnings

    from experiments.tracking.runs import numeric_metrics

    warnings.filterwarnings("ignore")
    logging.getLogger("mlflow").setLevel(logging.ERROR)
    per_trial = budget.pick(full=5, quick=1)  # results per trial
    trials_n = 1 if budget.quick else 2
    base, config = load_fixture()
    expected_keys = len(numeric_metrics(base))
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-tracking-") as tmp:
        sides = {}
        for side in ("peer", "platform", "platform_async"):
            db = Path(tmp) / side / "mlflow.db"
            db.parent.mkdir()
            uri = f"sqlite:///{db}"
            _warm_store(uri)
            trials = [FakeTrial(f"{side[:2]}{i:05d}", config, str(Path(tmp) / side / f"trial{i}"))
                      for i in range(trials_n)]
            results = {t.trial_id: results_for(t, base, per_trial) for t in trials}
            sides[side] = (uri, db, trials, results)
        uri, db, trials, results = sides["peer"]
        out["peer"] = _drive(stock_callback(uri, "bench"), trials, results)
        out["peer"]["check"] = _fully_logged(_store_counts(db), trials_n, expected_keys, per_trial)
        uri, db, trials, results = sides["platform"]
        callback, client, parent_id = platform_callback(uri, "bench")
        out["platform"] = _drive(callback, trials, results)
        client.set_terminated(parent_id)
        out["platform"]["check"] = _fully_logged(_store_counts(db), trials_n, expected_keys, per_trial)

        uri, db, trials, results = sides["platform_async"]
        callback, client, parent_id = async_platform_callback(uri, "bench")
        out["platform_async"] = _drive(callback, trials, results)
        client.set_terminated(parent_id)
        out["platform_async"]["check"] = _fully_logged(_store_counts(db), trials_n, expected_keys, per_trial)

    ours, theirs = out["platform"], out["peer"]
    figure = Figure("MLflow time per Tune result", "ms", ours["ms_per_result_mean"], theirs["ms_per_result_mean"],
                    higher_is_better=False, target=f"<= {TARGET_MS:.0f} ms, every trial fully logged")
    figure.met = ours["ms_per_result_mean"] <= TARGET_MS and ours["check"][0]
    figure.note = f"platform: {ours['check'][1]}; peer: {theirs['check'][1]}"
    mine = out["platform_async"]
    async_figure = Figure("same, with async log_batch (proposed for experiments.tracking.runs)", "ms",
                          mine["ms_per_result_mean"], theirs["ms_per_result_mean"], higher_is_better=False,
                          target=f"<= {TARGET_MS:.0f} ms, every trial fully logged")
    async_figure.met = mine["ms_per_result_mean"] <= TARGET_MS and mine["check"][0]
    async_figure.note = (f"{mine['check'][1]}; the writes happen on MLflow's writer thread, waited for at "
                         f"trial end ({1000 * mine['complete_s']:.0f} ms for all trials)")
    start = Figure("MLflow time per trial start (run + params)", "ms",
                   1000 * sum(ours["trial_start_s"]) / trials_n, 1000 * sum(theirs["trial_start_s"]) / trials_n,
                   higher_is_better=False)
    details = {"fixture": str(FIXTURE.relative_to(REPO)), "numeric_keys_per_result": expected_keys,
               "params_per_trial": len(_flat(config)), "trials": trials_n, "results_per_trial": per_trial,
               "store": "sqlite (local file, fresh per side)", "platform": ours, "platform_async": mine,
               "peer": theirs}
    return Report("tracking", __doc__.splitlines()[0], "experiments.tracking.runs.MlflowTrialCallback",
                  "ray.air.integrations.mlflow.MLflowLoggerCallback", [figure, async_figure, start], details)


def _flat(config: dict[str, Any]) -> dict[str, Any]:
    from experiments.tracking.runs import flatten

    return flatten(config)
