"""Fused elementwise steps of a Llama layer on CPU: the rotary embedding (`rotary`) and a bf16 model's RMS norm
(`rms_norm_forward`).

torch runs `transformers`' rotary embedding as seven ops (two products, two slices, a negation, a concatenation,
two more products and a sum) and Llama's RMS norm as eight, each dispatched on its own. On a 2-core Xeon with AMX in
bf16 that is about 27 µs for the rotary embedding of a token's queries and keys and 17 µs for a norm, in every layer
(one and two of them), where the arithmetic takes a few µs. The numba kernels (`_elementwise_ir`) do the rotary
embedding in one pass and the norm past its mean of squares in one (torch's own mean, three ops, stays: its
summation order is torch's to keep): 14 and 14 µs.

Both give torch's bits, in bf16 (the rotary embedding in fp32 too; tested on wide ranges of values and on the
default target's own activations), so they change no output. `models.direct` runs the rotary embedding;
`linear.install` makes the norm the forward of a bf16 model's norms, so Hugging Face's forward and `models.direct`
run the same one, and `linear.stock` puts torch's back. Both fall back to torch where numba is missing, on other
devices and dtypes, and under autograd; `off()` turns them off for a while (the benchmark's ablation).
"""

from __future__ import annotations

import numpy as np
import torch
from transformers.models.llama.modeling_llama import LlamaRMSNorm

from specviz.kernels import kept, switch

ROPE_MAX_ROWS = 64  # wider forwards (prefills) keep torch's ops: the same bits, and faster over many rows
_state = {"enabled": True, "kernel": None, "failed": False}  # kernel: the `_elementwise_ir` module, once imported


def _kernel():
    return switch.load(_state, "_elementwise_ir") if _state["enabled"] else None


def _rows(t: torch.Tensor) -> np.ndarray:
    """A contiguous (1, n, C) CPU tensor as an (n, C) array: fp32, or bf16 as its bits (int16)."""
    return (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy()[0]


class Rotary:
    """One forward's rotary embedding, applied to each layer's query and key projections: `rotary` makes it."""

    __slots__ = ("cos", "sin", "kernel")

    def __init__(self, cos: torch.Tensor, sin: torch.Tensor, kernel):
        self.cos, self.sin, self.kernel = _rows(cos.contiguous()), _rows(sin.contiguous()), kernel

    def __call__(self, qx: torch.Tensor, kx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Projections qx (1, n, Hq d), kx (1, n, Hk d), each row contiguous -> (q, k), (1, Hq, n, d) and
        (1, Hk, n, d): what `apply_rotary_pos_emb(qx.view(...).transpose(1, 2), ...)` returns, the same bits in the
        same layout."""
        oq, ok = torch.empty(qx.shape, dtype=qx.dtype), torch.empty(kx.shape, dtype=kx.dtype)
        self.kernel(_rows(qx), _rows(kx), self.cos, self.sin, _rows(oq), _rows(ok))
        n, d = self.cos.shape
        return oq.view(1, n, -1, d).transpose(1, 2), ok.view(1, n, -1, d).transpose(1, 2)


def rotary(cos: torch.Tensor, sin: torch.Tensor, dtype: torch.dtype) -> Rotary | None:
    """The fused rotary embedding for one forward's cos and sin (1, n, d), for projections of `dtype`; None where it
    does not serve (numba missing or `off()`, another device, batch or dtype, more than ROPE_MAX_ROWS rows,
    autograd): then torch's."""
    kernel = _kernel()
    if (
        kernel is None
        or dtype not in (torch.bfloat16, torch.float32)
        or cos.dtype != dtype
        or sin.dtype != dtype
        or cos.device.type != "cpu"
        or cos.ndim != 3
        or cos.shape[0] != 1
        or cos.shape[1] > ROPE_MAX_ROWS
        or cos.shape != sin.shape
        or cos.shape[-1] % 2
        or (torch.is_grad_enabled() and (cos.requires_grad or sin.requires_grad))
    ):
        return None
    return Rotary(cos, sin, kernel.rope_bf16 if dtype == torch.bfloat16 else kernel.rope_f32)


def fuses_norm(mod: torch.nn.Module) -> bool:
    """Whether `mod` is a norm whose forward `rms_norm_forward` can be: a bf16 LlamaRMSNorm."""
    return type(mod) is LlamaRMSNorm and mod.weight.dtype == torch.bfloat16


def _norm_args(mod) -> tuple | None:
    """(weight bits, eps) of a norm the kernel serves (bf16 weight, on CPU), kept on it until the weight changes (in
    place or swapped); None where it does not serve."""
    w = mod._parameters["weight"]
    box = kept.box(mod, "_fused_args")
    key = (w, kept.version(w), w.data_ptr())
    if box.key is None or box.key[0] is not w or box.key[1:] != key[1:]:
        ok = w.dtype == torch.bfloat16 and w.is_cpu and w.ndim == 1
        box.value = (
            (w.detach().contiguous().view(torch.int16).numpy(), np.float32(mod.variance_epsilon)) if ok else None
        )
        box.key = key
    return box.value


def rms_norm_forward(self: LlamaRMSNorm, x: torch.Tensor) -> torch.Tensor:
    """LlamaRMSNorm's forward, torch's bits: its mean of squares by torch, the rest in one pass
    (`_elementwise_ir.rms_norm_bf16`), for a bf16 (1, n, H) input on CPU outside autograd; torch's elsewhere."""
    kernel = _kernel()
    if (
        kernel is not None
        and x.dtype == torch.bfloat16
        and x.is_cpu
        and x.ndim == 3
        and x.shape[0] == 1
        and x.is_contiguous()
        and not (torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad))
    ):
        args = _norm_args(self)
        if args is not None and len(args[0]) == x.shape[2]:
            var = x.float().pow(2).mean(-1)  # torch's own mean of squares (its summation order), (1, n)
            out = torch.empty_like(x)
            kernel.rms_norm_bf16(_rows(x), var.numpy()[0], args[0], args[1], _rows(out))
            return out
    return type(self).forward(self, x)


def enabled() -> bool:
    """Whether the fused kernels are on (not inside `off()`) and compile here."""
    return _kernel() is not None


def off():
    """Run the block on torch's elementwise ops only, then restore."""
    return switch.off(_state)
