"""Champion and challenger: the promotion gate on a forward test, and how its decision is recorded in the registry.

The challenger earns the `champion` alias only if it beats the champion on the forward window (a higher Sharpe)
and the gate in the experiment file holds: the deflated Sharpe ratio of its per-bar returns in excess of the
champion's, and of each baseline's, reach the gate's minimums, and its sweep's PBO (when it has one) stays below
the gate's maximum. Every retrain is one more attempt on the registry's data, so each DSR is deflated by the earlier
challengers' excess Sharpes over the same opponent, the champion or that baseline (recorded on their versions as
`gate/excess_sharpe_vs_<opponent>`; a version recorded before the baselines' tags existed counts only where it has
one); the first attempt gets the probabilistic Sharpe ratio against zero. A challenger that fails gets the
`challenger` alias and the reason as a tag.

Recording order makes a killed retrain harmless: the version is registered whole first (by the sweep), then its
lineage tags and description are written, and the alias moves last, in one call.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from envs.errors import InputError

CHAMPION, CHALLENGER = "champion", "challenger"
# + champion | a baseline: the per-bar Sharpe of a challenger's excess over it, a gate/ tag on its version: the
# trials the next challengers' DSRs over the same opponent are deflated by
EXCESS_PREFIX = "excess_sharpe_vs_"


@dataclass
class Decision:
    """Whether the challenger is promoted, why, and the gate's numbers (version tags)."""

    promote: bool
    reason: str
    numbers: dict[str, float] = field(default_factory=dict)
    forced: bool = False


def edge_dsr(excess: np.ndarray, prior_sharpes: list[float]) -> float:
    """DSR of per-bar excess returns over the attempts so far (this one and `prior_sharpes`); PSR vs 0 alone."""
    # The verdict's libraries load here, not with `experiments.api` (a dry run imports this module and needs none).
    from purgedcv import deflated_sharpe_ratio_full, probabilistic_sharpe_ratio

    from experiments.results.verdict import per_period_sharpe

    if np.ptp(excess) == 0:
        return 0.0
    sharpes = [*prior_sharpes, per_period_sharpe(excess)]
    try:
        if len(sharpes) < 2:
            return float(probabilistic_sharpe_ratio(excess, benchmark_skill=0.0))
        variance = float(np.var(sharpes, ddof=1))
        return float(deflated_sharpe_ratio_full(excess, n_trials=len(sharpes), var_sharpe=variance).dsr)
    except ValueError:  # moments too extreme for the normal approximation: no evidence
        return 0.0


def excess_sharpes(returns: Any, challenger: str, opponents: dict[str, str]) -> dict[str, float]:
    """The per-bar Sharpe of the challenger's excess over each opponent (label -> column of `returns`), as gate
    numbers `excess_sharpe_vs_<label>`: recorded on its version, they deflate the next challengers' DSRs."""
    from experiments.results.verdict import per_period_sharpe

    return {f"{EXCESS_PREFIX}{label}": per_period_sharpe((returns[challenger] - returns[column]).to_numpy())
            for label, column in opponents.items()}


def judge(table: Any, returns: Any, challenger: str, champion: str, baselines: list[str], gate: Any,
          prior_sharpes: dict[str, list[float]], pbo: float | None) -> Decision:
    """The gate's decision for `challenger` against `champion` (column names of the forward report); `prior_sharpes`:
    per opponent (`champion` or a baseline), the excess Sharpes earlier challengers were judged on."""
    numbers = {"forward_sharpe": float(table.loc[challenger, "sharpe"]),
               "champion_forward_sharpe": float(table.loc[champion, "sharpe"])}
    opponents = {CHAMPION: champion, **{b: b for b in baselines}}
    numbers.update(excess_sharpes(returns, challenger, opponents))
    for label, column in opponents.items():
        excess = (returns[challenger] - returns[column]).to_numpy()
        numbers[f"dsr_vs_{label}"] = edge_dsr(excess, prior_sharpes.get(label, []))
    failed = []
    if not numbers["forward_sharpe"] > numbers["champion_forward_sharpe"]:
        failed.append(f"forward Sharpe {numbers['forward_sharpe']:.2f} does not beat the champion's "
                      f"{numbers['champion_forward_sharpe']:.2f}")
    if numbers["dsr_vs_champion"] < gate.min_dsr_vs_champion:
        failed.append(f"DSR of its excess over the champion {numbers['dsr_vs_champion']:.2f} < "
                      f"{gate.min_dsr_vs_champion:g}")
    weak = [f"{b} {numbers[f'dsr_vs_{b}']:.2f}" for b in baselines
            if numbers[f"dsr_vs_{b}"] < gate.min_dsr_vs_baselines]
    if weak:
        failed.append(f"DSR of its excess over baselines below {gate.min_dsr_vs_baselines:g}: {', '.join(weak)}")
    if pbo is not None and math.isfinite(pbo):
        numbers["pbo"] = pbo
        if pbo > gate.max_pbo:
            failed.append(f"its sweep's PBO {pbo:.2f} > {gate.max_pbo:g}")
    if failed:
        return Decision(False, "not promoted: " + "; ".join(failed), numbers)
    return Decision(True, "promoted: it beats the champion on the forward window "
                          f"(Sharpe {numbers['forward_sharpe']:.2f} "
                          f"vs {numbers['champion_forward_sharpe']:.2f}) and the gate holds", numbers)


