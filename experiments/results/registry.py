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
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import mlflow
import numpy as np
from mlflow.models import ModelSignature, infer_signature
from rich.console import Console
from rich.markup import escape

from algos.numpy_policy import NumpyPolicy
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


def register_policy(tracking_uri: str, run_id: str, policy: NumpyPolicy, model_name: str,
                    observations: np.ndarray, tags: dict[str, str],
                    inputs: Any | None = None, input_reader: str | None = None) -> str:
    """Log the policy as a model of `run_id`, register it and tag the version; returns 'models:/name/version'.
    `inputs`: the family's reader of raw inputs (`input_reader` names its class), or None: observations only."""
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
            model_config["input_reader"] = input_reader
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
                   chosen_run: str | None, reader: "CheckpointReader", console: Console,
                   examples: Examples | None = None) -> Registered:
    """Register the group's deployable policy (its numpy export, made once when it was scored); the parent run
    records which checkpoint it is. The plan deploys the most recent fold: when that fold has no scored trial nothing
    is registered, and the reason is returned. `examples`: observations and action space of the chosen fold's env
    as the dry run built it, else the env is built here."""
    chosen = outcome.chosen
    group = None if outcome.group == ALL else outcome.group
    suffix = "" if group is None else f"/{group}"
    promised = max(planned_folds(exp))
    if chosen.fold != promised:
        refused = (f"{'' if group is None else group + ': '}no model registered: fold {promised}, the most recent, "
                   f"which the plan deploys, has no scored trial (fold {chosen.fold} has; it is not deployed in its "
                   "place)")
        console.print(f"[yellow]{escape(refused)}[/yellow]")
        return Registered(outcome.group, refused=refused)
    env_id = exp.environment.env
    model_name, reasons = registered_name(exp.name, exp.overridden, chosen.env_config, group, exp.smoke_test,
                                          exp.family.data_keys)
    if examples is None:
        env = exp.family.make(chosen.env_config)
        examples = example_observations(env)
        env.close()
    observations, action_space = examples
    meaning = model_meaning(exp.algorithm, observations.shape[1:], action_space, chosen.env_config)
    model_name, conflict = name_for_meaning(client, model_name, meaning)
    reasons += [conflict] if conflict else []
    tags = {"smoke_test": str(exp.smoke_test), "experiment": exp.name, "algorithm": exp.algorithm, "env": env_id,
            "data": exp.family.data_label(chosen.env_config), "fold": str(chosen.fold), "seed": str(chosen.seed),
            "parent_run_id": state.parent_run_id, "git_commit": git_commit(), **meaning,
            **outcome.report.model_tags}
    input_reader = exp.family.input_reader
    inputs = exp.family.reader_class().for_env_config(chosen.env_config) if input_reader else None
    uri = register_policy(state.tracking_uri, chosen_run or state.parent_run_id,
                          reader.numpy_policy(chosen.checkpoint, exp.spec.greedy), model_name, observations, tags,
                          inputs, input_reader)
    client.set_tag(state.parent_run_id, f"best_checkpoint{suffix}", reader.storage.display(chosen.checkpoint.path))
    client.set_tag(state.parent_run_id, f"best_checkpoint_iteration{suffix}", str(chosen.checkpoint.iteration))
    client.set_tag(state.parent_run_id, f"best_checkpoint_score{suffix}", repr(chosen.checkpoint.score))
    client.log_artifacts(state.parent_run_id, str(reader.whole(chosen.checkpoint)), f"best_checkpoint{suffix}")
    console.print(escape(f"registered {uri}: fold {chosen.fold}'s chosen configuration ({chosen.point}), seed "
                         f"{chosen.seed}, checkpoint of iteration {chosen.checkpoint.iteration} "
                         f"({exp.tune.metric} = {chosen.checkpoint.score:.4g})"))
    if reasons:
        console.print(escape(f"  named {model_name}, not {exp.name}: {'; '.join(reasons)} (--set name=... "
                             "chooses the name)"))
    if inputs is not None:
        serve = runnable(f"python -m experiments.serve {uri}")
        console.print(escape(f"  it {inputs.describe()}; serve it: {serve}"))
    return Registered(outcome.group, uri, model_name, uri.rsplit("/", 1)[-1])
