"""Register the best trial's policy in the MLflow Model Registry as a pyfunc model.

`mlflow.pyfunc.load_model("models:/<name>/<version>").predict(bars)` returns the decision after the last of the
given bars, and `.predict(observations)` greedy actions, with no Ray cluster and no torch: the policy's numpy
forward pass and the reader of its raw inputs (features and the fold's train-row normalization) are packaged,
with `experiments/results/policy_model.py` as the model's code and the `envs` and `algos` packages as its code paths.
Its requirements are pinned CPU packages from PyPI (no torch, no Ray, so no CUDA wheels).

The registered name says what the model is, so `models:/<name>/latest` never silently changes
meaning: the experiment's name (`--set name=...` renames it), then the data it was trained on when
`--set` changed the data (`dqn_btc-ETH-USD_1h`), then the group (`dqn_coins-SOL-USD`), and `-smoke`
for a `--smoke-test` run, which therefore never becomes a version of the real model. Every version
is tagged with what produced it, and with what its inputs and outputs mean (`meaning/...`: algorithm,
observation shape, action space, feature list): a version that means something else than the name's
earlier versions (PPO after DQN, 218 floats after 194, long_short's actions after long_flat's) gets its own
name (`dqn_btc-ppo`, `dqn_btc-obs218`), said in one line, so `models:/<name>/latest` keeps its meaning.
With `ensemble:` in the file, the group's ensemble (algos/export/ensemble_policy.py) is the next version of the
same name, under the alias `ensemble`.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import urlsplit

import mlflow
import numpy as np
from mlflow.models import ModelSignature, infer_signature
from rich.markup import escape

from algos.export.ensemble_policy import EnsemblePolicy
from algos.export.numpy_policy import NumpyPolicy
from experiments.plan.provenance import git_commit
from experiments.results.examples import Examples, example_observations
from experiments.results.trials import ALL, planned_folds
from experiments.shell import runnable

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

    from experiments.config.experiment import ExperimentConfig
    from experiments.results.scoring import GroupOutcome
    from experiments.results.trials import CheckpointReader
    from experiments.storage.sweep_state import SweepState

MODEL_CODE = Path(__file__).with_name("policy_model.py")
REPO = Path(__file__).resolve().parents[2]
CODE_PATHS = [str(REPO / "envs"), str(REPO / "algos")]
# What the served model imports besides MLflow (tests/integration/test_paper_trading.py checks no torch or Ray
# is imported by serving); pinned to this machine's versions.
SERVING_DISTRIBUTIONS = ("numpy", "pandas", "pyarrow", "pydantic", "gymnasium", "TA-Lib")
ENSEMBLE_ALIAS = "ensemble"  # the alias of a run's registered ensemble (its version beside the single chosen trial's)


def registered_name(name: str, overridden: list[str], env_config: dict[str, Any], group: str | None,
                    smoke: bool, data_keys: tuple[str, ...] = ()) -> tuple[str, list[str]]:
    """The registry name of a policy (see the module docstring; only letters, digits, '.', '_', '-') and
    why it differs from the experiment's name. `data_keys`: the env family's env_config keys that choose
    the data a model learns from (envs.EnvFamily.data_keys); overriding one with --set renames the model."""
    parts, reasons = [name], []
    if "name" not in overridden:
        for key in data_keys:
            if f"environment.env_config.{key}" in overridden and env_config.get(key) is not None:
                value = env_config[key]
                parts.append(Path(urlsplit(str(value)).path).stem if key == "data_path" else str(value))
                reasons.append(f"{key} set with --set")
    if group is not None:
        parts.append(group)
        reasons.append(f"group {group}")
    if smoke:
        parts.append("smoke")
        reasons.append("a --smoke-test run, kept apart from the real model")
    return re.sub(r"[^A-Za-z0-9._-]+", "_", "-".join(parts)), reasons


def model_meaning(algorithm: str, observation_shape: tuple[int, ...], action_space: str,
                  env_config: dict[str, Any]) -> dict[str, str]:
    """What a version's inputs and outputs mean, as `meaning/...` version tags."""
    features = env_config.get("features")
    return {"meaning/algorithm": algorithm, "meaning/observation_shape": "x".join(map(str, observation_shape)),
            "meaning/action_space": action_space,
            "meaning/features": "default" if features is None else hashlib.sha256(
                json.dumps(features, sort_keys=True, default=str).encode()).hexdigest()[:12]}


