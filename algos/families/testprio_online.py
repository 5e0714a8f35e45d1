"""Online, per-cycle learning of the pairwise test-prioritization agent (the papers' CI setting).

In CI the agent ranks a cycle's tests, the cycle runs, and its verdicts and durations are known before the
next cycle comes: the agent can learn from every cycle it ranked. `OnlineComparator` is the pairwise
execution agent's Q-network as a torch module, started cold or from an exported RLlib DQN (`NumpyPolicy`),
that plugs into `envs.agents.testprio.ranking.rank_pairwise` as a policy and takes a few gradient steps after
each cycle (`update`). `PeriodicRetrainer` is the baseline it is compared with: it ranks with a fixed model
and refits that model from its starting point on all cycles seen so far every `every` cycles.

Why a full-information update: the pairwise env is a contextual bandit whose reward is +1 for the action that
agrees with the optimal order (failing before passing; within a verdict, the shorter actual duration first)
and -1 for the other one. Once a cycle's verdicts and durations are in, the reward of BOTH actions is known
for every pair of its tests, not only of the action taken, so each pair gives a regression target for both
Q-values (Q(pair, 0) -> +1 and Q(pair, 1) -> -1 when the left test should run first, the reverse otherwise)
and there is nothing to explore: the update is supervised regression on the bandit's own reward.
"""
from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from torch import nn

from algos.export.numpy_policy import NumpyPolicy
from envs.errors import InputError

DEFAULT_LR = 1e-3
DEFAULT_PAIRS = 256
DEFAULT_STEPS = 4
# When a cycle has both verdicts, this share of the sampled pairs is (failing, passing), as the pairwise env's
# mixed_pair_fraction: failures are rare, and uniformly drawn pairs would be nearly all passing-passing.
DEFAULT_MIXED_FRACTION = 0.5
_ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "tanh": nn.Tanh, "silu": nn.SiLU}


class _QNet(nn.Module):
    """An MLP encoder and either dueling heads (`af` advantages, `vf` value) or one `q` head, combined as
    `NumpyPolicy.outputs` combines them for a DQN: Q = (A - mean(A)) + V, or the `q` head's output."""

    def __init__(self, encoder: nn.Sequential, heads: dict[str, nn.Sequential]) -> None:
        super().__init__()
        self.encoder = encoder
        self.heads = nn.ModuleDict(heads)
        self.dueling = "vf" in heads

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        latent = self.encoder(observations)
        if self.dueling:
            advantages = self.heads["af"](latent)
            return (advantages - advantages.mean(dim=1, keepdim=True)) + self.heads["vf"](latent)
        return self.heads["q"](latent)


