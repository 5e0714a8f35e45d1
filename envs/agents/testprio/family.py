"""The execution agent's families: `agents/TestPrioritization-v0` (pointwise: one score per test) and
`agents/TestPrioritizationPairwise-v0` (pairwise: which of two tests runs first). Both read CI histories, serve
from a cycle's table, score on validation cycles as on test cycles, and transfer to histories they never saw; the
pairwise one changes only its env, scorers and reader."""
from __future__ import annotations

from typing import Any

import gymnasium as gym

from envs.abilities import ScoresValidation, ServesRawInputs, Transfers
from envs.baselines import Baseline
from envs.families import EnvFamily, Scorer
from envs.report import Policy
from envs.validation import StrictModel


class TestPrioritizationFamily(ScoresValidation, ServesRawInputs, Transfers, EnvFamily):
    """Pointwise test prioritization on CI histories."""

    env_id = "agents/TestPrioritization-v0"
    data_keys = ("data_path", "data_paths")
    comparison_columns = ("eval/apfdc", "eval/ttff", "eval/apfd", "eval/nrpa", "eval/paper_nrpa")
    validation_keys = ("score", "apfdc", "nrpa", "failing_cycles", "cycles")

    def env_class(self) -> type[gym.Env]:
        from envs.agents.testprio.env import PointwiseTestPrioritizationEnv

        return PointwiseTestPrioritizationEnv

    def config_model(self) -> type[StrictModel]:
        from envs.agents.testprio.config import PrioritizationConfig

        return PrioritizationConfig

    def evaluator(self) -> Scorer:
        from envs.agents.testprio.evaluate import evaluate_policy

        return evaluate_policy

    def validation_scores(self, policy: Policy, env_config: dict[str, Any]) -> dict[str, float]:
        from envs.agents.testprio.evaluate import validation_scores

        return validation_scores(policy, env_config)

    def baseline_table(self) -> tuple[Baseline, ...]:
        from envs.agents.testprio.baselines import BASELINES

        return BASELINES

    def data_parts(self, env_config: dict[str, Any]) -> list[Any]:
        from envs.agents.testprio.datasets import data_parts

        return data_parts(env_config)

    def reader_class(self) -> Any:
        from envs.agents.testprio.cycle_reader import CycleReader

        return CycleReader

    def transfer(self, policy: Policy, reader: Any, data_path: str, learners: Any) -> Any:
        from envs.agents.testprio.transfer import score_registered

        return score_registered(policy, reader, data_path, learners)


class PairwiseTestPrioritizationFamily(TestPrioritizationFamily):
    """Pairwise test prioritization: the same histories and abilities, a pairwise env, scorers and reader."""

    env_id = "agents/TestPrioritizationPairwise-v0"

    def env_class(self) -> type[gym.Env]:
        from envs.agents.testprio.env import PairwiseTestPrioritizationEnv

        return PairwiseTestPrioritizationEnv

    def evaluator(self) -> Scorer:
        from envs.agents.testprio.evaluate import evaluate_pairwise_policy

        return evaluate_pairwise_policy

    def validation_scores(self, policy: Policy, env_config: dict[str, Any]) -> dict[str, float]:
        from envs.agents.testprio.evaluate import pairwise_validation_scores

        return pairwise_validation_scores(policy, env_config)

    def reader_class(self) -> Any:
        from envs.agents.testprio.cycle_reader import PairwiseCycleReader

        return PairwiseCycleReader


FAMILY = TestPrioritizationFamily()
PAIRWISE_FAMILY = PairwiseTestPrioritizationFamily()
