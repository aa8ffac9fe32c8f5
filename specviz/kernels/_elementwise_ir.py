"""The fused elementwise kernels' code (`elementwise` imports it where numba is installed): the rotary embedding of
a projection's rows (`rope_bf16`, `rope_f32`) and the RMS norm of bf16 rows past their mean of squares
(`rms_norm_bf16`).

bf16 tensors arrive as their bits (int16 arrays). A bf16 value widens to fp32 exactly (a 16-bit shift) and an fp32
result rounds back as torch rounds it (`_round`: to nearest, ties to even, NaN to 0x7FC0), so a kernel that rounds
wherever torch's bf16 ops round gives torch's bits.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic


@intrinsic
def _as_float(typingctx, bits):
    """int32 bits -> the float32 they encode."""

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.int32), codegen


@intrinsic
def _as_bits(typingctx, x):
    """float32 -> its int32 bits."""

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.int32(types.float32), codegen


@numba.njit(inline="always")
def _widen(b):
    """bf16 bits (int16) -> fp32, exact."""
    return _as_float(np.int32(b) << 16)


@numba.njit(inline="always")
def _round(x):
    """fp32 -> bf16 bits (int16), to nearest, ties to even, as torch rounds (NaN: 0x7FC0)."""
    u = np.uint32(_as_bits(x))
    r = np.int16(np.int32((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)))
    return np.int16(0x7FC0) if x != x else r


@numba.njit(inline="always")
def _bf16(x):
    """fp32 -> the fp32 value of its bf16 rounding."""
    return _widen(_round(x))


@numba.njit(inline="always")
def _rope_row_bf16(x, i, c, s, a, out):
    """One row of `rope_bf16` for one projection: every head of x[i] into out[i]."""
    d = c.shape[0]
    half = d // 2
    for o in range(0, x.shape[1], d):
        for t in range(d):
            a[t] = _widen(x[i, o + t])
        for t in range(half):
            out[i, o + t] = _round(_bf16(a[t] * c[t]) + _bf16(-a[t + half] * s[t]))
        for t in range(half, d):
            out[i, o + t] = _round(_bf16(a[t] * c[t]) + _bf16(a[t - half] * s[t]))


@numba.njit(cache=True, boundscheck=False, nogil=True)
def rope_bf16(xq, xk, cos, sin, oq, ok):
    """o = x cos + rotate_half(x) sin for the query and the key rows, bf16 bits, each product and the sum rounded to
    bf16 where torch's ops round them (`transformers`' apply_rotary_pos_emb in bf16, bit for bit). xq, oq (n, Hq d)
    and xk, ok (n, Hk d): projections' rows, head h in columns h d .. h d + d - 1; cos, sin (n, d); within a head
    rotate_half(x) = (-x[d/2:], x[:d/2])."""
    n, d = cos.shape
    c, s, a = np.empty(d, np.float32), np.empty(d, np.float32), np.empty(d, np.float32)
    for i in range(n):
        for t in range(d):
            c[t] = _widen(cos[i, t])
            s[t] = _widen(sin[i, t])
        _rope_row_bf16(xq, i, c, s, a, oq)
        _rope_row_bf16(xk, i, c, s, a, ok)


@numba.njit(inline="always")
def _rope_row_f32(x, i, cos, sin, out):
    d = cos.shape[1]
    half = d // 2
    for o in range(0, x.shape[1], d):
        for t in range(half):
            out[i, o + t] = x[i, o + t] * cos[i, t] + (-x[i, o + t + half]) * sin[i, t]
        for t in range(half, d):
            out[i, o + t] = x[i, o + t] * cos[i, t] + x[i, o + t - half] * sin[i, t]


@numba.njit(cache=True, boundscheck=False, nogil=True)
def rope_f32(xq, xk, cos, sin, oq, ok):
    """`rope_bf16` in fp32: two products and a sum, each rounded once (no fma), as torch's ops compute them."""
    for i in range(cos.shape[0]):
        _rope_row_f32(xq, i, cos, sin, oq)
        _rope_row_f32(xk, i, cos, sin, ok)


@numba.njit(cache=True, boundscheck=False, nogil=True)
def rms_norm_bf16(x, var, w, eps, out):
    """out[i] = w * bf16(x[i] / sqrt(var[i] + eps)) for bf16 bits x, out (n, D), w (D) and the rows' mean squares var
    (n) fp32: Llama's RMS norm past its mean (torch's, which the caller passes), rounded where `transformers`'
    LlamaRMSNorm rounds: the normalised row, then its product with the weight. torch's bits."""
    n, D = x.shape
    wf = np.empty(D, np.float32)
    for t in range(D):
        wf[t] = _widen(w[t])
    for i in range(n):
        r = np.float32(1.0) / np.sqrt(var[i] + eps)
        for t in range(D):
            out[i, t] = _round(wf[t] * _bf16(_widen(x[i, t]) * r))