def resolve_version(client: Any, uri: str) -> Any:
    """The model version a `models:/NAME/VERSION`, `models:/NAME@ALIAS` or `models:/NAME/latest` URI names;
    InputError in one line when it names none."""
    from mlflow.exceptions import MlflowException

    if not uri.startswith("models:/") or uri.count("/") < 1:
        raise InputError(f"{uri}: give a registered model as models:/NAME@ALIAS or models:/NAME/VERSION")
    rest = uri[len("models:/"):]
    name, _, alias = rest.partition("@")
    if not alias:
        name, _, version = rest.partition("/")
    try:
        if alias:
            return client.get_model_version_by_alias(name, alias)
        if version in ("", "latest"):
            versions = client.search_model_versions(f"name = '{name}'")
            if versions:
                return max(versions, key=lambda v: int(v.version))
            raise InputError(f"{uri}: no registered model {name!r} has a version")
        return client.get_model_version(name, version)
    except MlflowException:
        aliases = sorted(_aliases(client, name))
        known = f" (its aliases: {', '.join(aliases)})" if aliases else ""
        raise InputError(f"{uri}: no such registered model version or alias{known}: see the registry "
                         f"(mlflow ui, Models) or run python -m experiments.retrain first") from None


def champion_of(client: Any, name: str) -> Any | None:
    """The version that holds the `champion` alias, or None."""
    from mlflow.exceptions import MlflowException

    try:
        return client.get_model_version_by_alias(name, CHAMPION)
    except MlflowException:
        return None


def _aliases(client: Any, name: str) -> list[str]:
    from mlflow.exceptions import MlflowException

    try:
        return list(client.get_registered_model(name).aliases)
    except MlflowException:
        return []


def prior_excess_sharpes(client: Any, name: str, exclude: str, opponents: list[str]) -> dict[str, list[float]]:
    """Per opponent (`champion` or a baseline), the excess Sharpes earlier challengers of `name` were judged on (the
    attempts its DSR is deflated by). A version counts for an opponent only if it has that tag: those recorded before
    the baselines' tags existed count against the champion alone."""
    versions = [v for v in client.search_model_versions(f"name = '{name}'") if str(v.version) != str(exclude)]
    tags = {o: f"gate/{EXCESS_PREFIX}{o}" for o in opponents}
    return {o: [float(v.tags[tag]) for v in versions if tag in v.tags] for o, tag in tags.items()}


def record(client: Any, name: str, version: str, decision: Decision, lineage: dict[str, str]) -> str:
    """Tag the version with its lineage and the gate's numbers, describe why, then move the alias (last)."""
    for key, value in lineage.items():
        client.set_model_version_tag(name, version, key, value)
    for key, value in decision.numbers.items():
        client.set_model_version_tag(name, version, f"gate/{key}", repr(value))
    alias = CHAMPION if decision.promote else CHALLENGER
    client.set_model_version_tag(name, version, "promotion", decision.reason)
    if decision.forced:
        client.set_model_version_tag(name, version, "champion_forced", "true")
    client.update_model_version(name, version, description=decision.reason)
    client.set_registered_model_alias(name, alias, version)
    return alias
