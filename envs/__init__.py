"""Gymnasium environments (no Ray imports here) and the env table the platform reads.

Importing `envs` registers every environment id with Gymnasium, so `gymnasium.make(id)` works with
defaults. Each platform id has one `EnvFamily` entry that owns everything specific to it: the model
of its env_config, how its data is made ready before a run, which env_config keys name its data
and tag its MLflow runs, its bar interval (hardware presets size batches by it) and the function
that scores a trained policy on its held-out split (`envs.report.EvaluationReport`). The platform
(`experiments/`) spells no family's ids or keys; adding a family is one entry plus its own package
(docs/DESIGN.md, "Adding an env family").
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, replace
from typing import Any, Callable

import gymnasium as gym

from envs import work_counts
from envs.baselines import Baseline
from envs.errors import InputError
from envs.report import EvaluationReport, Policy
from envs.validation import did_you_mean, validate


@dataclass(frozen=True)
class EnvFamily:
    """What the platform needs to know of one env id."""

    entry_point: str  # "module:Class" of the gymnasium.Env
    scorer: str       # "module:function(policy, env_config) -> EvaluationReport" on the held-out part
    # The env takes env_config `protocol` and `fold` (envs.splits), tells its parts' periods with
    # `split_periods()`, and its reports carry per-period returns and periods_per_year: experiments can
    # run walk-forward folds and end with a verdict (experiments.results.verdict).
    folds: bool = False
    # "module:Class" of a native gymnasium.vector.VectorEnv (N envs in one numpy step), or None: RLlib's env
    # runners then use gymnasium's SyncVectorEnv over single envs.
    vector_entry_point: str | None = None
    # "module:Class" of the env_config's model (an envs.validation.StrictModel): checked before Ray starts.
    config_model: str | None = None
    # "module:function(env_config, searched, fetch, log) -> list of what is still missing": makes the data a
    # run needs local before it starts (`searched`: env_config key -> the values a search gives it).
    prepare: str | None = None
    timeframe_key: str | None = None  # env_config key of the bar interval; hardware presets size batches by it
    tag_keys: tuple[str, ...] = ()    # env_config keys that tag the MLflow runs (each trial its own value)
    data_keys: tuple[str, ...] = ()   # env_config keys that choose the data (a --set of one renames the model)
    # env_config key that receives the run's feature store (its storage root + features/), where computed
    # features are cached by content and shared by every trial; None: the family caches nothing.
    store_key: str | None = None
    # env_config keys (besides *_path and *_dir), at any depth, whose values are files: relative ones resolve
    # against the experiment file's folder (e.g. the trading family's asset: and series: feature blocks).
    path_keys: tuple[str, ...] = ()
    # "module:function(policy, env_config) -> DataFrame" of each feature's importance on the validation part (its
    # return's drop when the feature is permuted), or None: the family does not say which inputs matter.
    importance: str | None = None
    # env_config keys that cut the data themselves and mean nothing once a protocol does (folds: True): a file that
    # sets one next to evaluation.protocol is refused, not silently ignored (trading: split_fractions).
    unused_with_protocol: tuple[str, ...] = ()
    # "module:Class" that turns the family's raw inputs (e.g. the last OHLCV bars) into the env's observation for a
    # served policy (`for_env_config(env_config)`, `save`/`load`, `accepts(frame)`, `decide(frame, policy)`), or None:
    # the registered model takes observations only.
    input_reader: str | None = None
    # The agent's headline test metrics (keys of EvaluationReport.agent_metrics) that `experiments.compare` shows next
    # to each trial's training and validation returns.
    comparison_columns: tuple[str, ...] = ()
    # "module:Class" with which `experiments.paper` replays its registered models bar by bar on bars files
    # (`open(reader, files, follow)`: read, book, replay; envs.trading.paper.SpotPaper is one), or None: none.
    paper_trading: str | None = None
    # Whether `experiments.retrain` can retrain its models and forward-test the challenger on the newest bars of
    # the file it trained on (trading/Spot-v0's one-coin file).
    retrain: bool = False
    # "module:TABLE" of its baselines (envs.baselines.Baseline, headline first), which its scorer runs next to the
    # agent; None: plain Gymnasium ids, scored against random actions.
    baselines: str | None = None
    # --set overrides that make its --smoke-test runs short, on top of the platform's and the algorithm's (env_config
    # keys that size its scoring, e.g. how many seeds every strategy is scored on).
    smoke_overrides: tuple[str, ...] = ()
    # "module:function(policy, reader, data_path, learners) -> report (.table, .per_cycle, .notes)" that scores a
    # registered model (its policy and input reader) on data it never trained on, zero-shot and with the given
    # online learners (experiments.transfer), or None: the family's models are scored on their own split only.
    transfer: str | None = None
    # "module:function(env_config) -> list[envs.datasets.DataPart]": the parts of the data one env_config trains,
    # selects and is scored on, logged as MLflow dataset inputs of its runs; None: the family reads no data file.
    datasets: str | None = None
    # "module:function(policy, env_config) -> dict[str, float]" that scores the greedy policy on the validation part
    # as the family's final table scores the test part (e.g. APFDc over the failing validation cycles), merged into
    # RLlib's evaluation results as evaluation/validation/<key> after every evaluation, so tune.metric can select on
    # it; `validation_keys` names what it returns. None: selection reads RLlib's own evaluation returns.
    validation_scores: str | None = None
    validation_keys: tuple[str, ...] = ()
    # "module:Class" of the problem the direct learner (`algorithm: direct`, algos/direct/) trains through: a
    # differentiable copy of the family's book, built from one of its envs (`Class(env, batch_size, batch_start,
    # geometric_bias, seed, device)`, `Class.check(env, training)`); it lives in algos/ (torch), never in envs/. None:
    # the family has no differentiable book, and the direct learner refuses it.
    direct_problem: str | None = None
    env_id: str = ""  # the id this entry was resolved for (envs.family fills it; the table's keys are the ids)

    @property
    def has_vector_env(self) -> bool:
        """Whether the family has a native vector implementation (vector_entry_point)."""
        return bool(self.vector_entry_point)

    def make(self, env_config: dict[str, Any] | None = None) -> gym.Env:
        return make_env(self.env_id, env_config)

    def evaluator(self) -> Callable[[Policy, dict[str, Any]], EvaluationReport] | None:
        """The out-of-sample scorer (`scorer`), or None for plain Gymnasium ids."""
        return _load(self.scorer) if self.scorer else None

    def importance_function(self) -> Callable[[Policy, dict[str, Any]], Any] | None:
        """The feature-importance function (validation data only), or None."""
        return _load(self.importance) if self.importance else None

    def baseline_table(self) -> tuple[Baseline, ...]:
        """The family's baselines, headline first (empty for plain Gymnasium ids)."""
        return _load(self.baselines) if self.baselines else ()

    def transfer_function(self) -> Callable[..., Any] | None:
        """The scorer of a registered model on other data (`transfer`), or None."""
        return _load(self.transfer) if self.transfer else None

    def validation_function(self) -> Callable[[Policy, dict[str, Any]], dict[str, float]] | None:
        """The validation scorer (`validation_scores`), or None."""
        return _load(self.validation_scores) if self.validation_scores else None

    def data_parts(self, env_config: dict[str, Any]) -> list[Any]:
        """The parts of the data `env_config` reads (`datasets`), empty when the family says none."""
        return list(_load(self.datasets)(env_config)) if self.datasets else []

    def paper_market(self) -> Any | None:
        """The class that paper-trades its registered models (paper_trading), or None."""
        return _load(self.paper_trading) if self.paper_trading else None

    def reader_class(self) -> Any | None:
        """The class that reads the family's raw inputs for a served policy (input_reader), or None."""
        return _load(self.input_reader) if self.input_reader else None

    def check_config(self, env_config: dict[str, Any], source: str, prefix: str = "environment.env_config.") -> None:
        """Validate an env_config against the family's model (no data is read); InputError naming the key."""
        if self.config_model:
            validate(_load(self.config_model), dict(env_config), source, prefix)

    def timeframe(self, env_config: dict[str, Any]) -> str | None:
        """The bar interval an env config declares (e.g. "1h"), for families that have one."""
        return env_config.get(self.timeframe_key) if self.timeframe_key else None

    def run_tags(self, env_config: dict[str, Any]) -> dict[str, str]:
        """MLflow tags of a run of this env: the family's tag keys and the data it reads."""
        tags = {key: str(env_config[key]) for key in self.tag_keys if env_config.get(key) is not None}
        return {**tags, "data": self.data_label(env_config)}

    def data_label(self, env_config: dict[str, Any]) -> str:
        """What data a run reads: the first of the family's data keys that is set, else the env id."""
        return next((str(env_config[key]) for key in self.data_keys if env_config.get(key) is not None), self.env_id)

    def attach_store(self, env_config: dict[str, Any], uri: str) -> None:
        """Give the env config the run's feature store (`uri`), for families that cache features (`store_key`),
        unless the file names one."""
        if self.store_key and not env_config.get(self.store_key):
            env_config[self.store_key] = uri

    def prepare_data(self, env_config: dict[str, Any], searched: dict[str, list[Any]], fetch: bool,
                     log: Callable[[str], None]) -> list[str]:
        """Make the data a run needs local (`prepare`); returns what is still missing."""
        return _load(self.prepare)(env_config, searched, fetch, log) if self.prepare else []


