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
from typing import Annotated, Any, ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import Field, PrivateAttr, create_model, field_validator, model_validator

import algos
import envs
from algos.base import Algorithm
from algos.inputs import TrainingBase
from envs.abilities import HasBars
from envs.errors import InputError
from envs.splits import Protocol
from envs.validation import StrictModel as Section
from experiments.config.retrain_settings import RetrainSection
from experiments.config.search_space import check_search_space
from experiments.tracking.store import default_tracking_uri


class EnvironmentSection(Section):
    """Which env the agent acts in and how it is configured."""

    env: str = Field(description="The env to train in: a registered Gymnasium id, a key of envs.ENVIRONMENTS (an env "
                                 "family of the platform) or any other, e.g. CartPole-v1. Required once the file "
                                 "and its `extends:` chain are merged.")
    env_config: dict[str, Any] = Field(
        default_factory=dict,
        description="The env's settings; their keys are those of the env family of `env` (python -m "
                    "experiments.config explain environment.env_config.KEY). A plain Gymnasium id takes them as "
                    "keyword arguments of gymnasium.make.")


class EnvRunnersSection(Section):
    """RLlib's env runners, the processes that step the envs and collect experience; None leaves a setting
    to the hardware preset."""

    num_env_runners: int | None = Field(
        default=None, ge=0,
        description="Env-runner processes per trial (0: the trial's own process steps the envs). None: the hardware "
                    "preset decides; set it to pin the sampling parallelism whatever the machine.")
    num_envs_per_env_runner: int | None = Field(
        default=None, ge=1,
        description="Envs each env runner steps together as one vector env. None: the hardware preset decides; more "
                    "envs batch the policy's forward passes.")
    num_cpus_per_env_runner: float | None = Field(
        default=None, gt=0,
        description="CPUs Ray reserves for each env runner (fractions share a core). None: the hardware preset "
                    "decides.")
    rollout_fragment_length: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(
        default=4,
        description="Env steps each env collects per sample call. Small fragments with vector envs keep an "
                    "off-policy replay ratio steady; auto lets RLlib size it from the batch (PPO).")


class LearnersSection(Section):
    """RLlib's learners, which update the weights; None leaves a setting to the hardware preset."""

    num_learners: int | None = Field(
        default=None, ge=0,
        description="Learner processes per trial (0: the trial's own process learns; 2 or more: data-parallel "
                    "updates that split the batch). None: the hardware preset decides.")
    num_gpus_per_learner: float | None = Field(
        default=None, ge=0,
        description="GPUs each learner takes (a fraction lets several trials share one GPU; 0: CPU). None: the "
                    "hardware preset decides.")


class RLModuleSection(Section):
    """The network of RLlib's default RLModule (a portfolio model is sized by training.model_hiddens instead)."""

    # Keys only some algorithms' networks read: an algorithm lists those it reads in Algorithm.module_keys, and
    # a file that changes one for another algorithm is refused rather than silently ignored. (Changed from its
    # default, not set: the sweep validates every trial's config again from a full dump.)
    ALGORITHM_KEYS: ClassVar[tuple[str, ...]] = ("fusionnet_hiddens",)

    fcnet_hiddens: list[Annotated[int, Field(ge=1)]] = Field(
        default_factory=lambda: [128, 128],
        description="Hidden layer sizes of the network's shared body (the encoder): wider or deeper for richer "
                    "observations, smaller for speed.")
    fcnet_activation: Literal["relu", "tanh", "swish", "linear"] = Field(
        default="relu", description="Activation function of the hidden layers.")
    head_fcnet_hiddens: list[Annotated[int, Field(ge=1)]] = Field(
        default_factory=list,
        description="Hidden layer sizes of the heads on top of the body (Q values, policy, value); empty: each head "
                    "is one linear layer.")
    fusionnet_hiddens: list[Annotated[int, Field(ge=1)]] = Field(
        default_factory=lambda: [256, 256], min_length=1,
        description="SAC with Box actions only: hidden layer sizes of the layers that join the Q network's "
                    "observation and action encoders (RLlib's fusion net; its default [256, 256]). Each Q update "
                    "runs them six times, so a smaller one makes SAC's update cheaper.")


