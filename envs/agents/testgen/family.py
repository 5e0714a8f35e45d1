"""`agents/TestGeneration-v0`: the generation agent schedules a fuzzer on real parsers, scored on a held-out
program against random and greedy schedulers and Atheris. It has none of the optional abilities."""
from __future__ import annotations

import gymnasium as gym

from envs.baselines import Baseline
from envs.families import EnvFamily, Scorer
from envs.validation import StrictModel


class TestGenerationFamily(EnvFamily):
    """Coverage-guided test-input generation."""

    env_id = "agents/TestGeneration-v0"
    data_keys = ("test_programs",)
    comparison_columns = ("eval/arcs", "eval/gained")
    smoke_overrides = ("environment.env_config.eval_seeds=5",)

    def env_class(self) -> type[gym.Env]:
        from envs.agents.testgen.env import TestGenerationEnv

        return TestGenerationEnv

    def config_model(self) -> type[StrictModel]:
        from envs.agents.testgen.config import TestGenerationConfig

        return TestGenerationConfig

    def evaluator(self) -> Scorer:
        from envs.agents.testgen.evaluate import evaluate_policy

        return evaluate_policy

    def baseline_table(self) -> tuple[Baseline, ...]:
        from envs.agents.testgen.baselines import BASELINES

        return BASELINES


FAMILY = TestGenerationFamily()
