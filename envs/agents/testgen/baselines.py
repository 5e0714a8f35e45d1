"""Non-learning schedulers every agent is compared with, on the same env and the same budget.

Both choose among the same actions (operator x base) of the same environment, so a difference in
coverage is a difference in scheduling only. `random` is the floor: a mutational fuzzer that picks its
operator uniformly, as AFL's havoc stage does. `greedy` is a bandit: it keeps each action's observed rate
of finding new coverage and plays the best, which is what an adaptive scheduler (e.g. MOpt) does
without learning across programs.
"""
from __future__ import annotations

from typing import Callable, Protocol

import numpy as np

from envs.baselines import Baseline, baseline_table


class Strategy(Protocol):
    """Chooses the next action from an observation and hears back how it went."""

    def act(self, observation: np.ndarray) -> int: ...

    def observe(self, action: int, new_arcs: int) -> None: ...


class RandomStrategy:
    """Every action with equal probability."""

    def __init__(self, n_actions: int, seed: int) -> None:
        self.n_actions = n_actions
        self.rng = np.random.default_rng(seed)

    def act(self, observation: np.ndarray) -> int:
        return int(self.rng.integers(self.n_actions))

    def observe(self, action: int, new_arcs: int) -> None:
        """Random ignores outcomes."""


class GreedyStrategy:
    """The action with the best observed rate of finding new coverage (epsilon-greedy, optimistic start).

    Each action starts as if it had found coverage once in one try, so every action is tried before any
    is written off; ties go to a random one of the best; with probability `epsilon` a uniform action
    keeps the rates of the others current as coverage saturates."""

    def __init__(self, n_actions: int, seed: int, epsilon: float = 0.05) -> None:
        self.rng = np.random.default_rng(seed)
        self.epsilon = epsilon
        self.successes = np.ones(n_actions)
        self.trials = np.ones(n_actions)

    def act(self, observation: np.ndarray) -> int:
        if self.rng.random() < self.epsilon:
            return int(self.rng.integers(self.trials.size))
        rates = self.successes / self.trials
        return int(self.rng.choice(np.flatnonzero(rates == rates.max())))

    def observe(self, action: int, new_arcs: int) -> None:
        self.trials[action] += 1
        self.successes[action] += new_arcs > 0


# The family's signature: (number of actions, seed) -> a Strategy, played through the scoring env like the agent.
# Atheris, the reference fuzzer, runs in its own process with its own scheduler and is reported beside these.
BASELINES: tuple[Baseline[Callable[[int, int], Strategy]], ...] = baseline_table(
    Baseline("random", RandomStrategy, "uniform operator choice, as AFL's havoc stage: the floor"),
    Baseline("greedy", GreedyStrategy, "a bandit over the same actions, as adaptive schedulers such as MOpt"),
)