class OnlineComparator:
    """A pairwise comparator (action 0 = the left test runs first) that learns after every CI cycle.

    Build it with `from_policy` (a copy of an exported DQN) or `cold` (fresh weights). Calling it gives the
    greedy actions for `rank_pairwise`; `update` learns from one finished cycle with `steps` Adam steps on
    `pairs` sampled pairs of its tests; `copy` forks it (weights and optimizer state)."""

    def __init__(self, net: nn.Module, lr: float = DEFAULT_LR, pairs: int = DEFAULT_PAIRS,
                 steps: int = DEFAULT_STEPS, mixed_fraction: float = DEFAULT_MIXED_FRACTION) -> None:
        """Use `from_policy` or `cold`: `net` maps (n, 2d) float32 observations to (n, 2) Q-values."""
        if pairs < 1 or steps < 1 or not 0.0 <= mixed_fraction <= 1.0 or lr <= 0.0:
            raise InputError(f"online comparator: pairs {pairs} and steps {steps} must be >= 1, lr {lr} > 0 "
                             f"and mixed_fraction {mixed_fraction} within [0, 1]")
        self.net = net
        self.lr = lr
        self.pairs = pairs
        self.steps = steps
        self.mixed_fraction = mixed_fraction
        self.optimizer = torch.optim.Adam(net.parameters(), lr=lr)

    @classmethod
    def from_policy(cls, policy: NumpyPolicy, lr: float = DEFAULT_LR, pairs: int = DEFAULT_PAIRS,
                    steps: int = DEFAULT_STEPS,
                    mixed_fraction: float = DEFAULT_MIXED_FRACTION) -> OnlineComparator:
        """A trainable torch copy of an exported pairwise DQN: the same layers, activations and dueling
        combination as `NumpyPolicy.outputs`, so it starts with the same greedy actions (the cross-project or
        offline-trained start). InputError (one line) for a non-DQN policy, one without 2 actions, or an op
        this copy does not build. Its weights are the policy's, so unlike `cold` it needs no seed."""
        if policy.algorithm != "dqn":
            raise InputError(f"online comparator: a {policy.algorithm.upper()} policy cannot be copied; "
                             "only a pairwise DQN's Q-network (algorithm 'dqn') can be learned online")
        if policy.num_actions != 2:
            raise InputError(f"online comparator: the DQN has {policy.num_actions} actions, not the pairwise "
                             "env's 2 (left first, right first)")
        arrays, nets = policy.to_arrays(), policy.structure["nets"]
        encoder, latent = _build_net("encoder", nets["encoder"], arrays, policy.observation_size)
        heads = {name: _build_net(name, ops, arrays, latent)[0]
                 for name, ops in nets.items() if name != "encoder"}
        return cls(_QNet(encoder, heads), lr=lr, pairs=pairs, steps=steps, mixed_fraction=mixed_fraction)

    @classmethod
    def cold(cls, observation_size: int, hidden: tuple[int, ...] = (128, 128), lr: float = DEFAULT_LR,
             seed: int = 0, pairs: int = DEFAULT_PAIRS, steps: int = DEFAULT_STEPS,
             mixed_fraction: float = DEFAULT_MIXED_FRACTION) -> OnlineComparator:
        """The cold start: the architecture RLlib's DQN builds for the pairwise env (MLP encoder, here ReLU,
        dueling linear heads) with torch's default init, seeded by `seed` without touching torch's global
        generator (so a caller's own seeded draws are not shifted)."""
        if observation_size < 1 or not all(width >= 1 for width in hidden):
            raise InputError(f"online comparator: observation_size {observation_size} and hidden {hidden} "
                             "must be positive")
        layers: list[nn.Module] = []
        width = observation_size
        for out in hidden:
            layers += [nn.Linear(width, out), nn.ReLU()]
            width = out
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            net = _QNet(nn.Sequential(*layers),
                        {"af": nn.Sequential(nn.Linear(width, 2)), "vf": nn.Sequential(nn.Linear(width, 1))})
        return cls(net, lr=lr, pairs=pairs, steps=steps, mixed_fraction=mixed_fraction)

    def copy(self) -> OnlineComparator:
        """An independent fork: the same weights, hyperparameters and Adam state, so it learns as this one
        would. The optimizer's state dict is deep-copied: Adam's load_state_dict keeps same-dtype tensors as
        they are, so the fork would otherwise update this one's moment estimates in place."""
        forked = OnlineComparator(copy.deepcopy(self.net), lr=self.lr, pairs=self.pairs, steps=self.steps,
                                  mixed_fraction=self.mixed_fraction)
        forked.optimizer.load_state_dict(copy.deepcopy(self.optimizer.state_dict()))
        return forked

    def q_values(self, observations: np.ndarray) -> np.ndarray:
        """Q-values, float32 (n, 2), without gradients: what the greedy action is the argmax of."""
        batch = torch.as_tensor(np.ascontiguousarray(observations, dtype=np.float32))
        with torch.no_grad():
            return self.net(batch).numpy()

    def __call__(self, observations: np.ndarray) -> np.ndarray:
        """Greedy actions, (n,) int64: argmax Q, the first (action 0, left first) on a tie, as NumpyPolicy."""
        return self.q_values(observations).argmax(axis=1).astype(np.int64)

    def update(self, features: np.ndarray, verdicts: np.ndarray, durations: np.ndarray,
               rng: np.random.Generator) -> None:
        """Learn from one finished cycle: `features` (n, d) its tests' rows, `verdicts` (n,) True = failed,
        `durations` (n,) actual durations. A no-op for a cycle with fewer than 2 tests or only ties.

        Each sampled pair is shown in both orders, with mirrored targets: rank_pairwise asks every pair in
        both presentations (a split vote is a tie), and learning both keeps the comparator antisymmetric
        instead of teaching it a position bias from the sample's sides (the mixed pairs are drawn failing
        test left, so that presentation alone would teach "left first")."""
        batch = _pair_batch(features, verdicts, durations, self.pairs, self.mixed_fraction, rng)
        if batch is None:
            return
        observations, targets = batch
        for _ in range(self.steps):
            self.optimizer.zero_grad()
            loss = nn.functional.mse_loss(self.net(observations), targets)
            loss.backward()
            self.optimizer.step()


class PeriodicRetrainer:
    """The baseline of online learning: batch retraining every `every` cycles.

    It keeps every finished cycle and, at each multiple of `every` cycles, refits a fresh fork of its starting
    model (the comparator it was given, as it was then) on all of them: `epochs` passes, each pass one
    `update` per stored cycle in a shuffled order. Between refits it ranks with the last fitted model (the
    starting model before the first refit), so it is what a team that retrains on a schedule would deploy.
    Same `__call__` and `update` as `OnlineComparator`, so an evaluation loop takes either."""

    def __init__(self, start: OnlineComparator, every: int = 30, epochs: int = 3) -> None:
        if every < 1 or epochs < 1:
            raise InputError(f"periodic retrainer: every {every} and epochs {epochs} must be >= 1")
        self.start = start.copy()  # a fork: the caller may go on updating its own comparator
        self.model = start.copy()
        self.every = every
        self.epochs = epochs
        self.refits = 0
        self._cycles: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def __call__(self, observations: np.ndarray) -> np.ndarray:
        """The last fitted model's greedy actions."""
        return self.model(observations)

    def update(self, features: np.ndarray, verdicts: np.ndarray, durations: np.ndarray,
               rng: np.random.Generator) -> None:
        """Store one finished cycle (copies: the caller may reuse its arrays); refit when the number of
        stored cycles is a multiple of `every`."""
        self._cycles.append((np.array(features, dtype=np.float32), np.array(verdicts, dtype=bool),
                             np.array(durations, dtype=np.float64)))
        if len(self._cycles) % self.every == 0:
            self._refit(rng)

    def _refit(self, rng: np.random.Generator) -> None:
        model = self.start.copy()
        for _ in range(self.epochs):
            for index in rng.permutation(len(self._cycles)):
                model.update(*self._cycles[index], rng)
        self.model = model
        self.refits += 1


