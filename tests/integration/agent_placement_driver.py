"""One agent's sweep for tests/integration/test_agents_placement.py, run as its own Ray driver.

`python agent_placement_driver.py SPEC.json`: joins the cluster at spec["address"] and runs spec["trials"]
trials asking for the GPU share and concurrency of the agent's plan. Each trial records its GPU ids and when
it ran, and waits (up to a timeout) until spec["expect"] trials run across all agents, so the observed
overlap is the scheduler's limit rather than start-up jitter on two cores.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import ray
from ray import tune

WAIT_FOR_PEERS_S = 30.0


def _running(shared: Path) -> int:
    return len(list(shared.glob("start_*"))) - len(list(shared.glob("end_*")))


def record_placement(config: dict[str, Any]) -> None:
    shared = Path(config["shared"])
    name = f"{config['agent']}_{tune.get_context().get_trial_id()}"
    start = time.time()
    (shared / f"start_{name}").touch()
    while _running(shared) < config["expect"] and time.time() - start < WAIT_FOR_PEERS_S:
        time.sleep(0.1)
    time.sleep(0.5)
    record = {"agent": config["agent"], "gpu_ids": [str(i) for i in ray.get_gpu_ids()], "start": start,
              "end": time.time()}
    (shared / f"record_{name}.json").write_text(json.dumps(record))
    (shared / f"end_{name}").touch()
    tune.report({"done": 1})


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    ray.init(address=spec["address"], logging_level="ERROR", log_to_driver=False)
    trainable = tune.with_resources(record_placement, {"cpu": 1, "gpu": spec["gpus_per_trial"]})
    tuner = tune.Tuner(
        trainable,
        param_space={"shared": spec["shared"], "expect": spec["expect"], "agent": spec["agent"]},
        tune_config=tune.TuneConfig(num_samples=spec["trials"], max_concurrent_trials=spec["max_concurrent_trials"]),
        run_config=tune.RunConfig(storage_path=spec["storage"], name=spec["agent"], verbose=0),
    )
    results = tuner.fit()
    sys.exit(1 if results.errors else 0)


if __name__ == "__main__":
    main(sys.argv[1])
