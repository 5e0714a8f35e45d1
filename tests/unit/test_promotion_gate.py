"""The promotion gate on forward returns, and how its decision reaches a real (sqlite) model registry."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from envs.errors import InputError
from experiments.config.retrain_settings import GateSection
from experiments.results.promotion import (
    Decision,
    edge_dsr,
    judge,
    prior_excess_sharpes,
    record,
    resolve_version,
)

BASELINES = ["buy_and_hold", "flat"]


def forward(challenger_drift: float, seed: int = 0, n: int = 720) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    market = rng.normal(0.0, 0.01, n)
    returns = pd.DataFrame({"challenger": market * 0.5 + challenger_drift + rng.normal(0, 0.002, n),
                            "champion": market * 0.5 + rng.normal(0, 0.002, n), "buy_and_hold": market,
                            "flat": np.zeros(n)})
    table = pd.DataFrame({"sharpe": returns.mean() / returns.std(ddof=0).replace(0, np.nan) * np.sqrt(8760)}).fillna(0)
    return table, returns


def test_a_challenger_that_beats_the_champion_and_every_baseline_by_enough_is_promoted():
    table, returns = forward(0.002)
    decision = judge(table, returns, "challenger", "champion", BASELINES, GateSection(), {}, pbo=0.2)
    assert decision.promote and decision.reason.startswith("promoted: it beats the champion")
    assert decision.numbers["dsr_vs_champion"] > 0.95 and decision.numbers["pbo"] == 0.2


@pytest.mark.parametrize("drift, gate, pbo, why", [
    (-0.0005, GateSection(), None, "does not beat the champion's"),
    (0.00002, GateSection(), None, "DSR of its excess over the champion"),
    (0.002, GateSection(max_pbo=0.1), 0.6, "its sweep's PBO 0.60 > 0.1"),
])
def test_a_challenger_the_gate_refuses_says_why(drift, gate, pbo, why):
    table, returns = forward(drift)
    decision = judge(table, returns, "challenger", "champion", BASELINES, gate, {}, pbo=pbo)
    assert not decision.promote and decision.reason.startswith("not promoted: ") and why in decision.reason


def test_every_earlier_challenger_deflates_the_next_ones_dsr():
    _, returns = forward(0.0004, seed=1)
    excess = (returns["challenger"] - returns["champion"]).to_numpy()
    alone = edge_dsr(excess, [])
    after_many = edge_dsr(excess, [0.05, -0.04, 0.08, -0.06, 0.03, 0.07])
    assert 0 < after_many < alone < 1
    assert edge_dsr(np.zeros(100), []) == 0.0  # no variation, no evidence


@pytest.fixture
def registry(tmp_path) -> tuple[MlflowClient, str]:
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    client.create_registered_model("m")
    for _ in range(2):
        client.create_model_version("m", source=str(tmp_path), run_id=None)
    client.set_registered_model_alias("m", "champion", "1")
    return client, "m"


class FailsAfter:
    """A real client that dies after `calls` registry writes, as a killed retrain would."""

    def __init__(self, client: MlflowClient, calls: int) -> None:
        self.client, self.left = client, calls

    def __getattr__(self, name: str):
        method = getattr(self.client, name)

        def call(*args, **kwargs):
            if self.left == 0:
                raise KeyboardInterrupt
            self.left -= 1
            return method(*args, **kwargs)
        return call


def test_a_retrain_killed_while_recording_never_leaves_an_alias_on_a_half_recorded_version(registry):
    client, name = registry
    decision = Decision(True, "promoted: test", {"dsr_vs_champion": 0.99, "forward_sharpe": 1.5})
    lineage = {"parent_version": "1", "retrain/mode": "incremental"}
    for calls in range(0, 12):
        try:
            record(FailsAfter(client, calls), name, "2", decision, lineage)
        except KeyboardInterrupt:
            assert client.get_registered_model(name).aliases == {"champion": 1}  # not moved
            continue
        version = client.get_model_version(name, "2")
        assert client.get_registered_model(name).aliases == {"champion": 2}
        assert version.tags["gate/dsr_vs_champion"] == "0.99" and version.description == "promoted: test"
        break
    else:
        pytest.fail("record never completed")


def test_a_model_uri_that_names_no_version_is_refused_in_one_line(registry):
    client, name = registry
    assert str(resolve_version(client, "models:/m@champion").version) == "1"
    assert str(resolve_version(client, "models:/m/latest").version) == "2"
    for uri, why in (("models:/m@nope", "no such registered model version or alias (its aliases: champion)"),
                     ("models:/other@champion", "no such registered model version or alias"),
                     ("runs:/abc/policy", "give a registered model as models:/NAME@ALIAS")):
        with pytest.raises(InputError) as refused:
            resolve_version(client, uri)
        assert why in str(refused.value) and "\n" not in str(refused.value)


def test_earlier_challengers_excess_sharpes_over_a_baseline_deflate_the_next_dsr_against_it(registry):
    """The gate's DSRs against the baselines were plain PSRs against 0. Two earlier challengers, judged and recorded
    in a real registry, leave their excess Sharpes over each baseline on their versions; the third's DSR against
    buy-and-hold is deflated by them: lower than its PSR alone."""
    client, name = registry
    client.create_model_version(name, source="unused", run_id=None)  # version 3: the challenger judged now
    opponents = ["champion", *BASELINES]
    for version, drift, seed in (("1", 0.0015, 1), ("2", -0.0005, 2)):
        table, returns = forward(drift, seed)
        record(client, name, version, judge(table, returns, "challenger", "champion", BASELINES, GateSection(), {},
                                            None), {})
    tags = [client.get_model_version(name, v).tags for v in "12"]
    assert all("gate/excess_sharpe_vs_buy_and_hold" in t and "gate/excess_sharpe_vs_flat" in t for t in tags)
    earlier = [float(t["gate/excess_sharpe_vs_buy_and_hold"]) for t in tags]
    assert abs(earlier[0] - earlier[1]) > 0.02  # they vary
    prior = prior_excess_sharpes(client, name, "3", opponents)
    assert sorted(prior["buy_and_hold"]) == sorted(earlier) and len(prior["champion"]) == 2
    table, returns = forward(0.0012, seed=3)
    alone = judge(table, returns, "challenger", "champion", BASELINES, GateSection(), {}, None)
    deflated = judge(table, returns, "challenger", "champion", BASELINES, GateSection(), prior, None)
    psr = alone.numbers["dsr_vs_buy_and_hold"]
    excess = (returns["challenger"] - returns["buy_and_hold"]).to_numpy()
    assert psr == pytest.approx(edge_dsr(excess, []))
    assert 0 < deflated.numbers["dsr_vs_buy_and_hold"] < psr
    assert deflated.numbers["dsr_vs_buy_and_hold"] == pytest.approx(edge_dsr(excess, earlier))


def test_a_version_recorded_before_the_baselines_tags_counts_only_against_the_champion(registry):
    client, name = registry
    client.set_model_version_tag(name, "1", "gate/excess_sharpe_vs_champion", "0.03")  # what older retrains recorded
    prior = prior_excess_sharpes(client, name, "2", ["champion", "buy_and_hold"])
    assert prior == {"champion": [0.03], "buy_and_hold": []}


def test_a_smoke_test_retrain_never_promotes_on_its_own():
    from experiments.api.retraining import smoke_held

    passed = Decision(True, "first champion: its verdict supports an edge over every baseline", {"forward_sharpe": 2.0})
    held = smoke_held(passed, smoke_test=True, force=False)
    assert not held.promote and held.numbers == passed.numbers
    assert held.reason.startswith("not promoted: a --smoke-test run never sets the champion alias on its own")
    assert smoke_held(passed, smoke_test=False, force=False) is passed
    # --promote is the one way, and it is recorded as forced, whether the gate passed or not.
    promoted = smoke_held(passed, smoke_test=True, force=True)
    assert promoted.promote and promoted.forced and promoted.reason.startswith("forced with --promote")
    forced = Decision(True, "first champion, forced with --promote: ...", {}, forced=True)
    assert smoke_held(forced, smoke_test=True, force=True) is forced
