"""Faster CPU kernels for the few-row forwards of speculative decoding: linear layers and attention.

A verify forward runs every linear layer on a handful of rows (2-64 tree tokens). PyTorch's `F.linear(x, W)`
computes x @ W^T, and on CPU MKL serves that few-row shape with a small-M gemm that costs about as much for 2 rows
as for 16 and nearly twice a one-row gemv. The same product taken the other way round, (W @ x^T)^T, lets MKL
stream the weight once as a tall-skinny gemm (`skinny_linear`, over `padded_rows` rows). Past `SKINNY_MAX_ROWS`
rows (a prompt's prefill) `F.linear`'s own gemm is the faster again, so those stay with it; no verify forward is
that wide. Products of 1-`rowkernel.MAX_ROWS` rows go to `rowkernel` instead (a numba kernel that streams each
weight once at memory speed, batch-invariant); the skinny gemm serves the widths past it, and every width where
numba is missing or `rowkernel.off()` is in force. Results agree with `F.linear` to float rounding (about 1e-6
relative); every method, the autoregressive baseline included, runs on the same kernels, and the benchmark's
greedy audit checks the outputs stay identical.

Attention: SmolLM2 shares each key/value head among three query heads. Hugging Face's sdpa attention lets
PyTorch's kernel share them only when there is no mask; with one (every verify forward on top of a cache,
every tree) it first copies the whole cache three times over (`repeat_kv`), in every layer. `sdpa_gqa` passes
the mask and the shared heads to the same kernel instead (`enable_gqa`): bitwise the same logits, and a
cheaper verify forward.

Half-precision draft rows: a draft's one-token step is memory-bound too, and its weights (37 MB in fp32 for the
EAGLE drafter with its 8192-row head) need not fit the CPU's cache beside everything else, so every step
streams them from memory. `install(model, half_rows=True)` (drafts only, never a target) runs a one-row
linear layer over an fp16 copy of its weight: half the bytes (`LM` mirrors its support rows in fp16 the same
way). The products accumulate in fp32 inside the kernel and the result is checked: a row outside fp16's range
is computed again in fp32. The q a draft proposes from is still exactly the one the verifier uses (the engine
never recomputes it), so every method stays lossless; fp16 changes the draft's logits by about 1e-3 relative.
Few-row steps (a chain's first step, tree levels) stay fp32: fp16 gemms with 2-16 rows are no faster. A bf16
draft (a CPU with AMX) halves its output layer once more: its products of 1-`INT8_MAX_ROWS` rows run over an
int8 copy (`quantize_rows`, a scale per row; torch's weight-only int8 kernel, `int8_linear`). Its other layers
keep bf16, where int8 cost acceptance. What each of these buys, measured: docs/design.md#kernels and the
benchmark log, assets/bench/README.md.

Batch invariance: the decode loop's promise that greedy output equals the target's needs a token's logits to be
the same whether the target runs it alone (the autoregressive step) or inside a verify forward. fp32 products on
`rowkernel` are bitwise so; PyTorch's fused attention is not, by at most 4e-5 in a logit in fp32 (no greedy token
flipped in any audit) and by up to 0.5 in bf16, enough to flip greedy tokens on most prompts. A bf16 target
therefore runs `rows_attention` (`invariant_attention`): bitwise the same logits for 1-16 tokens, chains and
trees, tested (docs/design.md#batch-invariance).

bf16 products keep oneDNN's gemm over weights packed once (`specviz.kernels.packed`).

`install(model)` swaps the skinny forward into every `nn.Linear` of a CPU fp32 or bf16 model (one row included:
it pads to two, `padded_rows`; bf16 runs `packed_linear`), `sdpa_gqa` (a bf16 target: `rows_attention`) in for
its sdpa attention and, in a bf16 model, the fused RMS norm (`elementwise`) in for its norms' forward;
`stock(model)` puts the stock forward, norms and attention back for a while, so the Hugging Face
baselines run exactly as a user would run them; `full_rows(model)` turns the half rows off for a while (the
benchmark's ablation).
"""

