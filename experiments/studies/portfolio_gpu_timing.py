"""The per-asset network's update at N = 500: one PPO minibatch against one direct-learner mini-batch, same run.

PPO's side needs torch and numpy only (a GPU box may have torch and no Ray; the device machines of this project do):
it rebuilds the shape of algos/networks/portfolio_module.py's PPO module in plain torch. A per-asset MLP (`--hiddens`,
default [64, 64]) reads each asset's row (window 24 x 5 features + weight + tradable = 122 numbers) and gives its mean
and log-std, two parameters give cash's, and a per-asset value MLP of the same widths is mean-pooled over the assets.
One update is a PPO-style loss (Gaussian log-probability ratio, clipped, plus the value loss) on a batch of B
observations, its backward pass and an Adam step: what one minibatch update costs.

The direct learner's side (`--direct-batch`, default 64; 0 skips it) is its own code: a synthetic universe of N
assets (`trading/Portfolio-v0`, source synthetic, the same row of 122), the shared-weights `PolicyNet` of
algos/networks/portfolio_module.py with the same widths (the policy only: the direct learner fits no value net), and one
update is `PortfolioProblem.step` on a mini-batch of consecutive decisions (the observations at the memory's held
weights, the forward pass, the log growth through the exact cost), its backward pass and an Adam step: what the
learner runs per gradient step (algos/direct/learner.py). It imports Ray (the module's file does), so without Ray
it is skipped with the reason.

The two updates alternate (PPO, direct, PPO, ...) after two warm-ups each, so both see the same load; the table gives
each one's median, fastest and slowest, and the ratio of the medians (direct / PPO at the first PPO batch).
`python -m experiments.studies.portfolio_gpu_timing [--device cuda] [--assets 500] [--batch 256 4000]
[--direct-batch 64] [--hiddens 64 64] [--repeats 10]`. docs/portfolio.md, "One model for 500 coins", has its CPU and
GPU figures side by side; docs/learning.md the direct learner's.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from experiments.shell import exit_code

WINDOW, FEATURES = 24, 5  # the env's default window and feature list (envs/portfolio/config.py)
ROW = WINDOW * FEATURES + 2
PPO_NAME, DIRECT_NAME = "PPO minibatch", "direct mini-batch"


def mlp(inputs: int, hiddens: list[int], outputs: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    for size in hiddens:
        layers += [nn.Linear(inputs, size), nn.ReLU()]
        inputs = size
    return nn.Sequential(*layers, nn.Linear(inputs, outputs))


class SharedAssets(nn.Module):
    """Policy and value of the platform's shared_assets module, without RLlib."""

    def __init__(self, hiddens: list[int]) -> None:
        super().__init__()
        self.pi, self.vf = mlp(ROW, hiddens, 2), mlp(ROW, hiddens, 1)
        self.cash = nn.Parameter(torch.zeros(2))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        out = self.pi(obs)                                   # (B, N, 2)
        cash = self.cash.expand(obs.shape[0], 1, 2)
        both = torch.cat([cash, out], dim=1)                 # (B, N+1, 2)
        return both[..., 0], both[..., 1].clamp(-5, 2), self.vf(obs).squeeze(-1).mean(dim=1)


