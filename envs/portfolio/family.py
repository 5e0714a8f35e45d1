"""`trading/Portfolio-v0`: a universe as one model. It extends the trading family (envs/trading/family.py): folds,
bars, the feature store, a served reader, paper trading, the retrain and a differentiable book are the same
abilities; the universe brings its own env, config, scorer, baselines, reader, paper book and retrain data (every
file cut at one calendar time)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gymnasium as gym

from envs.baselines import Baseline
from envs.families import Scorer
from envs.trading.family import TradingFamily
from envs.validation import StrictModel

if TYPE_CHECKING:
    from envs.ability_types import PaperMarket
    from envs.retrain_data import RetrainData


class PortfolioFamily(TradingFamily):
    """One policy allocates across a universe of assets on one calendar."""

    env_id = "trading/Portfolio-v0"
    data_keys = ("data_paths", "table_path", "synthetic_model")
    comparison_columns = ("eval/total_return", "eval/sharpe", "eval/turnover")
    # a synthetic universe's smoke test runs at 20 assets (conf/ppo_portfolio_500.yaml); files ignore the key
    smoke_overrides = ("environment.env_config.synthetic_assets=20",)

    def env_class(self) -> type[gym.Env]:
        from envs.portfolio.env import PortfolioEnv

        return PortfolioEnv

    def config_model(self) -> type[StrictModel]:
        from envs.portfolio.config import PortfolioConfig

        return PortfolioConfig

    def evaluator(self) -> Scorer:
        from envs.portfolio.backtest import evaluate_policy

        return evaluate_policy

    def baseline_table(self) -> tuple[Baseline, ...]:
        from envs.portfolio.baselines import BASELINES

        return BASELINES

    def data_parts(self, env_config: dict[str, Any]) -> list[Any]:
        from envs.portfolio.datasets import data_parts

        return data_parts(env_config)

    def reader_class(self) -> Any:
        from envs.portfolio.universe_reader import UniverseReader

        return UniverseReader

    def paper_market(self) -> type[PaperMarket]:
        from envs.portfolio.paper import UniversePaper

        return UniversePaper

    def retrain_data(self, env_config: dict[str, Any], source: str) -> RetrainData:
        from envs.portfolio.retrain_data import UniverseRetrainData

        return UniverseRetrainData.read(env_config, source)

    def data_files(self, env_config: dict[str, Any], source: str) -> list[str]:
        from envs.portfolio.data_files import universe_files

        return universe_files(env_config, source)


FAMILY = PortfolioFamily()