def _build_net(name: str, ops: list[dict[str, Any]], arrays: dict[str, np.ndarray],
               width: int) -> tuple[nn.Sequential, int]:
    """One exported net (`Algorithm.export_numpy`'s ops) taking rows of `width` as a torch Sequential with copies of
    its parameters, and the width of its output."""
    layers: list[nn.Module] = []
    for index, op in enumerate(ops):
        kind = op["op"]
        weight_key, bias_key = op.get("weight"), op.get("bias")
        if kind == "linear":
            out, width = arrays[weight_key].shape
            layer: nn.Module = nn.Linear(width, out, bias=bias_key is not None)
            width = out
        elif kind == "layernorm":  # a missing scale is 1 (torch's init), a missing shift is none
            layer = nn.LayerNorm(width, eps=float(op["eps"]), bias=bias_key is not None,
                                 elementwise_affine=weight_key is not None or bias_key is not None)
        elif kind in _ACTIVATIONS:
            layer = _ACTIVATIONS[kind]()
        elif kind == "elu":
            layer = nn.ELU(alpha=float(op.get("alpha", 1.0)))
        else:
            raise InputError(f"online comparator: {name} op {index} ({kind}) has no torch layer here; it "
                             f"builds linear, layernorm, elu and {', '.join(_ACTIVATIONS)}")
        with torch.no_grad():  # copies: the policy keeps its own arrays
            if weight_key is not None:
                layer.weight.copy_(torch.from_numpy(arrays[weight_key]))
            if bias_key is not None:
                layer.bias.copy_(torch.from_numpy(arrays[bias_key]))
        layers.append(layer)
    return nn.Sequential(*layers), width


def _pair_batch(features: np.ndarray, verdicts: np.ndarray, durations: np.ndarray, count: int,
                mixed_fraction: float, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Observations (2k, 2d) and Q targets (2k, 2) of k <= `count` sampled pairs of one cycle's tests, each in
    both orders, or None when there is nothing to learn (fewer than 2 tests, or every drawn pair ties).

    Pairs are drawn as the pairwise env draws them (distinct tests uniformly, a `mixed_fraction` share as
    (failing, passing) when the cycle has both verdicts); tied pairs (same verdict and duration) are dropped:
    their reward is 0 for both actions, so they say nothing about which test should run first."""
    failed = np.asarray(verdicts, dtype=bool)
    n = failed.size
    if n < 2:
        return None
    left = rng.integers(n, size=count)
    right = (left + rng.integers(1, n, size=count)) % n
    failing, passing = np.flatnonzero(failed), np.flatnonzero(~failed)
    if failing.size and passing.size:
        mixed = rng.random(count) < mixed_fraction
        left = np.where(mixed, rng.choice(failing, size=count), left)
        right = np.where(mixed, rng.choice(passing, size=count), right)
    actual = np.asarray(durations, dtype=np.float64)
    # +1 when the left test comes first in the optimal order, -1 when the right one does, 0 on a tie.
    verdict_gap = failed[left].astype(np.int64) - failed[right].astype(np.int64)
    shorter_left = np.sign(actual[right] - actual[left]).astype(np.int64)
    left_first = np.where(verdict_gap != 0, verdict_gap, shorter_left)
    keep = left_first != 0
    if not keep.any():
        return None
    left, right, left_first = left[keep], right[keep], left_first[keep]
    rows = np.asarray(features, dtype=np.float32)
    # The pairwise observation is the left row's features, then the right row's (the env's and the ranker's layout).
    observations = np.concatenate([np.concatenate([rows[left], rows[right]], axis=1),
                                   np.concatenate([rows[right], rows[left]], axis=1)])
    target = np.concatenate([left_first, -left_first]).astype(np.float32)
    return torch.from_numpy(observations), torch.from_numpy(np.stack([target, -target], axis=1))


# Fine-tuning a trained comparator takes smaller steps than learning from a cold start: its weights already rank
# well, and a few noisy cycles should not undo what many projects taught it.
WARM_LR = 3e-4


def online_learners(policy: NumpyPolicy) -> dict[str, Any]:
    """The online strategies experiments.transfer scores next to the zero-shot policy, by name: the policy updated
    after every cycle, the same network started cold, and periodic retraining of a cold start on every cycle seen so
    far (what a team that trains its own model on a schedule deploys). Each value makes a fresh learner."""
    size = policy.observation_size
    return {
        "online (from the cross-project model)": lambda: OnlineComparator.from_policy(policy, lr=WARM_LR),
        "online (cold start)": lambda: OnlineComparator.cold(size),
        "periodic retraining": lambda: PeriodicRetrainer(OnlineComparator.cold(size)),
    }