def ppo_update(device: str, assets: int, batch: int, hiddens: list[int]) -> Callable[[], None]:
    """One PPO-style minibatch update of B observations of N assets, ready to call."""
    torch.manual_seed(0)
    model = SharedAssets(hiddens).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
    rng = np.random.default_rng(0)
    obs = torch.as_tensor(rng.standard_normal((batch, assets, ROW), dtype=np.float32), device=device)
    actions = torch.as_tensor(rng.uniform(-1, 1, (batch, assets + 1)).astype(np.float32), device=device)
    old_logp = torch.zeros(batch, device=device)
    advantages = torch.as_tensor(rng.standard_normal(batch, dtype=np.float32), device=device)
    targets = torch.as_tensor(rng.standard_normal(batch, dtype=np.float32), device=device)

    def update() -> None:
        mean, log_std, value = model(obs)
        logp = torch.distributions.Normal(mean, log_std.exp()).log_prob(actions).sum(dim=1)
        ratio = (logp - old_logp).exp()
        policy_loss = -torch.min(ratio * advantages, ratio.clamp(0.8, 1.2) * advantages).mean()
        loss = policy_loss + 0.5 * ((value - targets) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return update


class PolicyModule(nn.Module):
    """What PortfolioProblem.step reads of an RLModule: `forward_train(batch)` with the Gaussian's inputs."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward_train(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        return {"action_dist_inputs": self.net(batch["obs"])}


def direct_env_config(assets: int, batch: int) -> dict[str, Any]:
    """A synthetic universe of `assets` whose train part holds a few times `batch` daily decisions (hourly bars)."""
    return {"source": "synthetic", "synthetic_assets": assets, "synthetic_bars": max(2_000, 24 * 4 * batch),
            "synthetic_seed": 0, "timeframe": "1h", "window": WINDOW, "decision_interval": 24,
            "fee_bps": 10, "slippage_bps": 0, "weights": "long_only", "kappa": 5}


def direct_update(device: str, assets: int, batch: int, hiddens: list[int]) -> Callable[[], None]:
    """One update of the direct learner on a mini-batch of `batch` consecutive decisions, ready to call."""
    import envs
    from algos.direct.portfolio import PortfolioProblem
    from algos.networks.portfolio_module import PolicyNet, Universe

    env = envs.make_env("trading/Portfolio-v0", direct_env_config(assets, batch)).unwrapped
    rows, width = env.observation_space.shape
    torch.manual_seed(0)
    module = PolicyModule(PolicyNet(Universe(rows, width), hiddens, "relu", shared=True)).to(device)
    optimizer = torch.optim.Adam(module.parameters(), lr=1e-3)
    problem = PortfolioProblem(env, batch, "uniform", 0.005, seed=0, device=device)

    def update() -> None:
        loss, _ = problem.step(module)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return update


def time_interleaved(updates: dict[str, Callable[[], None]], device: str, repeats: int) -> dict[str, list[float]]:
    """Milliseconds of each of `repeats` calls of every update, taken in turn after two warm-ups each."""
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    times: dict[str, list[float]] = {name: [] for name in updates}
    for i in range(repeats + 2):
        for name, update in updates.items():
            sync()
            start = time.perf_counter()
            update()
            sync()
            if i >= 2:
                times[name].append(1000 * (time.perf_counter() - start))
    return times


def main(argv: list[str] | None = None) -> int:
    return exit_code(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--assets", type=int, default=500)
    parser.add_argument("--batch", type=int, nargs="+", default=[256, 4000],
                        help="PPO minibatch sizes (observations); the first is the direct update's peer")
    parser.add_argument("--direct-batch", type=int, default=64,
                        help="consecutive decisions in the direct learner's mini-batch; 0: skip it")
    parser.add_argument("--hiddens", type=int, nargs="+", default=[64, 64], help="hidden widths of every per-asset net")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args(argv)
    name = torch.cuda.get_device_name() if args.device == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(f"device: {name}; torch {torch.__version__}; N = {args.assets}, row {ROW}, hiddens {args.hiddens}; "
          f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| update | batch | median ms | min ms | max ms |")
    peer, direct = f"{PPO_NAME} {args.batch[0]}", f"{DIRECT_NAME} {args.direct_batch}"
    updates = {peer: ppo_update(args.device, args.assets, args.batch[0], args.hiddens)}
    skipped = ""
    if args.direct_batch:
        try:
            updates[direct] = direct_update(args.device, args.assets, args.direct_batch, args.hiddens)
        except ImportError as error:  # a torch-only box: PPO's figures still come
            skipped = f"{DIRECT_NAME}: skipped ({error}; it needs the project's full install)"
    times = time_interleaved(updates, args.device, args.repeats)
    for batch in args.batch[1:]:
        times[f"{PPO_NAME} {batch}"] = time_interleaved(
            {"ppo": ppo_update(args.device, args.assets, batch, args.hiddens)}, args.device, args.repeats)["ppo"]
    for label, samples in times.items():
        what, batch = label.rsplit(" ", 1)
        print(f"| {what} | {batch} | {statistics.median(samples):.2f} | {min(samples):.2f} | {max(samples):.2f} |")
    if direct in times:
        ratio = statistics.median(times[direct]) / statistics.median(times[peer])
        pairs = sorted(d / p for d, p in zip(times[direct], times[peer], strict=True))
        print(f"direct / PPO: {ratio:.3f} (median {DIRECT_NAME} of {args.direct_batch} decisions over median "
              f"{PPO_NAME} of {args.batch[0]} observations, {args.repeats} alternating repeats); each pair's ratio "
              f"{pairs[0]:.3f} to {pairs[-1]:.3f}, quartiles {_quartiles(pairs)}")
    if skipped:
        print(skipped)
    return 0


def _quartiles(values: list[float]) -> str:
    if len(values) < 2:
        return "-"
    low, _, high = statistics.quantiles(values, n=4)
    return f"{low:.3f} / {high:.3f}"


if __name__ == "__main__":
    raise SystemExit(main())
