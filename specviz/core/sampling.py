"""Logits -> probabilities, sampling and the residual; pure functions, randomness only from a torch.Generator.

Notation: ``p`` target distribution, ``q`` draft distribution, both warped by the same
`SamplingConfig`; residual = norm(max(p - q, 0)).
"""

from __future__ import annotations

import torch

from specviz.core.config import SamplingConfig


def warp(logits: torch.Tensor, cfg: SamplingConfig, temperature: float | None = None) -> torch.Tensor:
    """Warped probabilities over the last dim (fp32). `logits`: (..., V).

    At temperature 0 (greedy) the plain softmax is returned: the greedy decision is the
    argmax, and the softmax only serves as a display value and a tree-value estimate.
    """
    t = cfg.temperature if temperature is None else temperature
    x = logits.float()
    if t > 0:
        x = x / t
    if cfg.top_k and cfg.top_k < x.shape[-1]:
        kth = torch.topk(x, cfg.top_k, dim=-1).values[..., -1:]  # (..., 1)
        x = x.masked_fill(x < kth, float("-inf"))
    probs = torch.softmax(x, dim=-1)
    if cfg.top_p < 1.0:
        sorted_p, idx = torch.sort(probs, dim=-1, descending=True)
        drop = (sorted_p.cumsum(-1) - sorted_p) >= cfg.top_p  # keep the smallest prefix reaching top_p
        sorted_p = sorted_p.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter_(-1, idx, sorted_p)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def sample(probs: torch.Tensor, rng: torch.Generator) -> int:
    """One token id from a 1-D distribution."""
    return int(torch.multinomial(probs, 1, generator=rng))


def uniform(rng: torch.Generator) -> float:
    return float(torch.rand((), generator=rng, device=rng.device))


def residual(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm(max(p - q, 0)); falls back to p when rounding leaves no mass (p ~= q)."""
    r = torch.clamp(p - q, min=0.0)
    s = r.sum()
    return r / s if s > 1e-12 else p


def make_rng(seed: int, device: str | torch.device = "cpu") -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    return g
