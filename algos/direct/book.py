"""The portfolio book in torch: the rebalance's remainder factor mu and the score-to-weight map, differentiable.

Both equal their numpy originals (envs/portfolio/book.py, envs/portfolio/weights.py) to rounding in float64
(tests/unit/test_direct_book.py: 1e-12), so the direct learner climbs the growth the env pays out.

The gradient through mu. mu is the root of g(mu) = mu - 1 + c sum_i |w_i - mu w'_i| (assets only), piecewise linear
in mu. On the piece that holds the root, with s_i = sign(w_i - mu w'_i),

    mu = (1 - c s.w) / (1 - c s.w')

exactly. So the root is found without gradient (the sorted-kinks solve of book.py, batched), the signs are read at
it, and mu is recomputed by that formula with autograd: its gradient is the implicit-function gradient of the fixed
point (on each linear piece the formula is the root), with no iteration to unroll. At a kink (some w_i = mu w'_i) the
function has a corner and this is one of its one-sided derivatives. tests/unit/test_direct_book.py checks it against
central finite differences to 1e-6 on random weight pairs, long-only and long-short.
"""
from __future__ import annotations

import torch


def remainder_factor(held: torch.Tensor, target: torch.Tensor, cost_rate: float) -> torch.Tensor:
    """mu (...) of rebalances from `held` to `target` weights (..., N+1), cash first, each summing to 1; differentiable
    in both. c * sum_i |w'_i| must stay below 1 (PortfolioConfig refuses costs that break it)."""
    held_assets, target_assets = held[..., 1:], target[..., 1:]
    if cost_rate == 0.0:
        return torch.ones_like(held[..., 0])
    with torch.no_grad():
        root = _root_on_sorted_pieces(held_assets, target_assets, cost_rate)
        signs = torch.sign(held_assets - root.unsqueeze(-1) * target_assets)
    return (1.0 - cost_rate * (signs * held_assets).sum(-1)) / (1.0 - cost_rate * (signs * target_assets).sum(-1))


def _root_on_sorted_pieces(held_assets: torch.Tensor, target_assets: torch.Tensor, cost_rate: float) -> torch.Tensor:
    """envs.portfolio.book.root_on_sorted_pieces over a batch (the same sums in the same order)."""
    held_only = target_assets == 0.0
    kinks = torch.where(held_only, torch.full_like(held_assets, float("inf")),
                        held_assets / torch.where(held_only, torch.ones_like(target_assets), target_assets))
    offsets = torch.where(held_only, held_assets.abs(), torch.sign(target_assets) * held_assets)
    order = torch.argsort(kinks, dim=-1, stable=True)
    kinks = kinks.gather(-1, order)
    slope_left = target_assets.abs().gather(-1, order).cumsum(-1)
    offset_left = offsets.gather(-1, order).cumsum(-1)
    slope_all, offset_all = slope_left[..., -1:], offset_left[..., -1:]
    at_kinks = (1.0 + cost_rate * (2.0 * slope_left - slope_all)) * kinks - 1.0 + cost_rate * (
        offset_all - 2.0 * offset_left)
    left = (at_kinks <= 0.0).sum(-1, keepdim=True)
    index = (left - 1).clamp(min=0)
    some = left > 0
    left_slope = torch.where(some, slope_left.gather(-1, index), torch.zeros_like(index, dtype=held_assets.dtype))
    left_offset = torch.where(some, offset_left.gather(-1, index), torch.zeros_like(index, dtype=held_assets.dtype))
    root = (1.0 - cost_rate * (offset_all - 2.0 * left_offset)) / (1.0 + cost_rate * (2.0 * left_slope - slope_all))
    return root.squeeze(-1)


def scores_to_weights(scores: torch.Tensor, tradable: torch.Tensor, rule: str, kappa: float,
                      gross_cap: float = 1.0) -> torch.Tensor:
    """envs.portfolio.weights.scores_to_weights in torch: weights (..., N+1), cash first, from scores (..., N+1)
    (clipped to [-1, 1], as the env clips); `tradable` (..., N) bool masks the assets."""
    scores = scores.clamp(-1.0, 1.0)
    if rule == "long_only":
        logits = kappa * scores
        masked = torch.cat([logits[..., :1], logits[..., 1:].masked_fill(~tradable, float("-inf"))], dim=-1)
        return torch.softmax(masked, dim=-1)
    signed = torch.where(tradable, torch.tanh(kappa * scores[..., 1:]), torch.zeros_like(scores[..., 1:]))
    gross = signed.abs().sum(-1, keepdim=True)
    signed = signed * torch.clamp(gross_cap / torch.where(gross > 0.0, gross, torch.ones_like(gross)), max=1.0)
    return torch.cat([1.0 - signed.sum(-1, keepdim=True), signed], dim=-1)
