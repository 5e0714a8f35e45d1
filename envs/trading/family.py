"""The trading families: what a market of bars has (`TradingFamily`), and `trading/Spot-v0` (`SpotFamily`), one
asset traded through the ledger.

`TradingFamily` holds what every trading env shares: walk-forward folds and a verdict, bars of one interval, a
feature store, a served model that reads bars, paper trading. `trading/Portfolio-v0` extends it
(envs/portfolio/family.py) and overrides only what a universe does its own way.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Callable

import gymnasium as gym

from envs.abilities import (
    Backtests,
    CachesFeatures,
    ExplainsInputs,
    HasBars,
    PaperTrades,
    PreparesData,
    ProbesNumerics,
    Retrains,
    TrainsThroughBook,
    UpdatesData,
)
from envs.ability_types import DataCommand, DataFiles, NumericProbe
from envs.baselines import Baseline
from envs.families import EnvFamily, Scorer
from envs.report import Policy
from envs.validation import StrictModel

if TYPE_CHECKING:
    from envs.ability_types import PaperMarket
    from envs.retrain_data import RetrainData


class TradingFamily(Backtests, HasBars, CachesFeatures, PaperTrades, Retrains, UpdatesData, TrainsThroughBook,
                    EnvFamily):
    """A market of bars: folds, a bar interval, a feature store, a bars reader for serving, a paper book, a
    retrain on its newest bars, bars files that `experiments.data` imports and updates, and a book the direct
    learner trains through."""

    unused_with_protocol = ("split_fractions",)
    timeframe_key = "timeframe"
    store_key = "feature_store"
    data_kind = "bars files"

    def data_commands(self) -> tuple[DataCommand, ...]:
        from envs.trading.data_requests import BARS_COMMANDS

        return BARS_COMMANDS

    def run_data(self, request: Any, files: DataFiles) -> list[str]:
        from envs.trading.data_tasks import run_request

        return run_request(request, files)

    def update_request(self, paths: Sequence[str], feed: str) -> Any:
        from envs.trading.data_requests import UpdateBars

        return UpdateBars(tuple(paths), fetch=feed)


class SpotFamily(ExplainsInputs, PreparesData, ProbesNumerics, TradingFamily):
    """One asset: positions through the ledger's fills, slippage and fees; data fetched from exchanges into a cache."""

    env_id = "trading/Spot-v0"
    tag_keys = ("symbol",)
    data_keys = ("data_path", "symbol", "source", "synthetic_model")
    path_keys = ("asset", "series")
    comparison_columns = ("eval/total_return", "eval/sharpe", "eval/trades")

    def env_class(self) -> type[gym.Env]:
        from envs.trading.env import SpotTradingEnv

        return SpotTradingEnv

    def vector_env_class(self) -> type[gym.vector.VectorEnv]:
        from envs.trading.vector_env import SpotTradingVectorEnv

        return SpotTradingVectorEnv

    def config_model(self) -> type[StrictModel]:
        from envs.trading.env import TradingConfig

        return TradingConfig

    def evaluator(self) -> Scorer:
        from envs.trading.backtest import evaluate_policy

        return evaluate_policy

    def baseline_table(self) -> tuple[Baseline, ...]:
        from envs.trading.backtest import BASELINES

        return BASELINES

    def data_parts(self, env_config: dict[str, Any]) -> list[Any]:
        from envs.trading.datasets import data_parts

        return data_parts(env_config)

    def prepare_data(self, env_config: dict[str, Any], searched: dict[str, list[Any]], fetch: bool,
                     log: Callable[[str], None]) -> list[str]:
        from envs.trading.fetch import prepare_data

        return prepare_data(env_config, searched, fetch, log)

    def importance(self, policy: Policy, env_config: dict[str, Any]) -> Any:
        from envs.trading.importance import permutation_importance

        return permutation_importance(policy, env_config)

    def reader_class(self) -> Any:
        from envs.trading.bar_reader import BarReader

        return BarReader

    def paper_market(self) -> type[PaperMarket]:
        from envs.trading.paper import SpotPaper

        return SpotPaper

    def retrain_data(self, env_config: dict[str, Any], source: str) -> RetrainData:
        from envs.trading.retrain_data import BarsRetrainData

        return BarsRetrainData.read(env_config, source)

    def data_files(self, env_config: dict[str, Any], source: str) -> list[str]:
        from envs.trading.dataset_update import bars_file

        return [bars_file(env_config, source)]

    def numeric_probe(self) -> NumericProbe:
        from envs.trading.numeric_probe import feature_probe

        return feature_probe()


FAMILY = SpotFamily()