from __future__ import annotations

import contextlib
import types

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from specviz.core.device import dispatched, execution_device
from specviz.kernels import elementwise, rowkernel
from specviz.kernels.attention import rows_attention, sdpa_gqa
from specviz.kernels.packed import PACKED_MAX_ROWS, mkldnn_packs, packed_linear, packs

ATTENTION = "specviz_sdpa_gqa"  # a draft's attention
ROWS_ATTENTION = "specviz_rows"  # a target's: batch-invariant (rows_attention)


def padded_rows(rows: int) -> int:
    """The row count the skinny gemm runs `rows` rows at (where `rowkernel` does not serve them). MKL's tall-skinny
    gemm is fast at some widths and slow just below them, so 3 pads to 4, 6-15 to 16 and 17-32 to the next
    multiple of 8 (zero rows cost less than the slow widths); one row pads to 2, since MKL's one-row gemv is no
    faster than the two-row skinny gemm (at times slower), so the autoregressive baseline's steps, like every
    verify, take the skinny gemm. Widths measured on SmolLM2's 30 layers on a 2-core AVX2 EPYC:
    docs/benchmarks.md#why-the-defaults."""
    if rows == 1:
        return 2
    if rows == 3:
        return 4
    if 6 <= rows <= 16:
        return 16
    if 17 <= rows <= 32:
        return -(-rows // 8) * 8
    return rows


SKINNY_MAX_ROWS = 128  # wider inputs (prefills) keep F.linear (module docstring)


def skinny_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """F.linear(x, weight, bias) for x with 1..SKINNY_MAX_ROWS rows: on `rowkernel` where it serves (1-16 rows),
    else as (weight @ x^T)^T over `padded_rows` rows; other widths keep F.linear."""
    rows = x.numel() // x.shape[-1]
    if rows == 0 or rows > SKINNY_MAX_ROWS:
        return F.linear(x, weight, bias)
    x2 = x.reshape(rows, x.shape[-1])
    if rowkernel.serves(x2, weight):  # 1..16 rows at memory speed
        y = rowkernel.linear(x2, weight)
    elif weight.dtype != torch.float32:  # bf16 past the kernel: oneDNN's gemm
        return F.linear(x, weight, bias)
    else:
        pad = padded_rows(rows) - rows
        if pad:
            x2 = torch.cat([x2, x2.new_zeros(pad, x2.shape[1])])
        y = torch.mm(weight, x2.t())[:, :rows].t()  # (rows, out): W streamed once
    if bias is not None:
        y = y + bias
    return y.contiguous().view(*x.shape[:-1], weight.shape[0])


AttentionInterface.register(ATTENTION, sdpa_gqa)
AttentionMaskInterface.register(ATTENTION, sdpa_mask)
AttentionInterface.register(ROWS_ATTENTION, rows_attention)
AttentionMaskInterface.register(ROWS_ATTENTION, sdpa_mask)


def _set_attention(model: torch.nn.Module, frm: str, to: str) -> bool:
    if getattr(model.config, "_attn_implementation", None) != frm:
        return False
    model.set_attn_implementation(to)
    return True


def half_copy(mod: torch.nn.Linear) -> torch.Tensor:
    """An fp16 copy of `mod`'s weight kept on it, made again whenever the weight changed (in place or swapped)."""
    w, d = mod.weight, mod.__dict__
    key = (w.data_ptr(), w._version, tuple(w.shape))
    if d.get("_half_key") != key:
        d["_half_weight"], d["_half_key"] = w.detach().to(torch.float16), key
    return d["_half_weight"]


def halves(mod: torch.nn.Module) -> bool:
    """Whether `mod` (an installed nn.Linear) runs its one-row products in fp16 now."""
    return bool(mod.__dict__.get("half_rows"))


def one_row(x: torch.Tensor) -> bool:
    """A single-row input outside autograd: the case half rows serve."""
    return x.numel() == x.shape[-1] and not torch.is_grad_enabled()


def half_row_linear(x: torch.Tensor, weight: torch.Tensor, half: torch.Tensor, bias: torch.Tensor | None = None):
    """F.linear(x, weight, bias) for one row, computed over `half` (weight in fp16); a result outside fp16's
    range (an inf or nan the fp32 product would not have) is computed again in fp32."""
    y = F.linear(x.to(torch.float16), half).to(x.dtype)
    if bias is not None:
        y = y + bias
    return y if bool(torch.isfinite(y).all()) else F.linear(x, weight, bias)


INT8_MAX_ROWS = 4  # a bf16 draft's products of 1..4 rows over int8 weights (docstring)
_int8 = {"failed": False}


def quantize_rows(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(out, in) weight -> int8 weight and per-row scale (symmetric: w ~ w8 * scale, |w8| <= 127), the scale in w's
    dtype and rounded up to it before w8 is made, so a row's values are not all off by the scale's rounding."""
    w32 = w.detach().float()
    scale = (w32.abs().amax(1) / 127).clamp(min=1e-30).to(w.dtype)
    up = torch.nextafter(scale, torch.full_like(scale, float("inf")))
    scale = torch.where(scale.float() * 127 < w32.abs().amax(1), up, scale)
    return torch.round(w32 / scale.float()[:, None]).clamp(-127, 127).to(torch.int8), scale


def int8_copy(mod: torch.nn.Linear) -> tuple[torch.Tensor, torch.Tensor]:
    """`quantize_rows` of `mod`'s weight kept on it, made again whenever the weight changed (in place or swapped)."""
    w, d = mod.weight, mod.__dict__
    key = (w.data_ptr(), w._version, tuple(w.shape))
    if d.get("_int8_key") != key:
        d["_int8_weight"], d["_int8_key"] = quantize_rows(w), key
    return d["_int8_weight"]


def int8s(mod: torch.nn.Module) -> bool:
    """Whether `mod` (an installed nn.Linear) runs its products of 1..INT8_MAX_ROWS rows over int8 weights now."""
    return bool(mod.__dict__.get("int8_rows")) and not _int8["failed"]


def few_rows(x: torch.Tensor) -> bool:
    """1..INT8_MAX_ROWS rows outside autograd: the case int8 rows serve."""
    return x.numel() <= INT8_MAX_ROWS * x.shape[-1] and not torch.is_grad_enabled()


def int8_linear(
    x: torch.Tensor, weight: torch.Tensor, w8: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """F.linear(x, weight, bias) for a few bf16 rows, computed over (w8, scale) by torch's weight-only int8 kernel;
    F.linear from then on where this torch has no such kernel."""
    x2 = x.reshape(-1, x.shape[-1])
    try:
        y = torch.ops.aten._weight_int8pack_mm(x2, w8, scale)
    except Exception:
        _int8["failed"] = True
        return F.linear(x, weight, bias)
    if bias is not None:
        y = y + bias
    return y.view(*x.shape[:-1], w8.shape[0])


def _forward(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    if halves(self) and one_row(x):
        return half_row_linear(x, self.weight, half_copy(self), self.bias)
    if int8s(self) and few_rows(x):
        return int8_linear(x, self.weight, *int8_copy(self), self.bias)
    if packs(self) and x.dtype == torch.bfloat16 and x.numel() <= PACKED_MAX_ROWS * x.shape[-1]:
        return packed_linear(x, self)
    return skinny_linear(x, self.weight, self.bias)


def wanted(model: torch.nn.Module) -> bool:
    """CPU fp32 and bf16 models get specviz's kernels (measured to pay; bf16: the invariant attention, its linear
    layers on oneDNN's gemm over packed weights); elsewhere the stock kernels stay."""
    p = next(model.parameters())
    return execution_device(model).type == "cpu" and p.dtype in rowkernel.WEIGHT_DTYPES


def invariant_attention(model: torch.nn.Module, half_rows: bool = False) -> bool:
    """Whether `model` gets the batch-invariant `rows_attention`: a bf16 target. fp32 keeps the fused kernel, whose
    variation between a one-token step and a wide verify is small enough never to have flipped a greedy token in an
    audit, while `rows_attention` would make an fp32 forward slower; in bf16 the fused kernel's variation flips
    greedy tokens (the figures: docs/design.md#batch-invariance, assets/bench/README.md). A draft (`half_rows`)
    keeps the fused kernel too: its numbers need only be the q it proposes from."""
    return not half_rows and next(model.parameters()).dtype == torch.bfloat16


def install(model: torch.nn.Module, half_rows: bool = False) -> int:
    """Give every nn.Linear of `model` the skinny forward, where `wanted`, its sdpa attention `sdpa_gqa` (or the
    batch-invariant `rows_attention`: `invariant_attention`) and a bf16 model's norms the fused one
    (`elementwise.rms_norm_forward`); `half_rows` (a draft's model only: never one a target shares) runs its one-row
    products in fp16, or a bf16 model's output layer over int8 (module docstring). Returns how many linear layers
    were swapped."""
    if not wanted(model):
        return 0
    _set_attention(model, "sdpa", ROWS_ATTENTION if invariant_attention(model, half_rows) else ATTENTION)
    if dispatched(model):  # accelerate's hooks own each module's forward: products and norms stay stock
        return 0
    head, n = model.get_output_embeddings(), 0
    for mod in model.modules():
        if type(mod) is torch.nn.Linear:
            mod.forward = types.MethodType(_forward, mod)
            mod.half_rows = half_rows and mod.weight.dtype == torch.float32  # fp32 weights: fp16 one-row steps
            mod.int8_rows = half_rows and mod.weight.dtype == torch.bfloat16 and mod is head  # bf16: int8 output layer
            mod.packed_rows = mod.weight.dtype == torch.bfloat16 and mkldnn_packs()  # bf16: oneDNN's own layout
            n += 1
        elif elementwise.fuses_norm(mod):  # bf16: the norm in one pass
            mod.forward = types.MethodType(elementwise.rms_norm_forward, mod)
    return n


def _linears(models) -> list[torch.nn.Linear]:
    return list({id(mod): mod for model in models for mod in model.modules() if type(mod) is torch.nn.Linear}.values())


def _norms(models) -> list[torch.nn.Module]:
    """The norms of `models` running `elementwise.rms_norm_forward` (installed)."""
    found = {id(mod): mod for model in models for mod in model.modules() if _fused_norm(mod)}
    return list(found.values())


def _fused_norm(mod: torch.nn.Module) -> bool:
    return getattr(mod.__dict__.get("forward"), "__func__", None) is elementwise.rms_norm_forward


@contextlib.contextmanager
def full_rows(*models: torch.nn.Module):
    """Run the block with every product of `models` over its own weights (half and int8 rows off), then restore them."""
    mods = [(m, k) for m in _linears(models) for k in ("half_rows", "int8_rows") if m.__dict__.get(k)]
    for m, k in mods:
        setattr(m, k, False)
    try:
        yield
    finally:
        for m, k in mods:
            setattr(m, k, True)


@contextlib.contextmanager
def stock(*models: torch.nn.Module):
    """Run the block with the stock nn.Linear forward, norms and attention on `models`, then restore what was
    installed."""
    swapped = [mod for mod in _linears(models) if getattr(mod.__dict__.get("forward"), "__func__", None) is _forward]
    norms = _norms(models)
    attention = [
        (m, impl)
        for m in {id(m): m for m in models}.values()
        for impl in [getattr(m.config, "_attn_implementation", None)]
        if impl in (ATTENTION, ROWS_ATTENTION) and _set_attention(m, impl, "sdpa")
    ]
    for mod in swapped + norms:
        del mod.forward
    try:
        yield
    finally:
        for mod in swapped:
            mod.forward = types.MethodType(_forward, mod)
        for mod in norms:
            mod.forward = types.MethodType(elementwise.rms_norm_forward, mod)
        for m, impl in attention:
            m.set_attn_implementation(impl)
