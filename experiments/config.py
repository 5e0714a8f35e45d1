"""The experiment file: strict pydantic models, one per YAML section.

Sections mirror RLlib's builder methods (`environment`, `env_runners`, `learners`,
`training`, `rl_module`, `evaluation`, `reporting`), so building a `DQNConfig` is a
translation. Unknown keys are errors with a "did you mean" hint; every problem is raised
as an `InputError` naming the file and the dotted key.
"""
from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from envs.errors import InputError, read_user_text
from envs.splits import Protocol
from experiments.hardware.batch import DEFAULT_BATCH
from experiments.protocol import apply_protocol

SEARCH_FORMS = ("choice", "grid", "uniform", "quniform", "loguniform", "qloguniform", "randint", "qrandint")


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EnvironmentSection(Section):
    env: str = Field(description="registered Gymnasium id, e.g. trading/Spot-v0 or CartPole-v1")
    env_config: dict[str, Any] = Field(default_factory=dict)


class EnvRunnersSection(Section):
    # None: the hardware preset decides.
    num_env_runners: int | None = Field(default=None, ge=0)
    num_envs_per_env_runner: int | None = Field(default=None, ge=1)
    num_cpus_per_env_runner: float | None = Field(default=None, gt=0)
    rollout_fragment_length: int = Field(default=4, ge=1)


class LearnersSection(Section):
    num_learners: int | None = Field(default=None, ge=0)
    num_gpus_per_learner: float | None = Field(default=None, ge=0)


class ReplayBufferSection(Section):
    """Proportional prioritized replay (alpha: how strongly priorities skew the draw; beta: the importance
    correction, annealed linearly from `beta` to `beta_final` over `beta_annealing_steps` sampled env
    steps) or uniform. Stock RLlib (implementation: rllib) keeps beta fixed."""

    type: Literal["prioritized", "uniform"] = "prioritized"
    capacity: int = Field(default=50_000, ge=100)
    alpha: float = Field(default=0.6, ge=0)
    beta: float = Field(default=0.4, ge=0, le=1)
    beta_final: float = Field(default=1.0, ge=0, le=1)
    beta_annealing_steps: int = Field(default=100_000, ge=1)


# Env steps/s of each training implementation relative to stock RLlib DQN, for time estimates (presets declare
# stock RLlib's rate): FastDQN ran 3,000-3,400 env steps/s per trial on conf/dqn_btc.yaml, 2 trials at once on
# 2 cores (32 envs per call, prioritized replay), where the cpu preset declares 300 for stock RLlib; alone, the
# `train` benchmark measured 5.2x (docs/benchmarks.md).
IMPLEMENTATION_SPEEDUP = {"rllib": 1.0, "fast": 10.0}


class TrainingSection(Section):
    # fast: algos.fast_dqn.FastDQN, RLlib's DQN RLModule and loss with flat numpy replay (prioritized or
    # uniform) and many minibatch updates per learner call (docs/benchmarks.md). rllib: RLlib's DQN as shipped.
    implementation: Literal["fast", "rllib"] = "fast"
    env_steps_per_learner_call: int = Field(default=256, ge=1)  # fast only: env steps gathered per update call
    lr: float = Field(default=5e-4, gt=0)
    gamma: float = Field(default=0.99, gt=0, le=1)
    # The batch of one gradient update. A hardware preset never changes it (data-parallel presets split it
    # over their learners); batch_scaling: preset opts in to the preset's large_batch and its lr rule.
    train_batch_size_per_learner: int = Field(default=DEFAULT_BATCH, ge=1)
    batch_scaling: Literal["none", "preset"] = "none"
    double_q: bool = True
    dueling: bool = True
    n_step: int = Field(default=3, ge=1)
    target_network_update_freq: int = Field(default=2000, ge=1)
    epsilon: list[tuple[int, float]] = Field(default_factory=lambda: [(0, 1.0), (20_000, 0.05)])
    replay_buffer: ReplayBufferSection = Field(default_factory=ReplayBufferSection)
    # Replayed samples per sampled env step; None keeps RLlib's native ratio.
    training_intensity: float | None = Field(default=None, gt=0)
    num_steps_sampled_before_learning_starts: int = Field(default=1000, ge=0)
    grad_clip: float | None = Field(default=40.0, gt=0)


