"""Faster CPU kernels for the few-row forwards of speculative decoding: linear layers and attention.

A verify forward runs every linear layer on a handful of rows (2-64 tree tokens). PyTorch's
`F.linear(x, W)` computes x @ W^T, and on CPU MKL serves that few-row shape with a small-M gemm that
costs about as much for 2 rows as for 16 and nearly twice a one-row gemv (measured on this project's
2-core AVX2 machine, SmolLM2-135M fp32, all 30 layers: 1 row 35 ms, 2 rows 62 ms, 16 rows 81 ms).
The same product taken the other way round, (W @ x^T)^T, lets MKL stream the weight once as a
tall-skinny gemm: 2 rows 35 ms, 4 rows 31 ms, 16 rows 49 ms. Past `SKINNY_MAX_ROWS` rows (a prompt's
prefill) `F.linear`'s own gemm is the faster again (2026-12-01, prefill on an empty cache, ms, skinny /
F.linear: 128 rows 442 / 457, 200 rows 496 / 449, 300 rows 700 / 590, 800 rows 1934 / 1524), so those
stay with it; no verify forward is that wide. Results agree with `F.linear` to float
rounding (about 1e-6 relative); every method, the autoregressive baseline included, runs on the
same kernels, and the benchmark's greedy audit checks the outputs stay identical.

Attention: SmolLM2 shares each key/value head among three query heads. Hugging Face's sdpa attention lets
PyTorch's kernel share them only when there is no mask; with one (every verify forward on top of a cache,
every tree) it first copies the whole cache three times over (`repeat_kv`), in every layer. `sdpa_gqa` passes
the mask and the shared heads to the same kernel instead (`enable_gqa`): bitwise the same logits, and a
verify forward over 2-16 tokens on 256 cached ones 2-10 ms faster (SmolLM2-135M fp32, this machine).

`install(model)` swaps the skinny forward into every `nn.Linear` of a CPU fp32 model (one row keeps
`F.linear`: it is already the fast gemv) and `sdpa_gqa` in for its sdpa attention; `stock(model)` puts
the stock forward and attention back for a while, so the Hugging Face baselines run exactly as a user
would run them.
"""
from __future__ import annotations

import contextlib
import types

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

ATTENTION = "specviz_sdpa_gqa"


def padded_rows(rows: int) -> int:
    """The row count to run `rows` rows at: MKL's tall-skinny gemm is fast at some widths and slow just
    below them (30 SmolLM2 layers, ms: 3 rows 39, 4 rows 31-33, 5 rows 45; 6 / 7 / 8 rows 57 / 71 / 59;
    9-15 rows 67-104, 16 rows 54-55; 25-31 rows 89-133, 32 rows 80), so 3 pads to 4, 6-15 to 16 and 17-32
    to the next multiple of 8; zero rows cost less than the slow widths."""
    if rows == 3:
        return 4
    if 6 <= rows <= 16:
        return 16
    if 17 <= rows <= 32:
        return -(-rows // 8) * 8
    return rows


SKINNY_MAX_ROWS = 128                         # wider inputs (prefills) keep F.linear (module docstring)


def skinny_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """F.linear(x, weight, bias), computed as (weight @ x^T)^T when x has 2..SKINNY_MAX_ROWS rows."""
    rows = x.numel() // x.shape[-1]
    if rows <= 1 or rows > SKINNY_MAX_ROWS:
        return F.linear(x, weight, bias)
    x2 = x.reshape(rows, x.shape[-1])
    pad = padded_rows(rows) - rows
    if pad:
        x2 = torch.cat([x2, x2.new_zeros(pad, x2.shape[1])])
    y = torch.mm(weight, x2.t())[:, :rows].t()                                   # (rows, out): W streamed once
    if bias is not None:
        y = y + bias
    return y.contiguous().view(*x.shape[:-1], weight.shape[0])


def sdpa_gqa(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, is_causal=None, **kwargs):
    """Hugging Face's sdpa attention (same arguments, same result) with shared key/value heads left to the
    kernel (`enable_gqa`) instead of copied. query (B, Hq, n, d), key / value (B, Hkv, past+n, d)."""
    if attention_mask is not None and attention_mask.ndim == 4:
        attention_mask = attention_mask[:, :, :, :key.shape[-2]]
    if is_causal is None:
        is_causal = query.shape[2] > 1 and attention_mask is None and getattr(module, "is_causal", True)
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling,
                                         is_causal=bool(is_causal), enable_gqa=query.shape[1] != key.shape[1])
    return out.transpose(1, 2).contiguous(), None


AttentionInterface.register(ATTENTION, sdpa_gqa)
AttentionMaskInterface.register(ATTENTION, sdpa_mask)


def _set_attention(model: torch.nn.Module, frm: str, to: str) -> bool:
    if getattr(model.config, "_attn_implementation", None) != frm:
        return False
    model.set_attn_implementation(to)
    return True


def _forward(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    return skinny_linear(x, self.weight, self.bias)


def wanted(model: torch.nn.Module) -> bool:
    """The swap pays on CPU in fp32 (measured); elsewhere the stock kernels stay."""
    p = next(model.parameters())
    return p.device.type == "cpu" and p.dtype == torch.float32


def install(model: torch.nn.Module) -> int:
    """Give every nn.Linear of `model` the skinny forward and its sdpa attention `sdpa_gqa`, where `wanted`;
    returns how many linear layers were swapped."""
    if not wanted(model):
        return 0
    _set_attention(model, "sdpa", ATTENTION)
    n = 0
    for mod in model.modules():
        if type(mod) is torch.nn.Linear:
            mod.forward = types.MethodType(_forward, mod)
            n += 1
    return n


@contextlib.contextmanager
def stock(*models: torch.nn.Module):
    """Run the block with the stock nn.Linear forward and attention on `models`, then restore what was installed."""
    swapped = list({id(mod): mod for model in models for mod in model.modules()
                    if type(mod) is torch.nn.Linear and "forward" in mod.__dict__}.values())
    attention = [m for m in {id(m): m for m in models}.values() if _set_attention(m, ATTENTION, "sdpa")]
    for mod in swapped:
        del mod.forward
    try:
        yield
    finally:
        for mod in swapped:
            mod.forward = types.MethodType(_forward, mod)
        for m in attention:
            m.set_attn_implementation(ATTENTION)
