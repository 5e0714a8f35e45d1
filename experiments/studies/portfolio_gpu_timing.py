"""The per-asset network's forward and backward pass at N = 500, timed with torch and numpy only.

A GPU box may have torch and no Ray (the device machines of this project do), so this script rebuilds the shape of
algos/portfolio_module.py's PPO module in plain torch: a per-asset MLP [64, 64] reads each asset's row (window 24 x
5 features + weight + tradable = 122 numbers) and gives its mean and log-std, two parameters give cash's, and a
per-asset value MLP is mean-pooled over the assets. One step is a PPO-style loss (Gaussian log-probability ratio,
clipped, plus the value loss) on a batch of B observations, its backward pass and an Adam step: what one minibatch
update costs. `python -m experiments.studies.portfolio_gpu_timing [--device cuda] [--assets 500] [--batch 256]`.
docs/portfolio.md, "One model for 500 coins", has its CPU and GPU figures side by side.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from torch import nn

from experiments.shell import exit_code

ROW = 24 * 5 + 2


def mlp(inputs: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inputs, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, outputs))


class SharedAssets(nn.Module):
    """Policy and value of the platform's shared_assets module, without RLlib."""

    def __init__(self) -> None:
        super().__init__()
        self.pi, self.vf = mlp(ROW, 2), mlp(ROW, 1)
        self.cash = nn.Parameter(torch.zeros(2))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        out = self.pi(obs)                                   # (B, N, 2)
        cash = self.cash.expand(obs.shape[0], 1, 2)
        both = torch.cat([cash, out], dim=1)                 # (B, N+1, 2)
        return both[..., 0], both[..., 1].clamp(-5, 2), self.vf(obs).squeeze(-1).mean(dim=1)


def time_updates(device: str, assets: int, batch: int, repeats: int) -> list[float]:
    """Milliseconds of each of `repeats` updates after two warm-ups."""
    torch.manual_seed(0)
    model = SharedAssets().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
    rng = np.random.default_rng(0)
    obs = torch.as_tensor(rng.standard_normal((batch, assets, ROW), dtype=np.float32), device=device)
    actions = torch.as_tensor(rng.uniform(-1, 1, (batch, assets + 1)).astype(np.float32), device=device)
    old_logp = torch.zeros(batch, device=device)
    advantages = torch.as_tensor(rng.standard_normal(batch, dtype=np.float32), device=device)
    targets = torch.as_tensor(rng.standard_normal(batch, dtype=np.float32), device=device)
    times = []
    for i in range(repeats + 2):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        mean, log_std, value = model(obs)
        logp = torch.distributions.Normal(mean, log_std.exp()).log_prob(actions).sum(dim=1)
        ratio = (logp - old_logp).exp()
        policy_loss = -torch.min(ratio * advantages, ratio.clamp(0.8, 1.2) * advantages).mean()
        loss = policy_loss + 0.5 * ((value - targets) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if device == "cuda":
            torch.cuda.synchronize()
        if i >= 2:
            times.append(1000 * (time.perf_counter() - start))
    return times


def main(argv: list[str] | None = None) -> int:
    return exit_code(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--assets", type=int, default=500)
    parser.add_argument("--batch", type=int, nargs="+", default=[256, 4000])
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args(argv)
    name = torch.cuda.get_device_name() if args.device == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(f"device: {name}; torch {torch.__version__}; N = {args.assets}, row {ROW}")
    print("| batch | median ms | min ms |")
    for batch in args.batch:
        times = sorted(time_updates(args.device, args.assets, batch, args.repeats))
        print(f"| {batch} | {times[len(times) // 2]:.2f} | {times[0]:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
