"""Gymnasium environment for learning to generate test inputs: coverage-guided fuzzing as an MDP.

The agent is the scheduler of a mutational fuzzer: each step it picks one of the operators of
`envs.agents.testgen.mutators` and the input to apply it to, the environment executes the result once
under the arc tracer, and the reward is the coverage that execution added. Everything else (the corpus,
which input is current, deduplicating crashes) is the fixed mechanics every strategy shares, so the
baselines (`envs.agents.testgen.baselines`) and the agent differ only in how they choose actions.
"""
from __future__ import annotations

from typing import Any, Mapping

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs.agents.testgen.config import TestGenerationConfig, parse_config
from envs.agents.testgen.coverage_tracer import CoverageMap
from envs.agents.testgen.findings import Findings
from envs.agents.testgen.harness import harness
from envs.agents.testgen.mutators import ACTIONS, OPERATORS, SCHEDULE_PROBABILITIES, Mutator
from envs.errors import InputError

# Scales that map counts into [0, 1] the same way for every program.
MAX_ARCS = 100_000
MAX_CORPUS = 10_000
EMA = 0.1  # weight of the newest execution in the recent rates (about the last 10 of them)

# Byte classes of the current input: letters, digits, other printable ASCII, whitespace, the rest.
_BYTE_CLASS = np.full(256, 4, dtype=np.int64)
_BYTE_CLASS[[*range(ord("a"), ord("z") + 1), *range(ord("A"), ord("Z") + 1)]] = 0
_BYTE_CLASS[ord("0") : ord("9") + 1] = 1
_BYTE_CLASS[[c for c in range(0x21, 0x7F) if not chr(c).isalnum()]] = 2
_BYTE_CLASS[[ord(c) for c in " \t\n\r\x0b\x0c"]] = 3
BYTE_CLASSES = ("letters", "digits", "punctuation", "whitespace", "other")
SUMMARY = ("budget_used", "log_coverage", "log_corpus", "staleness", "rejected_rate", "input_length")
FEATURES = (*SUMMARY, *(f"bytes_{name}" for name in BYTE_CLASSES),
            *(f"success_{schedule}_{base}" for schedule, base in ACTIONS))


