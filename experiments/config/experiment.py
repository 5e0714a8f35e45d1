"""The experiment file: strict pydantic models, one per YAML section, validated in one pass before Ray.

Sections mirror RLlib's builder methods (`environment`, `env_runners`, `learners`, `training`,
`rl_module`, `evaluation`, `reporting`), so building an RLlib config is a translation. The `training`
section's model comes from the algorithm (`algorithm: dqn` picks `algos.ALGORITHMS["dqn"]`). A file may
extend another (`extends: dqn_btc.yaml`, then only what differs). Unknown keys, values of the wrong
type, search spaces that cannot be searched and result keys the algorithm does not report are
`InputError`s naming the file and the dotted key, in the style of `envs.validation`.
"""
from __future__ import annotations

import functools
import os
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, PrivateAttr, create_model, field_validator, model_validator

import algos
import envs
from algos.spec import AlgorithmSpec, TrainingBase
from envs.errors import InputError
from envs.splits import Protocol
from envs.validation import StrictModel as Section
from experiments.config.retrain_settings import RetrainSection
from experiments.config.search_space import check_search_space
from experiments.tracking.store import default_tracking_uri


class EnvironmentSection(Section):
    env: str = Field(description="a registered Gymnasium id: a key of envs.ENVIRONMENTS or e.g. CartPole-v1")
    env_config: dict[str, Any] = Field(default_factory=dict)


class EnvRunnersSection(Section):
    # None: the hardware preset decides.
    num_env_runners: int | None = Field(default=None, ge=0)
    num_envs_per_env_runner: int | None = Field(default=None, ge=1)
    num_cpus_per_env_runner: float | None = Field(default=None, gt=0)
    rollout_fragment_length: Annotated[int, Field(ge=1)] | Literal["auto"] = 4  # auto: RLlib sizes it (PPO)


class LearnersSection(Section):
    num_learners: int | None = Field(default=None, ge=0)
    num_gpus_per_learner: float | None = Field(default=None, ge=0)


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


class SelectSection(Section):
    """Which checkpoint of a trial is its choice (and its score when configurations are compared): the best by the
    validation score `tune.metric`, smoothed over the last `smooth` iterations, and only among iterations after
    the algorithm's exploration has decayed when `after_exploration` (docs/verdicts.md: the checkpoint study)."""

    smooth: int = Field(default=1, ge=1)
    after_exploration: bool = False


class CheckpointSection(Section):
    """Checkpoint every `frequency` iterations and keep the `num_to_keep` best by the selection score (plus the
    newest, which Tune always keeps). Only a checkpointed iteration can be scored: with frequency 1 the
    best validation iteration is always among them."""

    frequency: int = Field(default=1, ge=0)
    num_to_keep: int = Field(default=2, ge=1)
    select: SelectSection = Field(default_factory=SelectSection)


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
    # A trial whose worker dies (a killed process, a lost node, a storage blip) is retried from its last
    # checkpoint this many times before it counts as failed (-1: always). A failed trial makes the run partial.
    max_failures: int = Field(default=2, ge=-1)
    # Custom Ray resources each trial asks for (its main process: the trainer that writes checkpoints), to
    # place trials on the nodes that declare them, e.g. {gpu_node: 1} with `ray start --resources
    # '{"gpu_node": 4}'` on those nodes only. The run refuses to start when no node declares one.
    trial_resources: dict[Annotated[str, Field(min_length=1)], Annotated[float, Field(gt=0)]] = Field(
        default_factory=dict)
    checkpoint: CheckpointSection = Field(default_factory=CheckpointSection)

    @model_validator(mode="after")
    def _optuna_has_no_grids(self) -> "TuneSection":
        if self.search_alg == "optuna" and any("grid" in d for d in self.search_space.values()):
            raise ValueError("optuna cannot search grids: use choice, or search_alg: random")
        if self.search_alg == "optuna" and len(self.seeds) > 1:
            raise ValueError("optuna searches one seed: list one seed in seeds, or use search_alg: random "
                             "to repeat every configuration over several seeds")
        if self.search_alg == "optuna":
            for key, domain in self.search_space.items():
                if "qloguniform" in domain:  # Ray's Optuna bridge drops the step with a warning
                    raise ValueError(f"optuna ignores the step of qloguniform ({key}): use loguniform, or "
                                     "search_alg: random")
                if any(not isinstance(v, (bool, int, float, str)) and v is not None for v in domain.get("choice", [])):
                    raise ValueError(f"optuna chooses among numbers, strings and booleans only ({key} lists other "
                                     "values): use search_alg: random")
        if self.group_by and self.group_by not in self.search_space:
            raise ValueError(f"group_by {self.group_by!r} must be a key of search_space")
        return self

    @field_validator("search_space", mode="before")
    @classmethod
    def _searchable(cls, space: Any) -> Any:
        return check_search_space(space) if isinstance(space, dict) else space


