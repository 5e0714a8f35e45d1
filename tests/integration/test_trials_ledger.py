"""Every scored configuration is recorded in the tracking store's trials ledger, keyed by the data's content and the
test windows, and the next verdict on those windows counts it: the research loop's second hypothesis (another feature
set) on the API notebook's store is attempt 2, deflated by the first (tests/integration/api_smoke.py makes both
sweeps, which the MLflow UI test reads too). Which features mattered is logged from validation data."""
from __future__ import annotations

from mlflow.tracking import MlflowClient

import envs
from tests.integration.api_smoke import second_sweep

BASELINES = tuple(b.name for b in envs.family("trading/Spot-v0").baseline_table())  # read, never pinned


def test_a_second_sweep_on_the_same_windows_is_attempt_2_deflated_by_the_ledger(tmp_path_factory, ray_cluster):
    uri, name, printed = second_sweep(tmp_path_factory, ray_cluster)
    assert "verdict over attempt 2 on these windows: 2 configuration(s) tried (1 in this run)" in printed
    assert "features: 9 columns of 9 feature(s), warm-up 167 bars; computed" in printed  # basic + RSI(14)
    client = MlflowClient(uri)
    ledger = client.get_experiment_by_name("trials-ledger")
    counts = {k.rsplit(".", 1)[1]: v for k, v in ledger.tags.items() if k.startswith("ledger.")}
    assert counts["attempts"] == "2" and counts["configurations"] == "2" and "BTC-USD 1h" in counts["data"]
    parents = sorted((r for r in client.search_runs([client.get_experiment_by_name(name).experiment_id])
                      if r.data.tags.get("role") == "sweep"), key=lambda r: r.info.start_time)
    before, after = (p.data.metrics for p in parents)
    assert (before["verdict/attempt"], after["verdict/attempt"]) == (1.0, 2.0)
    assert (before["verdict/configurations_tried"], after["verdict/configurations_tried"]) == (1.0, 2.0)
    assert all(after[f"verdict/dsr/{b}"] <= before[f"verdict/dsr/{b}"] + 1e-12
               for b in BASELINES if f"verdict/dsr/{b}" in before)
    importance = {a.path for a in client.list_artifacts(parents[1].info.run_id, "importance")}
    assert {"importance/importance.csv", "importance/importance.png"} <= importance
    assert "features that mattered (validation return drop when permuted" in printed