class TestGenerationEnv(gym.Env[np.ndarray, np.int64]):
    """## Description

    Coverage-guided test-input generation for a real parser (`envs.agents.testgen.programs`: html.parser,
    urllib.parse, email, tomllib, http.cookies, markdown-it). An episode fuzzes one program of the `split`
    for `budget` executions. The corpus starts as the program's seed inputs; each step the agent chooses a
    mutation operator and whether to apply it to the *current* input (the last one that found new
    coverage) or to a random corpus entry; the mutant is executed once under an arc tracer. A mutant that
    reaches an arc no earlier execution reached joins the corpus and becomes the current input. Exceptions
    the program documents (e.g. `tomllib.TOMLDecodeError`) reject the input; any other exception is a
    crash, deduplicated by (exception type, innermost frame in the program's files).

    ## Action Space

    `Discrete(12)`: action = base * 4 + schedule, schedule in (uniform, bytes, tokens, blocks), base in
    (current, corpus, either) (`envs.agents.testgen.mutators.ACTIONS`). A schedule is a distribution over the
    operators flip_bit, interesting_byte, insert_printable, delete_chunk, duplicate_chunk, insert_token,
    overwrite_token and splice; `current` mutates the last input that found new coverage, `corpus` a random
    corpus entry, `either` one of the two at random, per execution. One step plays the action for
    `executions_per_step` executions (8 by default; the last step of an episode may be shorter). Tokens come
    from the program's auto-dictionary (short constants in its code); splice joins the base's head to another
    corpus entry's tail.

    ## Observation Space

    `Box(0, 1, (23,), float32)`, the same features for every program:

    | Index | Feature       | Meaning                                                                 |
    |-------|---------------|-------------------------------------------------------------------------|
    | 0     | budget_used   | executions so far / budget                                              |
    | 1     | log_coverage  | log1p(arcs covered) / log1p(100,000)                                    |
    | 2     | log_corpus    | log1p(corpus size) / log1p(10,000)                                      |
    | 3     | staleness     | log1p(executions since the last new coverage) / log1p(budget)           |
    | 4     | rejected_rate | recent share of executions the program rejected (a documented error)    |
    | 5     | input_length  | length of the current input / max_input_bytes                           |
    | 6-10  | bytes_*       | shares of letters, digits, punctuation, whitespace, other bytes in it   |
    | 11-22 | success_*     | per action, its recent rate of steps that found new coverage            |

    Recent rates are exponential moving averages with weight 0.1 for the newest execution (rejections) or
    step (success rates).

    ## Rewards

    `reward_scale` x the number of arcs the step's executions covered for the first time in the episode.
    The return is therefore `reward_scale` x (arcs at the end - arcs of the seeds): monotone (linear) in
    the coverage gained. The seeds' own coverage is the starting point and earns nothing.

    ## Starting State

    A program drawn uniformly from the split's list (seeded by `reset(seed=...)`, else `seed`; or
    `reset(options={"program": name})`), its seeds (cut to `max_input_bytes`) executed and in the corpus,
    the current input a random seed.

    ## Episode End

    Truncated after `budget` executions. Never terminated: there is always more to try.

    ## Arguments

    A `config` dict or keyword arguments (`TestGenerationConfig`): `train_programs`,
    `validation_programs`, `test_programs`, `split`, `budget`, `max_input_bytes`, `seed`, `reward_scale`
    (`eval_budget` and `eval_seeds` are read by the scorer).

    `info` carries `program`, `coverage` (arcs), `coverage_curve` (arcs after each of the step's executions),
    `new_arcs`, `corpus`, `crashes` (distinct so far), `outcome` (of the step's last execution: "accepted",
    "rejected" or "crash") and `executions`.

    ```python
    gymnasium.make("agents/TestGeneration-v0", config={"split": "test", "budget": 2000})
    ```
    """

    __test__ = False  # not a pytest test class
    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self.config: TestGenerationConfig = parse_config({**dict(config or {}), **kwargs})
        self.observation_space = spaces.Box(0.0, 1.0, shape=(len(FEATURES),), dtype=np.float32)
        self.action_space = spaces.Discrete(len(ACTIONS))
        self._seeded = False

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        if seed is None and not self._seeded:
            seed = self.config.seed  # the first reset without a seed uses env_config.seed: defaults reproduce
        self._seeded = True
        super().reset(seed=seed)
        names = self.config.programs()
        name = (options or {}).get("program") or names[int(self.np_random.integers(len(names)))]
        if name not in names:
            raise InputError(f"reset option 'program': {name!r} is not a {self.config.split} program "
                             f"(env_config.{self.config.split}_programs: {', '.join(names)})")
        self.program_name, self.harness = name, harness(name)
        self.harness.fresh()
        self.mutator = Mutator(self.harness.dictionary, self.config.max_input_bytes)
        self.findings = Findings(self.harness.files)
        self.coverage = CoverageMap()
        self.corpus: list[bytes] = []
        self.executions = 0
        self._since_new = 0
        self._success = np.zeros(len(ACTIONS))
        self._rejected = 0.0
        for seed_input in self.harness.program.seeds:
            seed_input = seed_input[: self.config.max_input_bytes]  # as libFuzzer's -max_len cuts its seeds
            self._execute(seed_input)
            self.corpus.append(seed_input)
        self._set_current(self.corpus[int(self.np_random.integers(len(self.corpus)))])
        return self._observation(), self._info(0, "accepted")

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        index = int(action)
        if not 0 <= index < len(ACTIONS):
            raise ValueError(f"action {action!r} is outside Discrete({len(ACTIONS)})")
        schedule, base = ACTIONS[index]
        probabilities, rng = SCHEDULE_PROBABILITIES[schedule], self.np_random
        executions = min(self.config.executions_per_step, self.config.budget - self.executions)
        found, curve, outcome = 0, [], "accepted"
        for _ in range(executions):
            from_current = base == "current" or (base == "either" and rng.random() < 0.5)
            data = self.current if from_current else self.corpus[int(rng.integers(len(self.corpus)))]
            other = self.corpus[int(rng.integers(len(self.corpus)))]
            candidate = self.mutator.mutate(int(rng.choice(len(OPERATORS), p=probabilities)), data, other, rng)
            new, outcome = self._execute(candidate)
            self.executions += 1
            self._rejected += EMA * ((outcome == "rejected") - self._rejected)
            if new:
                self.corpus.append(candidate)
                self._set_current(candidate)
                self._since_new = 0
            else:
                self._since_new += 1
            found += new
            curve.append(self.coverage.arcs)
        self._success[index] += EMA * ((found > 0) - self._success[index])
        truncated = self.executions >= self.config.budget
        info = {**self._info(found, outcome), "coverage_curve": curve}
        return self._observation(), self.config.reward_scale * found, False, truncated, info

    def _execute(self, data: bytes) -> tuple[int, str]:
        """Run one input: its new arcs (merged into the coverage) and its outcome (crashes recorded)."""
        execution, outcome = self.harness.execute(data)
        if outcome == "crash":
            self.findings.record(execution.error, data)
        return self.coverage.add(execution.arcs), outcome

    def _set_current(self, data: bytes) -> None:
        self.current = data
        counts = np.bincount(_BYTE_CLASS[np.frombuffer(data, dtype=np.uint8)], minlength=len(BYTE_CLASSES))
        self._byte_shares = counts / max(len(data), 1)

    def _observation(self) -> np.ndarray:
        budget = self.config.budget
        summary = (
            self.executions / budget,
            np.log1p(self.coverage.arcs) / np.log1p(MAX_ARCS),
            np.log1p(len(self.corpus)) / np.log1p(MAX_CORPUS),
            np.log1p(self._since_new) / np.log1p(budget),
            self._rejected,
            len(self.current) / self.config.max_input_bytes,
        )
        observation = np.concatenate([summary, self._byte_shares, self._success])
        return np.clip(observation, 0.0, 1.0).astype(np.float32)

    def _info(self, new: int, outcome: str) -> dict[str, Any]:
        return {"program": self.program_name, "coverage": self.coverage.arcs, "new_arcs": new,
                "corpus": len(self.corpus), "crashes": len(self.findings), "outcome": outcome,
                "executions": self.executions}