def _existing_meaning(client: Any, name: str) -> dict[str, str] | None:
    """The meaning tags of the name's latest version that has them (versions from before they existed have none)."""
    from mlflow.exceptions import MlflowException

    try:
        versions = client.search_model_versions(f"name = '{name}'")
    except MlflowException:
        return None
    for version in sorted(versions, key=lambda v: int(v.version), reverse=True):
        tags = {key: value for key, value in version.tags.items() if key.startswith("meaning/")}
        if tags:
            return tags
    return None


_SUFFIX = {"meaning/algorithm": lambda v: v, "meaning/observation_shape": lambda v: f"obs{v}",
           "meaning/action_space": lambda v: "act" + "".join(ch for ch in v if ch.isdigit()),
           "meaning/features": lambda v: f"features{v[:6]}"}


def name_for_meaning(client: Any, name: str, meaning: dict[str, str]) -> tuple[str, str | None]:
    """`name`, or a name that says what differs when the name's versions mean something else; and why."""
    existing = _existing_meaning(client, name)
    if existing is None or all(existing.get(k) == v for k, v in meaning.items()):
        return name, None
    differs = [key for key, value in meaning.items() if existing.get(key) != value]
    candidate = re.sub(r"[^A-Za-z0-9._-]+", "_", "-".join([name, *(_SUFFIX[key](meaning[key]) for key in differs)]))
    again = _existing_meaning(client, candidate)
    if again is not None and any(again.get(k) != v for k, v in meaning.items()):  # taken too: the whole meaning
        digest = hashlib.sha256(json.dumps(meaning, sort_keys=True).encode()).hexdigest()[:8]
        candidate = f"{name}-{digest}"
    changes = ", ".join(f"{key.split('/')[1]} {existing.get(key)} -> {meaning[key]}" for key in differs)
    return candidate, f"{name}'s versions mean something else ({changes})"


def _requirements() -> list[str]:
    from importlib.metadata import version

    return [f"{name}=={version(name)}" for name in SERVING_DISTRIBUTIONS]


def register_policy(tracking_uri: str, run_id: str, policy: NumpyPolicy | EnsemblePolicy, model_name: str,
                    observations: np.ndarray, tags: dict[str, str],
                    inputs: Any | None = None, env_id: str = "") -> str:
    """Log the policy as a model of `run_id`, register it and tag the version; returns 'models:/name/version'.
    `inputs`: the reader of the raw inputs of `env_id`'s family (envs.abilities.ServesRawInputs), which the served
    model loads again through that family, or None: observations only."""
    import tempfile

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    mlflow.set_tracking_uri(tracking_uri)
    actions = policy(observations)
    # Outputs only: an input schema would make MLflow refuse bars, one observation or a float64 batch with an
    # error that prints the whole input; policy_model checks the input instead.
    signature = ModelSignature(outputs=infer_signature(observations, actions).outputs)
    with tempfile.TemporaryDirectory() as folder, mlflow.start_run(run_id=run_id):
        artifacts = {"policy": str(Path(folder) / "policy.npz")}
        policy.save(artifacts["policy"])
        model_config: dict[str, Any] = {"observation_shape": list(observations.shape[1:])}
        if inputs is not None:
            artifacts["inputs"] = str(Path(folder) / "inputs.npz")
            inputs.save(artifacts["inputs"])
            model_config["env"] = env_id
        info = mlflow.pyfunc.log_model(
            name="policy",
            python_model=str(MODEL_CODE),
            artifacts=artifacts,
            code_paths=CODE_PATHS,
            model_config=model_config,
            signature=signature,
            input_example=observations[:2],
            pip_requirements=_requirements(),
            registered_model_name=model_name,
        )
    version = info.registered_model_version
    client = mlflow.MlflowClient(tracking_uri)
    for key, value in tags.items():
        client.set_model_version_tag(model_name, version, key, value)
    for key, value in (inputs.tags() if inputs is not None else {}).items():
        client.set_model_version_tag(model_name, version, key, value)
    return f"models:/{model_name}/{version}"


