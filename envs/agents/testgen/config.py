"""The env_config of the test-generation environment, validated in one place.

The same dictionary reaches the environment (from `gymnasium.make(id, config=...)` or RLlib's
`env_config`) and `evaluate_policy`, so both parse it here: an unknown program, a test program that is
also trained on, or a value out of range raises `InputError` naming the key and the fix.
"""
from __future__ import annotations

from typing import Any, Literal, Mapping

from pydantic import ConfigDict, Field, field_validator, model_validator

from envs.agents.testgen.programs import PROGRAMS
from envs.validation import StrictModel, unknown_name, validate


class TestGenerationConfig(StrictModel):
    """Every env_config key with its default; `gymnasium.make` with no config uses these."""

    model_config = ConfigDict(frozen=True)
    __test__ = False  # a pydantic model, not a pytest test class

    train_programs: list[str] = Field(
        default=["html.parser", "email", "markdown-it"],
        description="Programs (keys of envs.agents.testgen.programs.PROGRAMS) trained on: an episode fuzzes one "
                    "program of its split.")
    validation_programs: list[str] = Field(
        default=["http.cookies"], description="Programs the model is selected on; held out of training.")
    test_programs: list[str] = Field(
        default=["tomllib"],
        description="Programs the scorer fuzzes; held out of training and validation.")
    split: Literal["train", "validation", "test"] = Field(
        default="train", description="Which programs the env fuzzes: those of train, validation or test.")
    budget: int = Field(default=1000, ge=1, le=1_000_000,
                        description="Executions per episode (after the seeds): the fuzzing budget an agent spends.")
    executions_per_step: int = Field(
        default=8, ge=1, le=1000,
        description="Executions per step: each action (a schedule) is played this many times before the next choice.")
    eval_budget: int = Field(default=2000, ge=1, le=1_000_000,
                             description="Executions per scored run (the agent, each baseline and Atheris alike).")
    eval_seeds: int = Field(default=5, ge=1, le=100, description="Scored runs (seeds) per strategy and program.")
    max_input_bytes: int = Field(default=512, ge=8, le=1_000_000,
                                 description="Longest input the operators produce (bytes); also Atheris' -max_len.")
    seed: int = Field(default=0, ge=0, description="The env's seed when reset is given none, and the first of the "
                                                "scorer's eval_seeds seeds.")
    reward_scale: float = Field(
        default=0.1, gt=0, le=1000,
        description="Reward per new arc: the return is reward_scale x (arcs at the end - arcs of the seeds).")

    @field_validator("train_programs", "validation_programs", "test_programs")
    @classmethod
    def _known(cls, names: list[str]) -> list[str]:
        if not names:
            raise ValueError(f"empty: name at least one program (known: {', '.join(sorted(PROGRAMS))})")
        for name in names:
            if name not in PROGRAMS:
                raise unknown_name("program", name, PROGRAMS)
        if len(set(names)) != len(names):
            raise ValueError("a program is listed twice: list each once")
        return names

    @model_validator(mode="after")
    def _held_out(self) -> "TestGenerationConfig":
        for earlier, later in (("train", "validation"), ("train", "test"), ("validation", "test")):
            shared = sorted(set(self.programs(earlier)) & set(self.programs(later)))
            if shared:
                raise ValueError(f"env_config.{later}_programs: {', '.join(map(repr, shared))} also in "
                                 f"{earlier}_programs, so not held out: remove it from one of the two lists")
        return self

    def programs(self, split: str | None = None) -> list[str]:
        """The programs of `split` (default: the configured one)."""
        return getattr(self, f"{split or self.split}_programs")


def parse_config(raw: Mapping[str, Any] | None) -> TestGenerationConfig:
    """Validate a user's env_config; unknown keys and bad values raise `InputError`."""
    return validate(TestGenerationConfig, dict(raw or {}), "test generation env", prefix="env_config.")