class EvaluationSection(Section):
    """RLlib's periodic evaluation, used for model selection (never on the test split), and the protocol
    that cuts the data into (train, validation, test) folds."""

    evaluation_interval: int | None = Field(
        default=None, ge=1,
        description="Run RLlib's greedy evaluation every this many training iterations; None: never (no "
                    "evaluation/* results to select on). Set it to select checkpoints on validation data.")
    evaluation_duration: int = Field(
        default=1, ge=1,
        description="How much each evaluation runs, in evaluation_duration_unit: more gives a steadier validation "
                    "score at more cost.")
    evaluation_duration_unit: Literal["episodes", "timesteps"] = Field(
        default="episodes", description="Whether evaluation_duration counts episodes or env steps.")
    env_config: dict[str, Any] = Field(
        default_factory=dict,
        description="env_config keys laid over environment.env_config for evaluation (e.g. split: validation, "
                    "episode_length: null); the test split is refused: model selection must not see it.")
    protocol: dict[str, Any] | str | None = Field(
        default=None,
        description="How the data is cut into (train, validation, test) folds: holdout, or {type: walk_forward, "
                    "folds, train: expanding|rolling, train_size, validation_size, test_size, embargo} "
                    "(envs.splits.Protocol). None: the env's own split (holdout).")

    @field_validator("protocol")
    @classmethod
    def _valid_protocol(cls, value: dict[str, Any] | str | None) -> dict[str, Any] | None:
        protocol = None if value is None else Protocol.from_dict(value, "")
        if protocol is not None and protocol.type == "refit":
            raise ValueError("type refit holds out nothing to select or score on: it is what python -m "
                             "experiments.retrain --refit trains the champion's configuration with; use holdout or "
                             "walk_forward")
        return None if protocol is None else protocol.as_dict()

    @field_validator("env_config")
    @classmethod
    def _no_test_split(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value.get("split") == "test":
            raise ValueError("model selection must not see the test split: use split: validation")
        return value


class ReportingSection(Section):
    """How much one training iteration (one reported result) holds."""

    min_sample_timesteps_per_iteration: int = Field(
        default=1000, ge=1,
        description="Env steps one training iteration samples at least: an iteration is the unit of tune.stop, "
                    "evaluation_interval and checkpoints, so this sets how much training each one holds.")
    min_time_s_per_iteration: float | None = Field(
        default=None, ge=0,
        description="Seconds one training iteration lasts at least (None: no minimum); for iterations of a steady "
                    "wall-clock length.")


class SelectSection(Section):
    """Which checkpoint of a trial is its choice (and its score when configurations are compared): the best by the
    validation score `tune.metric`, smoothed over the last `smooth` iterations, and only among iterations after
    the algorithm's exploration has decayed when `after_exploration` (docs/verdicts.md: the checkpoint study)."""

    smooth: int = Field(
        default=1, ge=1,
        description="Score a checkpoint by the mean validation score of the last this many iterations (1: its own), "
                    "so that one lucky evaluation does not pick it.")
    after_exploration: bool = Field(
        default=False,
        description="Only iterations after the algorithm's exploration has decayed (DQN: the epsilon schedule's "
                    "last point) can be chosen; earlier ones score as the worst.")


class CheckpointSection(Section):
    """Checkpoint every `frequency` iterations and keep the `num_to_keep` best by the selection score (plus the
    newest, which Tune always keeps). Only a checkpointed iteration can be scored: with frequency 1 the
    best validation iteration is always among them."""

    frequency: int = Field(
        default=1, ge=0,
        description="Checkpoint every this many training iterations (0: only at the end). Only a checkpointed "
                    "iteration can be chosen, so 1 keeps the best validation iteration among them.")
    num_to_keep: int = Field(
        default=2, ge=1,
        description="Checkpoints kept per trial, the best by the selection score (Tune also keeps the newest); more "
                    "keeps more disk.")
    select: SelectSection = Field(
        default_factory=SelectSection,
        description="Which checkpoint of a trial is its choice and its score: smoothing and the exploration cut-off.")


class SchedulerSection(Section):
    """`fifo` runs every trial to its stop criterion; `asha` stops weak trials early (by metric/mode)."""

    type: Literal["fifo", "asha"] = Field(
        default="fifo",
        description="fifo runs every trial to its stop criterion; asha stops weak trials early (by tune.metric and "
                    "tune.mode) to spend the budget on promising ones.")
    grace_period: int = Field(
        default=2, ge=1, description="asha: training iterations a trial runs before it can be stopped.")
    reduction_factor: float = Field(
        default=3.0, gt=1,
        description="asha: about 1/reduction_factor of the trials go on at each rung; larger stops more, sooner.")
    max_t: int | None = Field(
        default=None, ge=1,
        description="asha: the most training iterations a trial runs. None: the stop criterion's training_iteration.")


class PlateauSection(Section):
    """Stop a trial whose validation score has stopped improving (experiments/sweep/plateau.py); `tune.stop` stays
    the maximum budget, and the first of the two stops the trial."""

    metric: str | None = Field(
        default=None,
        description="The result key (\"/\"-separated) whose curve is watched. None: tune.metric.")
    patience: int = Field(
        ge=1,
        description="Training iterations without a new best (a gain of more than min_delta) after which the trial "
                    "stops, e.g. 4.")
    min_delta: float = Field(
        default=0.0, ge=0,
        description="How much better than the best so far an iteration must be to count as a new best, in the "
                    "metric's units (0: any gain).")
    mode: Literal["max", "min"] | None = Field(
        default=None, description="Whether a higher or a lower metric is better. None: tune.mode.")


class TuneSection(Section):
    metric: str = Field(
        default="env_runners/episode_return_mean",
        description="The result key (\"/\"-separated) that ranks trials and checkpoints, e.g. "
                    "evaluation/env_runners/episode_return_mean to select on validation data; it must be a key the "
                    "algorithm reports.")
    mode: Literal["max", "min"] = Field(default="max", description="Whether a higher or a lower tune.metric is better.")
    num_samples: int = Field(
        default=1, ge=1,
        description="Points drawn from the search space (each grid combination is repeated this many times); every "
                    "point runs once per seed.")
    seeds: list[Annotated[int, Field(ge=0)]] = Field(
        default_factory=lambda: [0],
        description="Every configuration runs once per seed (the trial's RLlib seed): more seeds tell luck from "
                    "skill.")
    search_seed: int = Field(
        default=0, ge=0,
        description="Seeds the searcher (random sampling or Optuna's TPE): the same file samples the same points; "
                    "change it for other points.")
    search_space: dict[str, dict[str, list[Any]]] = Field(
        default_factory=dict,
        description="Settings to search, by dotted key, each one form: {grid|choice: [values]}, {uniform|loguniform|"
                    "randint: [low, high]} or {quniform|qloguniform|qrandint: [low, high, q]}, e.g. training.lr: "
                    "{loguniform: [1e-4, 1e-3]}. In a file that extends another, null removes the base's search.")
    search_alg: Literal["random", "optuna"] = Field(
        default="random",
        description="random: Tune's variant generator (grids expanded, other domains sampled); optuna: TPE, which "
                    "learns from earlier trials (no grids, one seed).")
    scheduler: SchedulerSection = Field(
        default_factory=SchedulerSection, description="Whether weak trials are stopped early (fifo or asha).")
    stop: dict[str, float] = Field(
        default_factory=lambda: {"training_iteration": 10},
        description="Result keys and thresholds, e.g. training_iteration, env_runners/num_env_steps_sampled_lifetime, "
                    "time_total_s or a target return env_runners/episode_return_mean: a trial stops at the first "
                    "reached. With tune.plateau, the maximum budget.")
    plateau: PlateauSection | None = Field(
        default=None,
        description="Stop a trial earlier, once its validation score has not improved for `patience` iterations, "
                    "e.g. {patience: 4}; unlike scheduler asha it compares a trial with its own past, never with "
                    "other trials (docs/learning.md). None: every trial runs to tune.stop.")
    group_by: str | None = Field(
        default=None,
        description="A search_space key: the best trial is picked and scored per value of this setting, e.g. one "
                    "model per coin of a grid over the coins. None: one best over all trials.")
    max_concurrent_trials: int | None = Field(
        default=None, ge=1, description="Trials run at once at most. None: the hardware preset decides.")
    max_failures: int = Field(
        default=2, ge=-1,
        description="A trial whose worker dies (a killed process, a lost node, a storage blip) is retried from its "
                    "last checkpoint this many times before it counts as failed (-1: always); a failed trial makes "
                    "the run partial.")
    trial_resources: dict[Annotated[str, Field(min_length=1)], Annotated[float, Field(gt=0)]] = Field(
        default_factory=dict,
        description="Custom Ray resources each trial's main process asks for, to place trials on the nodes that "
                    "declare them, e.g. {gpu_node: 1} with `ray start --resources '{\"gpu_node\": 4}'` on those nodes "
                    "only; the run refuses to start when no node declares one.")
    checkpoint: CheckpointSection = Field(
        default_factory=CheckpointSection,
        description="How often trials checkpoint, how many checkpoints they keep and which one is chosen.")

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

    def curve_rule(self) -> tuple[str, Literal["max", "min"], float]:
        """The metric, mode and minimum gain a trial's validation curve is read by (the plateau's stopper and whether
        a finished trial's curve had flattened): tune.plateau's, each defaulting to tune.metric and tune.mode;
        without a plateau tune.metric, tune.mode and any gain."""
        if self.plateau is None:
            return self.metric, self.mode, 0.0
        return self.plateau.metric or self.metric, self.plateau.mode or self.mode, self.plateau.min_delta


class EnsembleSection(Section):
    """One more model from a run's chosen trials: per fold, its members' mean decision
    (algos/export/ensemble_policy.py), judged beside the single chosen trial and registered as a version of its own
    (alias `ensemble`)."""

    over: Literal["seeds", "configurations"] = Field(
        description="Who the members are, per fold: seeds (the seeds of the configuration chosen on that fold's "
                    "validation part) or configurations (every configuration of the group and every seed). Their "
                    "decision is the mean of theirs: Q-values, action probabilities, portfolio weights or target "
                    "exposures.")


class TrackingSection(Section):
    """Where the run's MLflow runs go and what they record."""

    tracking_uri: str | None = Field(
        default=None,
        description="The MLflow tracking server or store (credentials never go here: MLFLOW_TRACKING_USERNAME/"
                    "PASSWORD). None: MLFLOW_TRACKING_URI, else a sqlite store in ./mlruns.")
    experiment_name: str | None = Field(
        default=None, description="The MLflow experiment the runs are logged under. None: the experiment's name.")
    system_metrics: bool = Field(
        default=True,
        description="Log the CPU, memory, disk, network and (with the `gpu` extra) GPU use of every trial, sampled in "
                    "its own process (algos/rllib/system_metrics.py), as system/* metrics of its run; false: none.")
    system_metrics_interval_s: float = Field(
        default=10.0, gt=0, le=3600,
        description="Seconds between two samples of system_metrics: shorter shows spikes, longer logs less.")


# The algorithm of a file that names none (`algorithm:` left out): the one default, read wherever a file is read.
DEFAULT_ALGORITHM = "dqn"


class ExperimentConfig(Section):
    name: str = Field(
        description="The experiment's name: it names the MLflow experiment, the output folder and the registered "
                    "model. Required once the file and its `extends:` chain are merged.")
    description: str = Field(default="", description="One line on what the experiment is, shown with its results.")
    algorithm: str = Field(
        default=DEFAULT_ALGORITHM,
        description="The algorithm, a key of algos.ALGORITHMS (dqn, ppo, sac); it brings the model of the training "
                    "section, so changing it starts training afresh.")
    hardware: str | None = Field(
        default=None,
        description="The hardware preset (a file of conf/hardware, or auto) that sizes runners, learners, batches and "
                    "concurrency; --hardware and GPU_PROFILE take precedence. None: detected.")
    storage: str | None = Field(
        default=None,
        description="Where Tune's results, checkpoints and the resume file go: a folder or s3://bucket/prefix "
                    "(experiments.storage.filesystem); --storage and RLPLATFORM_STORAGE also set it. None: the "
                    "--output folder.")
    environment: EnvironmentSection = Field(description="The env and its env_config.")
    env_runners: EnvRunnersSection = Field(
        default_factory=EnvRunnersSection, description="RLlib's env runners: how experience is collected.")
    learners: LearnersSection = Field(
        default_factory=LearnersSection, description="RLlib's learners: how many update the weights, on what.")
    training: TrainingBase = Field(
        default_factory=TrainingBase,  # the algorithm's own subclass (experiment_model)
        description="The algorithm's training settings: its keys depend on `algorithm` (python -m experiments.config "
                    "explain training).")
    rl_module: RLModuleSection = Field(
        default_factory=RLModuleSection, description="The network of RLlib's default RLModule.")
    evaluation: EvaluationSection = Field(
        default_factory=EvaluationSection,
        description="Periodic greedy evaluation for model selection, and the protocol that cuts the data into folds.")
    reporting: ReportingSection = Field(
        default_factory=ReportingSection, description="How much one training iteration holds.")
    tune: TuneSection = Field(
        default_factory=TuneSection,
        description="The sweep: metric, seeds, search space, scheduler, stop criterion, plateau and checkpoints.")
    tracking: TrackingSection = Field(
        default_factory=TrackingSection, description="MLflow: where runs are logged and what system use they record.")
    retrain: RetrainSection = Field(
        default_factory=RetrainSection,
        description="How python -m experiments.retrain makes a challenger and judges it against the champion.")
    ensemble: EnsembleSection | None = Field(
        default=None,
        description="Make one more model of the run's chosen trials, e.g. {over: seeds}: per fold the mean decision "
                    "of the chosen configuration's seeds, judged beside the single chosen trial on the same test "
                    "windows and registered (alias ensemble). None: the single chosen trial only.")
    warm_start: str | None = Field(
        default=None,
        description="A checkpoint every trial starts from (weights and optimizer state; the replay buffer starts "
                    "empty): what experiments.retrain's incremental mode sets to the champion's. None: trials start "
                    "from scratch.")
    # Search-space keys that a --set override pinned to one value (removed from tune.search_space).
    _pinned: dict[str, Any] = PrivateAttr(default_factory=dict)
    # Every dotted key a --set override changed, and whether this is a --smoke-test version: both name
    # the registered model (experiments.results.registry.registered_name).
    _overridden: list[str] = PrivateAttr(default_factory=list)
    _smoke_test: bool = PrivateAttr(default=False)
    # What the plan should say about how the file was read (e.g. an algorithm switched by --set).
    _notes: list[str] = PrivateAttr(default_factory=list)
    _family: envs.EnvFamily | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _module_keys_its_algorithm_reads(self) -> "ExperimentConfig":
        for key in RLModuleSection.ALGORITHM_KEYS:
            default = RLModuleSection.model_fields[key].get_default(call_default_factory=True)
            if getattr(self.rl_module, key) != default and key not in self.spec.module_keys:
                readers = [name for name in algos.ALGORITHMS if key in algos.algorithm(name).module_keys]
                raise ValueError(f"rl_module.{key}: algorithm {self.algorithm}'s network does not read it (only "
                                 f"{', '.join(readers)}'s does): remove it")
        return self

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
    def spec(self) -> Algorithm:
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
        return self.family.timeframe(self.environment.env_config) if isinstance(self.family, HasBars) else None

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