@dataclass(frozen=True)
class Registered:
    """One group's registration: the model's URI, name and version, or why nothing was registered."""

    group: str
    uri: str = ""
    name: str = ""
    version: str = ""
    refused: str = ""


def register_group(exp: "ExperimentConfig", outcome: "GroupOutcome", client: "MlflowClient", state: "SweepState",
                   chosen_run: str | None, reader: "CheckpointReader", log: Callable[[str], None],
                   examples: Examples | None = None) -> Registered:
    """Register the group's deployable policy (its numpy export, made once when it was scored); the parent run
    records which checkpoint it is. The plan deploys the most recent fold: when that fold has no scored trial nothing
    is registered, and the reason is returned. `examples`: observations and action space of the chosen fold's env
    as the dry run built it, else the env is built here. What it says goes to `log`, lines of rich markup."""
    chosen = outcome.chosen
    group = None if outcome.group == ALL else outcome.group
    suffix = "" if group is None else f"/{group}"
    refused = _not_deployed(exp, group, chosen.fold, "no model registered", "has no scored trial")
    if refused:
        log(f"[yellow]{escape(refused)}[/yellow]")
        return Registered(outcome.group, refused=refused)
    tags = {"fold": str(chosen.fold), "seed": str(chosen.seed), **outcome.report.model_tags}
    policy = reader.numpy_policy(chosen.checkpoint, exp.spec)
    uri, model_name, reasons, inputs = _register(exp, group, chosen.env_config, client, state,
                                                 chosen_run or state.parent_run_id, policy, tags, examples)
    client.set_tag(state.parent_run_id, f"best_checkpoint{suffix}", reader.storage.display(chosen.checkpoint.path))
    client.set_tag(state.parent_run_id, f"best_checkpoint_iteration{suffix}", str(chosen.checkpoint.iteration))
    client.set_tag(state.parent_run_id, f"best_checkpoint_score{suffix}", repr(chosen.checkpoint.score))
    client.log_artifacts(state.parent_run_id, str(reader.whole(chosen.checkpoint)), f"best_checkpoint{suffix}")
    log(escape(f"registered {uri}: fold {chosen.fold}'s chosen configuration ({chosen.point}), seed "
               f"{chosen.seed}, checkpoint of iteration {chosen.checkpoint.iteration} "
               f"({exp.tune.metric} = {chosen.checkpoint.score:.4g})"))
    if reasons:
        log(escape(f"  named {model_name}, not {exp.name}: {'; '.join(reasons)} (--set name=... "
                   "chooses the name)"))
    if inputs is not None:
        serve = runnable(f"python -m experiments.serve {uri}")
        log(escape(f"  it {inputs.describe()}; serve it: {serve}"))
    return Registered(outcome.group, uri, model_name, uri.rsplit("/", 1)[-1])


