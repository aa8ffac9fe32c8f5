"""Batch-invariant attention for a target's few-query forwards (decode steps, verifies, trees): `rows_attention`.

kernels.py registers it as the attention of a bf16 target (`kernels.invariant_attention`) and says why.
"""
from __future__ import annotations

import numpy as np
import torch

from . import rowkernel

ROWS_MAX_QUERIES = 64                         # wider forwards (prefills) keep the fused kernel


def _heads_as_rows(t: torch.Tensor) -> torch.Tensor:
    """(1, H, L, d) keys or values -> (H cap, d) fp32 rows, head h in rows h cap .. h cap + L - 1: the cache's own
    buffer where it is fp32 with contiguous rows (`kvcache` views hold cap >= L rows a head), else a copy (cap = L)."""
    _, H, L, d = t.shape
    if t.dtype == torch.float32 and t.stride(3) == 1 and t.stride(2) == d and t.stride(1) % d == 0 and t.stride(1) >= L * d:
        cap = t.stride(1) // d
        if t.storage_offset() + H * cap * d <= t.untyped_storage().nbytes() // 4:
            return t.as_strided((H * cap, d), (d, 1))
    return t[0].float().contiguous().view(H * L, d)


def _allowed(module, mask, n: int, L: int, kwargs: dict) -> torch.Tensor | None:
    """(n, L) bool: the keys each query may see; None where the mask says more than that (an additive bias, a
    soft cap, a sliding window) or the layer is not causal, which `rows_attention` leaves to the fused kernel."""
    if kwargs.get("softcap") or kwargs.get("sliding_window") or kwargs.get("s_aux") is not None:
        return None
    if mask is None:                                                            # causal, bottom-right aligned
        return torch.ones(n, L, dtype=torch.bool).tril(L - n) if getattr(module, "is_causal", True) else None
    if mask.ndim != 4 or mask.shape[0] != 1:
        return None
    m = mask[0, 0, :, :L]                                                       # (n, L): bool or additive
    if m.dtype == torch.bool:
        return m
    blocked = m <= torch.finfo(m.dtype).min / 2
    return ~blocked if bool(((m == 0) | blocked).all()) else None


def rows_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, is_causal=None,
                   **kwargs):
    """`sdpa_gqa`'s attention, batch-invariant for up to ROWS_MAX_QUERIES queries: a query's output is bitwise the
    same whether it runs alone (a decode step) or among others (a verify forward, a tree).

    PyTorch's fused kernel is not (a query among 4 differs from the same query alone by 4e-7 in fp32 and by one
    bf16 step, 1e-3, in bf16: measured 2026-12-02), and in bf16 that was enough to flip greedy tokens on most
    prompts. Here every (head, query) pair runs on its own in the row kernel's module (`_rowkernel_ir.attend`):
    the scores are the row kernel's dot products, and the softmax and the weighted sum of values run in plain
    order over the keys the query may see, so neither the other queries nor the keys it cannot see (masked, or
    past its own position in a wider forward) change a bit of its output. fp32 inside, rounded once to the
    model's dtype; wider forwards (prefills), a batch of several sequences and autograd keep `sdpa_gqa`."""
    B, Hq, n, d = query.shape
    L = key.shape[-2]
    fits = B == 1 and n <= ROWS_MAX_QUERIES and not dropout and not query.requires_grad and rowkernel.enabled()
    allow = _allowed(module, attention_mask, n, L, kwargs) if fits else None       # (a prefill builds no mask)
    if allow is None:
        from .kernels import sdpa_gqa
        return sdpa_gqa(module, query, key, value, attention_mask, dropout, scaling, is_causal, **kwargs)
    k, v = (_heads_as_rows(t) for t in (key, value))                              # (Hkv cap, d), cap rows a head
    out = torch.empty(Hq, n, d)
    from ._rowkernel_ir import attend
    scale = np.float32(d ** -0.5 if scaling is None else scaling)
    attend(query[0].float().contiguous().numpy(), k.numpy(), v.numpy(), len(k) // key.shape[1], L,
           allow.contiguous().numpy(), scale, torch.empty(Hq, n, L).numpy(), out.numpy())
    return out.transpose(0, 1)[None].to(query.dtype).contiguous(), None