class TrackingSection(Section):
    tracking_uri: str | None = None  # None: MLFLOW_TRACKING_URI, else a sqlite store in ./mlruns
    experiment_name: str | None = None  # None: the experiment's name
    # CPU, memory, disk, network and (with the `gpu` extra) GPU use of every trial, sampled in the trial's own
    # process (algos/system_metrics.py) and logged as system/* metrics of its run; false: none.
    system_metrics: bool = True
    system_metrics_interval_s: float = Field(default=10.0, gt=0, le=3600)


class ExperimentConfig(Section):
    name: str
    description: str = ""
    algorithm: str = "dqn"  # a key of algos.ALGORITHMS; it brings the model of the training section
    hardware: str | None = None
    # Where Tune's results, checkpoints and the resume file go: a folder or s3://bucket/prefix
    # (experiments.storage.filesystem); --storage and RLPLATFORM_STORAGE also set it. None: the --output folder.
    storage: str | None = None
    environment: EnvironmentSection
    env_runners: EnvRunnersSection = Field(default_factory=EnvRunnersSection)
    learners: LearnersSection = Field(default_factory=LearnersSection)
    training: TrainingBase = Field(default_factory=TrainingBase)  # the algorithm's own subclass (experiment_model)
    rl_module: RLModuleSection = Field(default_factory=RLModuleSection)
    evaluation: EvaluationSection = Field(default_factory=EvaluationSection)
    reporting: ReportingSection = Field(default_factory=ReportingSection)
    tune: TuneSection = Field(default_factory=TuneSection)
    tracking: TrackingSection = Field(default_factory=TrackingSection)
    retrain: RetrainSection = Field(default_factory=RetrainSection)  # python -m experiments.retrain
    # A checkpoint every trial starts from (weights and optimizer state; the replay buffer starts empty): what
    # experiments.retrain's incremental mode sets to the champion's. None: trials start from scratch.
    warm_start: str | None = None
    # Search-space keys that a --set override pinned to one value (removed from tune.search_space).
    _pinned: dict[str, Any] = PrivateAttr(default_factory=dict)
    # Every dotted key a --set override changed, and whether this is a --smoke-test version: both name
    # the registered model (experiments.results.registry.registered_name).
    _overridden: list[str] = PrivateAttr(default_factory=list)
    _smoke_test: bool = PrivateAttr(default=False)
    # What the plan should say about how the file was read (e.g. an algorithm switched by --set).
    _notes: list[str] = PrivateAttr(default_factory=list)
    _family: envs.EnvFamily | None = PrivateAttr(default=None)

    @property
    def pinned(self) -> dict[str, Any]:
        return self._pinned

    @property
    def overridden(self) -> list[str]:
        return self._overridden

    @property
    def notes(self) -> list[str]:
        return self._notes

    @property
    def smoke_test(self) -> bool:
        return self._smoke_test

    @property
    def spec(self) -> AlgorithmSpec:
        return algos.algorithm(self.algorithm)

    @property
    def family(self) -> envs.EnvFamily:
        """The env family of `environment.env`, resolved once and handed down: everything the platform knows of
        the env (its scorer, baselines, tags, data keys, comparison columns) comes from this object."""
        if self._family is None or self._family.env_id != self.environment.env:
            self._family = envs.family(self.environment.env)
        return self._family

    @property
    def timeframe(self) -> str | None:
        """The bar interval the env family declares for this env config (presets size batches by it), or None."""
        return self.family.timeframe(self.environment.env_config)

    def num_trials(self) -> int:
        grid = 1
        for domain in self.tune.search_space.values():
            if "grid" in domain:
                grid *= len(domain["grid"])
        return self.tune.num_samples * grid * len(self.tune.seeds)

    def tracking_uri(self) -> str:
        """tracking.tracking_uri, else MLFLOW_TRACKING_URI, else ./mlruns; never one with credentials in it: the
        URI is printed, saved in the resume file and logged (MLflow reads MLFLOW_TRACKING_USERNAME/PASSWORD
        or ~/.mlflow/credentials instead)."""
        if self.tracking.tracking_uri:
            uri, source = self.tracking.tracking_uri, "tracking.tracking_uri"
        elif os.environ.get("MLFLOW_TRACKING_URI"):
            uri, source = os.environ["MLFLOW_TRACKING_URI"], "MLFLOW_TRACKING_URI"
        else:
            return default_tracking_uri()
        parts = urlsplit(uri)
        if parts.scheme in ("http", "https") and (parts.username or parts.password):
            raise InputError(f"{source}: {parts.scheme}://…@{parts.hostname}: credentials do not belong in the "
                             "tracking URI (it is printed and saved): set MLFLOW_TRACKING_USERNAME and "
                             "MLFLOW_TRACKING_PASSWORD, or use ~/.mlflow/credentials")
        return uri


@functools.cache
def experiment_model(algorithm: str) -> type[ExperimentConfig]:
    """The experiment model whose `training` section is `algorithm`'s own."""
    section = algos.algorithm(algorithm).training_section
    return create_model(f"{section.__name__}Experiment", __base__=ExperimentConfig,
                        training=(section, Field(default_factory=section)))