_TESTPRIO_CONFIG = "envs.agents.testprio.config:PrioritizationConfig"
_TESTPRIO_COLUMNS = ("eval/apfdc", "eval/ttff", "eval/apfd", "eval/nrpa", "eval/paper_nrpa")
_TESTPRIO_VALIDATION_KEYS = ("score", "apfdc", "nrpa", "failing_cycles", "cycles")
_TESTPRIO_BASELINES = "envs.agents.testprio.baselines:BASELINES"
_TESTPRIO_DATA = ("data_path", "data_paths")
_TESTPRIO_TRANSFER = "envs.agents.testprio.transfer:score_registered"
_TESTPRIO_DATASETS = "envs.agents.testprio.datasets:data_parts"
ENVIRONMENTS: dict[str, EnvFamily] = {
    "trading/Spot-v0": EnvFamily(
        "envs.trading.env:SpotTradingEnv", "envs.trading.backtest:evaluate_policy", folds=True,
        vector_entry_point="envs.trading.vector_env:SpotTradingVectorEnv",
        config_model="envs.trading.env:TradingConfig", prepare="envs.trading.fetch:prepare_data",
        timeframe_key="timeframe", tag_keys=("symbol",),
        data_keys=("data_path", "symbol", "source", "synthetic_model"), store_key="feature_store",
        path_keys=("asset", "series"), importance="envs.trading.importance:permutation_importance",
        unused_with_protocol=("split_fractions",), input_reader="envs.trading.bar_reader:BarReader",
        paper_trading="envs.trading.paper:SpotPaper", retrain=True,
        comparison_columns=("eval/total_return", "eval/sharpe", "eval/trades"),
        baselines="envs.trading.backtest:BASELINES", datasets="envs.trading.datasets:data_parts",
        direct_problem="algos.direct.spot:SpotProblem"),
    "trading/Portfolio-v0": EnvFamily(
        "envs.portfolio.env:PortfolioEnv", "envs.portfolio.backtest:evaluate_policy", folds=True,
        config_model="envs.portfolio.config:PortfolioConfig", timeframe_key="timeframe",
        data_keys=("data_paths", "table_path", "synthetic_model"), store_key="feature_store",
        unused_with_protocol=("split_fractions",),
        comparison_columns=("eval/total_return", "eval/sharpe", "eval/turnover"),
        input_reader="envs.portfolio.universe_reader:UniverseReader",
        paper_trading="envs.portfolio.paper:UniversePaper", baselines="envs.portfolio.baselines:BASELINES",
        datasets="envs.portfolio.datasets:data_parts", direct_problem="algos.direct.portfolio:PortfolioProblem",
        # a synthetic universe's smoke test runs at 20 assets (conf/ppo_portfolio_500.yaml); files ignore the key
        smoke_overrides=("environment.env_config.synthetic_assets=20",)),
    "agents/TestPrioritization-v0": EnvFamily(
        "envs.agents.testprio.env:PointwiseTestPrioritizationEnv", "envs.agents.testprio.evaluate:evaluate_policy",
        config_model=_TESTPRIO_CONFIG, data_keys=_TESTPRIO_DATA, comparison_columns=_TESTPRIO_COLUMNS,
        baselines=_TESTPRIO_BASELINES, input_reader="envs.agents.testprio.cycle_reader:CycleReader",
        transfer=_TESTPRIO_TRANSFER, datasets=_TESTPRIO_DATASETS,
        validation_scores="envs.agents.testprio.evaluate:validation_scores", validation_keys=_TESTPRIO_VALIDATION_KEYS),
    "agents/TestPrioritizationPairwise-v0": EnvFamily(
        "envs.agents.testprio.env:PairwiseTestPrioritizationEnv",
        "envs.agents.testprio.evaluate:evaluate_pairwise_policy", config_model=_TESTPRIO_CONFIG,
        data_keys=_TESTPRIO_DATA, comparison_columns=_TESTPRIO_COLUMNS, baselines=_TESTPRIO_BASELINES,
        input_reader="envs.agents.testprio.cycle_reader:PairwiseCycleReader", transfer=_TESTPRIO_TRANSFER,
        datasets=_TESTPRIO_DATASETS, validation_scores="envs.agents.testprio.evaluate:pairwise_validation_scores",
        validation_keys=_TESTPRIO_VALIDATION_KEYS),
    "agents/TestGeneration-v0": EnvFamily(
        "envs.agents.testgen.env:TestGenerationEnv", "envs.agents.testgen.evaluate:evaluate_policy",
        config_model="envs.agents.testgen.config:TestGenerationConfig", data_keys=("test_programs",),
        comparison_columns=("eval/arcs", "eval/gained"), baselines="envs.agents.testgen.baselines:BASELINES",
        smoke_overrides=("environment.env_config.eval_seeds=5",)),
}

