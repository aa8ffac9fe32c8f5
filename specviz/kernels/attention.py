"""Batch-invariant attention for a target's few-query forwards (decode steps, verifies, trees): `rows_attention`.

`specviz.kernels.linear` registers it as the attention of a bf16 target (`invariant_attention`) and says why.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
import torch.nn.functional as F

from specviz.kernels import kept, rowkernel

ROWS_MAX_QUERIES = 64  # wider forwards (prefills) keep the fused kernel


def _heads_as_rows(t: torch.Tensor) -> torch.Tensor:
    """(1, H, L, d) keys or values -> (H cap, d) rows, head h in rows h cap .. h cap + L - 1, fp32 or bf16 (which
    the kernel widens as it loads them): the cache's own buffer where its rows are contiguous
    (`kvcache` views hold cap >= L rows a head), else a copy (cap = L)."""
    _, H, L, d = t.shape
    if t.dtype not in (torch.float32, torch.bfloat16):
        t = t.float()
    rows = None
    if t.stride(3) == 1 and t.stride(2) == d and t.stride(1) % d == 0 and t.stride(1) >= L * d:
        cap = t.stride(1) // d
        if t.storage_offset() + H * cap * d <= t.untyped_storage().nbytes() // t.element_size():
            rows = t.as_strided((H * cap, d), (d, 1))
    if rows is None:
        rows = t[0].contiguous().view(H * L, d)
    return rows


def _allowed(module, mask, n: int, L: int, kwargs: dict) -> np.ndarray | None:
    """(n, L) bool, C-contiguous: the keys each query may see; None where the mask says more than that (an additive
    bias, a soft cap, a sliding window with no mask to carry it) or the layer is not causal, which `rows_attention`
    leaves to the fused kernel. A sliding window with a mask is in the mask (Hugging Face's and `LM`'s both). Every
    layer of a forward gets the same mask tensor, so the answer is kept for it (`_last`, which holds
    the tensor, so no other takes its id) until another comes or its version counter moves (an in-place change;
    an inference-mode tensor has no counter: Hugging Face builds a new mask every forward)."""
    if kwargs.get("softcap") or kwargs.get("s_aux") is not None:
        return None
    if mask is None:  # causal, bottom-right aligned (a sliding window then has to be applied here: left to sdpa)
        return _causal(n, L) if getattr(module, "is_causal", True) and not kwargs.get("sliding_window") else None
    last = _last[0]
    version = kept.version(mask)
    if last is not None and last[0] is mask and last[1:4] == (version, n, L):
        return last[4]
    allow = _visible(mask, n, L)
    if allow is not None:  # read-only, as `_causal`'s: one array type, so the kernel compiles once, at warm-up
        allow.flags.writeable = False
    _last[0] = (mask, version, n, L, allow)
    return allow


_last: list = [None]  # (mask, its version, n, L, answer) of the latest call with a mask


def _visible(mask: torch.Tensor, n: int, L: int) -> np.ndarray | None:
    if mask.ndim != 4 or mask.shape[0] != 1:
        return None
    m = mask[0, 0, :, :L]  # (n, L): bool or additive
    if m.dtype == torch.bool:
        return m.contiguous().numpy()
    from specviz.kernels import _attention_ir

    allow = np.empty((n, L), np.bool_)
    return allow if _attention_ir.visible(m.float().numpy(), np.float32(torch.finfo(m.dtype).min / 2), allow) else None


@functools.lru_cache(maxsize=256)
def _causal(n: int, L: int) -> np.ndarray:
    allow = np.tril(np.ones((n, L), np.bool_), L - n)
    allow.flags.writeable = False
    return allow


def rows_attention(
    module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, is_causal=None, **kwargs
):
    """`sdpa_gqa`'s attention, batch-invariant for up to ROWS_MAX_QUERIES queries: a query's output is bitwise the
    same whether it runs alone (a decode step) or among others (a verify forward, a tree).

    PyTorch's fused kernel is not (a query among 4 differs from the same query alone by 4e-7 in fp32 and by one
    bf16 step, 1e-3, in bf16), and in bf16 that is enough to flip greedy tokens on most prompts. Here every
    (head, query) pair runs on its own (`_attention_ir.attend`): the scores are the row kernel's dot products; the
    keys the query may see are gathered in increasing position and the softmax and the weighted sum of values run
    in that order, so neither the other queries, nor the keys it cannot see (masked, or past its own position in a
    wider forward), nor where its keys sit in the cache (a tree's scattered path, a chain's contiguous one) change
    a bit of its output. fp32 inside, rounded once to the model's dtype. It costs a
    few ms a forward more than the fused kernel (measured on a Xeon with AMX: assets/bench/README.md). Wider
    forwards (prefills), a batch of several sequences and autograd keep `sdpa_gqa`."""
    B, Hq, n, d = query.shape
    L = key.shape[-2]
    fits = B == 1 and n <= ROWS_MAX_QUERIES and not dropout and not query.requires_grad and rowkernel.enabled()
    allow = _allowed(module, attention_mask, n, L, kwargs) if fits else None
    if allow is None:
        return sdpa_gqa(module, query, key, value, attention_mask, dropout, scaling, is_causal, **kwargs)
    k, v = (_heads_as_rows(t) for t in (key, value))  # (Hkv cap, d), cap rows a head
    from specviz.kernels import _attention_ir

    dtype = torch.bfloat16 if query.dtype == torch.bfloat16 else torch.float32
    out = torch.empty(1, n, Hq, d, dtype=dtype)
    _attention_ir.attend(
        _numpy(query[0].to(dtype).contiguous()),  # one layout whatever the query count (one compiled kernel)
        _numpy(k),
        _numpy(v),
        k.shape[0] // key.shape[1],
        L,
        allow,
        np.float32(d**-0.5 if scaling is None else scaling),
        _numpy(out)[0],
    )
    return out.to(query.dtype), None


def _numpy(t: torch.Tensor) -> np.ndarray:
    return (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy()


def sdpa_gqa(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, is_causal=None, **kwargs):
    """Hugging Face's sdpa attention (same arguments, same result) with shared key/value heads left to the
    kernel (`enable_gqa`) instead of copied. query (B, Hq, n, d), key / value (B, Hkv, past+n, d)."""
    if attention_mask is not None and attention_mask.ndim == 4:
        attention_mask = attention_mask[:, :, :, : key.shape[-2]]
    if is_causal is None:
        is_causal = query.shape[2] > 1 and attention_mask is None and getattr(module, "is_causal", True)
    out = F.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=attention_mask,
        dropout_p=dropout,
        scale=scaling,
        is_causal=bool(is_causal),
        enable_gqa=query.shape[1] != key.shape[1],
    )
    return out.transpose(1, 2).contiguous(), None