class RLModuleSection(Section):
    fcnet_hiddens: list[int] = Field(default_factory=lambda: [128, 128])
    fcnet_activation: Literal["relu", "tanh", "swish", "linear"] = "relu"
    head_fcnet_hiddens: list[int] = Field(default_factory=list)


class EvaluationSection(Section):
    """RLlib's periodic evaluation, used for model selection (never on the test split), and the protocol
    that cuts the data into (train, validation, test) folds."""

    evaluation_interval: int | None = Field(default=None, ge=1)
    evaluation_duration: int = Field(default=1, ge=1)
    evaluation_duration_unit: Literal["episodes", "timesteps"] = "episodes"
    env_config: dict[str, Any] = Field(default_factory=dict)
    # holdout, or {type: walk_forward, folds, train: expanding|rolling, train_size, validation_size,
    # test_size, embargo} (envs.splits.Protocol). None: the env's own split (holdout).
    protocol: dict[str, Any] | str | None = None

    @field_validator("protocol")
    @classmethod
    def _valid_protocol(cls, value: dict[str, Any] | str | None) -> dict[str, Any] | None:
        return None if value is None else Protocol.from_dict(value, "").as_dict()

    @field_validator("env_config")
    @classmethod
    def _no_test_split(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value.get("split") == "test":
            raise ValueError("model selection must not see the test split: use split: validation")
        return value


class ReportingSection(Section):
    min_sample_timesteps_per_iteration: int = Field(default=1000, ge=1)
    min_time_s_per_iteration: float | None = Field(default=None, ge=0)


class CheckpointSection(Section):
    """Checkpoint every `frequency` iterations and keep the `num_to_keep` best by `tune.metric` (plus the
    newest, which Tune always keeps). Only a checkpointed iteration can be scored: with frequency 1 the
    best validation iteration is always among them."""

    frequency: int = Field(default=1, ge=0)
    num_to_keep: int = Field(default=2, ge=1)


class SchedulerSection(Section):
    """`fifo` runs every trial to its stop criterion; `asha` stops weak trials early (by metric/mode)."""

    type: Literal["fifo", "asha"] = "fifo"
    grace_period: int = Field(default=2, ge=1)       # iterations before a trial can be stopped
    reduction_factor: float = Field(default=3.0, gt=1)
    max_t: int | None = Field(default=None, ge=1)     # None: the stop criterion's training_iteration


class TuneSection(Section):
    metric: str = "env_runners/episode_return_mean"
    mode: Literal["max", "min"] = "max"
    num_samples: int = Field(default=1, ge=1)
    seeds: list[int] = Field(default_factory=lambda: [0])
    # Seeds the searcher (random sampling or Optuna's TPE): the same file samples the same points.
    search_seed: int = 0
    search_space: dict[str, dict[str, list[Any]]] = Field(default_factory=dict)
    # random: Tune's variant generator (grids are expanded, other domains sampled); optuna: TPE.
    search_alg: Literal["random", "optuna"] = "random"
    scheduler: SchedulerSection = Field(default_factory=SchedulerSection)
    # Any result key and a threshold, e.g. training_iteration, env_runners/num_env_steps_sampled_lifetime,
    # time_total_s, or a target return env_runners/episode_return_mean: a trial stops at the first reached.
    stop: dict[str, float] = Field(default_factory=lambda: {"training_iteration": 10})
    # Pick and score the best trial per value of this setting, e.g. environment.env_config.symbol.
    group_by: str | None = None
    max_concurrent_trials: int | None = Field(default=None, ge=1)  # None: the preset decides
    max_failures: int = Field(default=0, ge=-1)
    checkpoint: CheckpointSection = Field(default_factory=CheckpointSection)

    @model_validator(mode="after")
    def _optuna_has_no_grids(self) -> "TuneSection":
        if self.search_alg == "optuna" and any("grid" in d for d in self.search_space.values()):
            raise ValueError("optuna cannot search grids: use choice, or search_alg: random")
        if self.search_alg == "optuna" and len(self.seeds) > 1:
            raise ValueError("optuna searches one seed: list one seed in seeds, or use search_alg: random "
                             "to repeat every configuration over several seeds")
        if self.group_by and self.group_by not in self.search_space:
            raise ValueError(f"group_by {self.group_by!r} must be a key of search_space")
        return self

    @field_validator("search_space")
    @classmethod
    def _known_forms(cls, space: dict[str, dict[str, list[Any]]]) -> dict[str, dict[str, list[Any]]]:
        for key, domain in space.items():
            if len(domain) != 1 or next(iter(domain)) not in SEARCH_FORMS:
                raise ValueError(f"{key}: write one of {', '.join(SEARCH_FORMS)}, e.g. {{loguniform: [1e-4, 1e-3]}}")
        return space


class TrackingSection(Section):
    tracking_uri: str | None = None  # None: MLFLOW_TRACKING_URI, else a sqlite store in ./mlruns
    experiment_name: str | None = None  # None: the experiment's name


class ExperimentConfig(Section):
    name: str
    description: str = ""
    hardware: str | None = None
    environment: EnvironmentSection
    env_runners: EnvRunnersSection = Field(default_factory=EnvRunnersSection)
    learners: LearnersSection = Field(default_factory=LearnersSection)
    training: TrainingSection = Field(default_factory=TrainingSection)
    rl_module: RLModuleSection = Field(default_factory=RLModuleSection)
    evaluation: EvaluationSection = Field(default_factory=EvaluationSection)
    reporting: ReportingSection = Field(default_factory=ReportingSection)
    tune: TuneSection = Field(default_factory=TuneSection)
    tracking: TrackingSection = Field(default_factory=TrackingSection)
    # Search-space keys that a --set override pinned to one value (removed from tune.search_space).
    _pinned: dict[str, Any] = PrivateAttr(default_factory=dict)
    # Every dotted key a --set override changed, and whether this is a --smoke-test version: both name
    # the registered model (experiments.registry.registered_name).
    _overridden: list[str] = PrivateAttr(default_factory=list)
    _smoke_test: bool = PrivateAttr(default=False)

    @property
    def pinned(self) -> dict[str, Any]:
        return self._pinned

    @property
    def overridden(self) -> list[str]:
        return self._overridden

    @property
    def smoke_test(self) -> bool:
        return self._smoke_test

    @property
    def timeframe(self) -> str | None:
        return self.environment.env_config.get("timeframe")

    def num_trials(self) -> int:
        grid = 1
        for domain in self.tune.search_space.values():
            if "grid" in domain:
                grid *= len(domain["grid"])
        return self.tune.num_samples * grid * len(self.tune.seeds)

    def tracking_uri(self) -> str:
        if self.tracking.tracking_uri:
            return self.tracking.tracking_uri
        if os.environ.get("MLFLOW_TRACKING_URI"):
            return os.environ["MLFLOW_TRACKING_URI"]
        return f"sqlite:///{Path('mlruns').resolve() / 'mlflow.db'}"


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Field names of the model found by walking `loc` (for "did you mean" hints)."""
    current: Any = model
    for part in loc:
        fields = getattr(current, "model_fields", None)
        if not fields or part not in fields:
            break
        annotation = fields[part].annotation
        current = next((a for a in getattr(annotation, "__args__", (annotation,)) if hasattr(a, "model_fields")),
                       annotation)
    return list(getattr(current, "model_fields", {}))


def describe_validation_error(error: ValidationError, source: str) -> str:
    """One readable line per problem: file, dotted key, what is wrong, how to fix it."""
    lines = []
    for item in error.errors():
        loc = tuple(item["loc"])
        key = ".".join(str(p) for p in loc)
        if item["type"] == "extra_forbidden":
            known = _fields_at(ExperimentConfig, loc[:-1])
            close = difflib.get_close_matches(str(loc[-1]), known, n=1)
            hint = f": did you mean {'.'.join([*map(str, loc[:-1]), close[0]])!r}?" if close else ""
            lines.append(f"{source}: unknown key {key!r}{hint} (known here: {', '.join(known)})")
        elif item["type"] == "missing":
            lines.append(f"{source}: missing key {key!r}: add it")
        else:
            given = item.get("input")
            shown = f" (got {given!r})" if not isinstance(given, (dict, list)) or len(repr(given)) < 80 else ""
            lines.append(f"{source}: {key}: {item['msg'].removeprefix('Value error, ')}{shown}")
    return "\n".join(lines)


def parse_override(text: str) -> tuple[list[str], Any]:
    """`training.lr=1e-4` -> (["training", "lr"], 0.0001); values are parsed as YAML."""
    if "=" not in text:
        raise InputError(f"--set {text!r}: write KEY=VALUE, e.g. --set training.lr=1e-4")
    key, _, raw = text.partition("=")
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError:
        value = raw
    return key.strip().split("."), value


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    for text in overrides:
        path, value = parse_override(text)
        node = raw
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise InputError(f"--set {text!r}: {part!r} is not a section")
            node = child
        node[path[-1]] = value
    return raw


def read_yaml(path: Path) -> dict[str, Any]:
    text = read_user_text(path, "experiment file", "pass one experiment YAML file, e.g. conf/dqn_btc.yaml")
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise InputError(f"{path}:{where}: not valid YAML ({getattr(exc, 'problem', exc)}): fix the syntax") from None
    if not isinstance(raw, dict):
        raise InputError(f"{path}: an experiment file is a mapping of sections (name, environment, training, ...)")
    return raw


def load_experiment(path: str | Path, overrides: list[str] | None = None) -> ExperimentConfig:
    """Read, override, validate. Relative `*_path`/`*_dir` values resolve against the experiment file's
    folder when they come from the file, and against the working directory when they come from --set
    (as any path typed in a shell)."""
    path = Path(path)
    raw = read_yaml(path)
    _resolve_file_paths(raw, path.resolve().parent)
    raw = apply_overrides(raw, overrides or [])
    pinned = _pin_overridden_searches(raw, overrides or [])
    try:
        config = ExperimentConfig.model_validate(raw)
    except ValidationError as error:
        raise InputError(describe_validation_error(error, str(path))) from None
    _check_search_paths(config, str(path))
    _check_batch_search(config, str(path))
    apply_protocol(config, str(path))
    for env_config in (config.environment.env_config, config.evaluation.env_config):
        _absolute_paths(env_config, Path.cwd())
        _check_files_exist(env_config, str(path))
    dumped = config.model_dump()
    config._pinned = {key: _value_at(dumped, key) for key in pinned}  # as validated: 1e-4 is a float here
    config._overridden = [".".join(parse_override(text)[0]) for text in overrides or []]
    return config


def _value_at(tree: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        tree = tree[part]
    return tree


def _pin_overridden_searches(raw: dict[str, Any], overrides: list[str]) -> list[str]:
    """A --set of a key that tune.search_space searches pins it: the override wins and the key leaves
    the search space (the plan says so). Returns the pinned keys."""
    tune = raw.get("tune")
    space = tune.get("search_space") if isinstance(tune, dict) else None
    pinned = []
    for text in overrides:
        key = ".".join(parse_override(text)[0])
        if isinstance(space, dict) and key in space:
            del space[key]
            pinned.append(key)
            if tune.get("group_by") == key:  # one value left: nothing to group by
                del tune["group_by"]
    return pinned


def _path_keys(env_config: dict[str, Any], all_keys: bool = False) -> list[str]:
    """The keys of an env config that hold local file or folder paths (a URI such as s3://... is not one)."""
    return [key for key, value in env_config.items()
            if (all_keys or key.endswith(("_path", "_dir"))) and isinstance(value, str) and value
            and "://" not in value]


def _absolute_paths(env_config: dict[str, Any], base: Path, all_keys: bool = False) -> None:
    """Tune runs trials in their own folders: relative `*_path`/`*_dir` values (every string value with
    `all_keys`) are made absolute from `base`."""
    for key in _path_keys(env_config, all_keys):
        env_config[key] = str((base / Path(env_config[key]).expanduser()).resolve())


def _resolve_file_paths(raw: dict[str, Any], conf_dir: Path) -> None:
    """Relative paths written in the experiment file resolve against the file's folder, wherever the run
    starts from; also the values of a searched `*_path` (e.g. a grid over data files)."""
    for section in (raw.get("environment"), raw.get("evaluation")):
        if isinstance(section, dict) and isinstance(section.get("env_config"), dict):
            _absolute_paths(section["env_config"], conf_dir)
    tune = raw.get("tune")
    space = tune.get("search_space") if isinstance(tune, dict) else None
    if not isinstance(space, dict):
        return
    for key, domain in space.items():
        if ".env_config." not in key or not key.endswith(("_path", "_dir")) or not isinstance(domain, dict):
            continue
        for form in ("grid", "choice"):
            if isinstance(domain.get(form), list):
                values = {str(i): v for i, v in enumerate(domain[form])}
                _absolute_paths(values, conf_dir, all_keys=True)
                domain[form] = list(values.values())


def _check_files_exist(env_config: dict[str, Any], source: str) -> None:
    """A data file that is not there fails here, with where it was looked for and why there."""
    for key in _path_keys(env_config):
        if key.endswith("_path") and not Path(env_config[key]).exists():
            raise InputError(f"{source}: {key}: {env_config[key]} not found (relative paths in an experiment file "
                             "resolve against the file's folder, those given with --set against the working "
                             "directory): fix the path (market data from a CSV: python -m experiments.data import FILE)")


# The hardware plan derives the per-learner batch (and, with batch_scaling: preset, the lr) from these values.
_PLANNED_BY_HARDWARE = ("training.train_batch_size_per_learner", "training.lr")


def _check_batch_search(config: ExperimentConfig, source: str) -> None:
    """A searched batch cannot be split over data-parallel learners, nor a searched lr scaled by a preset's
    rule, before Tune draws it: such a search runs on one learner without batch scaling."""
    searched = [key for key in _PLANNED_BY_HARDWARE if key in config.tune.search_space]
    if searched and config.training.batch_scaling == "preset":
        raise InputError(f"{source}: training.batch_scaling: preset rescales {', '.join(searched)}, which "
                         f"tune.search_space also searches: search them with batch_scaling: none")
    if "training.train_batch_size_per_learner" in config.tune.search_space and (config.learners.num_learners or 0) > 1:
        raise InputError(f"{source}: a searched training.train_batch_size_per_learner cannot be split over "
                         f"learners.num_learners: search it with one learner")


def _check_search_paths(config: ExperimentConfig, source: str) -> None:
    """Every search-space key must address an existing setting, e.g. training.lr."""
    dumped = config.model_dump()
    for key in config.tune.search_space:
        node: Any = dumped
        parts = key.split(".")
        for depth, part in enumerate(parts):
            free_form = depth > 0 and parts[depth - 1] == "env_config"
            if not isinstance(node, dict) or (part not in node and not free_form):
                known = list(node) if isinstance(node, dict) else []
                close = difflib.get_close_matches(part, known, n=1)
                hint = f": did you mean {'.'.join([*parts[:depth], close[0]])!r}?" if close else ""
                raise InputError(f"{source}: tune.search_space key {key!r} addresses no setting{hint}")
            node = node.get(part)