for _env_id, _family in ENVIRONMENTS.items():
    if _env_id not in gym.registry:
        gym.register(id=_env_id, entry_point=_family.entry_point, vector_entry_point=_family.vector_entry_point)


def _load(entry_point: str) -> Any:
    module_name, attr = entry_point.split(":")
    return getattr(importlib.import_module(module_name), attr)


def require_registered(env_id: str) -> None:
    """An InputError with the closest registered id when `env_id` is unknown to Gymnasium."""
    if env_id not in gym.registry:
        hint = did_you_mean(env_id, gym.registry) or ": see envs.ENVIRONMENTS or gymnasium.registry"
        raise InputError(f"environment.env {env_id!r} is not a registered environment{hint}")


def make_env(env_id: str, env_config: dict[str, Any] | None = None) -> gym.Env:
    """The one way to build an env from an experiment's (env, env_config): platform envs take the
    config as one dict, any other Gymnasium id (e.g. CartPole-v1) as keyword arguments."""
    require_registered(env_id)
    work_counts.count(work_counts.ENV_BUILDS)
    config = dict(env_config or {})
    if env_id in ENVIRONMENTS:
        return gym.make(env_id, config=config)
    try:
        return gym.make(env_id, **config)
    except TypeError as error:  # a keyword the env does not take: the file's mistake, said in one line
        raise InputError(f"env_config for {env_id}: {str(error).split(' was raised', 1)[0]}: give only the keyword "
                         f"arguments {env_id} takes") from None