def register_ensemble(exp: "ExperimentConfig", outcome: "GroupOutcome", client: "MlflowClient", state: "SweepState",
                      ensemble_run: str | None, log: Callable[[str], None],
                      examples: Examples | None = None) -> Registered:
    """Register the group's ensemble of the most recent fold (experiments/results/ensembles.py) as a version of the
    same name as the single chosen trial's, attached to the ensemble's own run, and point the alias `ensemble` at
    it (moved last): `models:/<name>@ensemble` serves and paper-trades it like any model. The plan's fold without an
    ensemble registers nothing, and the reason is returned."""
    ensemble = outcome.ensemble
    group = None if outcome.group == ALL else outcome.group
    deployed = ensemble.deployed
    if ensemble.refused:  # said with the group's verdict already
        return Registered(outcome.group, refused=f"{'' if group is None else group + ': '}{ensemble.refused}")
    refused = _not_deployed(exp, group, deployed.fold, "no ensemble registered", "has no ensemble")
    if refused:
        log(f"[yellow]{escape(refused)}[/yellow]")
        return Registered(outcome.group, refused=refused)
    seeds = ",".join(str(s) for s in sorted({t.seed for t in deployed.members}))
    tags = {"fold": str(deployed.fold), "seed": seeds, ENSEMBLE_ALIAS: ensemble.over,
            "ensemble.decision": deployed.policy.describe(), "ensemble.members": deployed.describe(),
            **deployed.report.model_tags}
    uri, model_name, _, inputs = _register(exp, group, deployed.env_config, client, state,
                                           ensemble_run or state.parent_run_id, deployed.policy, tags, examples)
    version = uri.rsplit("/", 1)[-1]
    client.set_registered_model_alias(model_name, ENSEMBLE_ALIAS, version)  # last: never on a half-tagged version
    log(escape(f"registered {uri} (alias {ENSEMBLE_ALIAS}): the ensemble over {ensemble.over}, "
               f"{deployed.describe()}"))
    if inputs is not None:
        serve = runnable(f"python -m experiments.serve models:/{model_name}@{ENSEMBLE_ALIAS}")
        log(escape(f"  serve it: {serve}"))
    return Registered(outcome.group, uri, model_name, version)


def _not_deployed(exp: "ExperimentConfig", group: str | None, fold: int, what: str, lacking: str) -> str:
    """Why `fold`'s model is not the plan's (its most recent fold), or "" when it is."""
    promised = max(planned_folds(exp))
    if fold == promised:
        return ""
    return (f"{'' if group is None else group + ': '}{what}: fold {promised}, the most recent, which the plan deploys, "
            f"{lacking} (fold {fold} has; it is not deployed in its place)")


def _register(exp: "ExperimentConfig", group: str | None, env_config: dict[str, Any], client: "MlflowClient",
              state: "SweepState", run_id: str, policy: Any, own_tags: dict[str, str],
              examples: Examples | None) -> tuple[str, str, list[str], Any]:
    """Register `policy` (a NumpyPolicy or an ensemble of them) trained in `env_config` under the name that says what
    it is, with its family's input reader and the tags every version carries beside `own_tags`; returns its URI, the
    name, why the name differs from the experiment's, and the input reader (None: observations only)."""
    model_name, reasons = registered_name(exp.name, exp.overridden, env_config, group, exp.smoke_test,
                                          exp.family.data_keys)
    if examples is None:
        env = exp.family.make(env_config)
        examples = example_observations(env)
        env.close()
    observations, action_space = examples
    meaning = model_meaning(exp.algorithm, observations.shape[1:], action_space, env_config)
    model_name, conflict = name_for_meaning(client, model_name, meaning)
    reasons += [conflict] if conflict else []
    tags = {"smoke_test": str(exp.smoke_test), "experiment": exp.name, "algorithm": exp.algorithm,
            "env": exp.environment.env, "data": exp.family.data_label(env_config),
            "parent_run_id": state.parent_run_id, "git_commit": git_commit(), **meaning, **own_tags}
    inputs = raw_inputs_reader(exp.family, env_config)
    uri = register_policy(state.tracking_uri, run_id, policy, model_name, observations, tags, inputs, exp.family.env_id)
    return uri, model_name, reasons, inputs


def raw_inputs_reader(family: Any, env_config: dict[str, Any]) -> Any | None:
    """The reader a registered model of `family` serves raw inputs through, fitted to `env_config` (its features,
    window and normalization), or None: the family's models take observations only."""
    from envs.abilities import ServesRawInputs

    return family.reader_class().for_env_config(env_config) if isinstance(family, ServesRawInputs) else None