def make_vector_env(env_id: str, num_envs: int, env_config: dict[str, Any] | None = None) -> gym.vector.VectorEnv:
    """`num_envs` copies of a platform env in one vector env: its native batched implementation when the
    family has one, else gymnasium's SyncVectorEnv (what RLlib's env runners get, see algos/dqn.py)."""
    require_registered(env_id)
    config = {key: value for key, value in dict(env_config or {}).items() if key != "num_envs"}
    if family(env_id).has_vector_env:
        return gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", config=config)
    return gym.vector.SyncVectorEnv([lambda: make_env(env_id, config) for _ in range(num_envs)])


def family(env_id: str) -> EnvFamily:
    """The family of an env id, resolved once per run and handed down (`ExperimentConfig.family`); plain Gymnasium
    ids (CartPole-v1) get an empty one that scores, caches and tags nothing."""
    return replace(ENVIRONMENTS.get(env_id) or EnvFamily(entry_point="", scorer=""), env_id=env_id)


def plan_lines(env: gym.Env) -> list[str]:
    """What an env says about itself for the plan (e.g. its features and their warm-ups), if it says anything."""
    describe = getattr(env.unwrapped, "plan_lines", None)
    return list(describe()) if callable(describe) else []


__all__ = ["ENVIRONMENTS", "EnvFamily", "EvaluationReport", "Policy", "family", "make_env", "make_vector_env",
           "plan_lines", "require_registered"]
