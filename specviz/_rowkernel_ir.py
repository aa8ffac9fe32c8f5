"""The row kernel's code (`rowkernel` imports it where numba is installed): y[j, o] = w[o] . x[j] for C-contiguous
arrays, fp32 x and y, w fp32 or bf16 (its bits as int16: widened to fp32 exactly, by a 16-bit shift, as it is
loaded), each weight row read once, in the fixed summation order `rowkernel`'s docstring declares.
"""
from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

VF, IC = 8, 2                     # the summation order (rowkernel's docstring): IC accumulators of VF lanes per product


def _dot_rows(P: int):
    """A numba intrinsic dots(w, x, y, o, j): y[j + p, o] = w[o] . x[j + p] for p < P, in the fixed order.

    Written in LLVM IR with explicit vectors and fma, with no fast-math flags, so the compiler may
    schedule it freely but cannot reorder a sum: the P products of one call interleave for instruction-level
    parallelism, and each is the same sequence of roundings as when it runs alone (C-contiguous rows). Tiles of
    several weight rows a call measured slower for 4-8 input rows on a Xeon (a forward of 4 / 8 tokens 50.5 / 57.6
    ms with one, 54.1 / 61.6 with 4 x 2 tiles, 2026-12-02).
    """
    f32 = ir.FloatType()
    vec = ir.VectorType(f32, VF)

    @intrinsic
    def dots(typingctx, w, x, y, o, j):
        def codegen(context, builder, sig, args):
            wa, xa, ya = (context.make_array(t)(context, builder, a) for t, a in zip(sig.args[:3], args[:3]))
            o_, j_ = (context.cast(builder, a, t, types.intp) for a, t in zip(args[3:], sig.args[3:]))
            n_in = cgutils.unpack_tuple(builder, wa.shape, 2)[1]
            n_out = cgutils.unpack_tuple(builder, ya.shape, 2)[1]
            idx = n_in.type
            w_row = builder.gep(wa.data, [builder.mul(o_, n_in)])
            x_rows = [builder.gep(xa.data, [builder.mul(builder.add(j_, idx(p)), n_in)]) for p in range(P)]
            fma_v = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vec, [vec] * 3), "llvm.fma.v8f32")
            fma_s = cgutils.get_or_insert_function(builder.module, ir.FunctionType(f32, [f32] * 3), "llvm.fma.f32")
            bf16 = sig.args[0].dtype != types.float32                 # w holds bf16 bits (int16): widen on load
            i16v, i32v, i32 = ir.VectorType(ir.IntType(16), VF), ir.VectorType(ir.IntType(32), VF), ir.IntType(32)

            def load_wv(ptr):                                          # VF weights -> <VF x float>, exact
                if not bf16:
                    return builder.load(builder.bitcast(ptr, vec.as_pointer()), align=4)
                bits = builder.zext(builder.load(builder.bitcast(ptr, i16v.as_pointer()), align=2), i32v)
                return builder.bitcast(builder.shl(bits, ir.Constant(i32v, [16] * VF)), vec)

            def load_w(ptr):                                           # one weight -> float, exact
                if not bf16:
                    return builder.load(ptr)
                return builder.bitcast(builder.shl(builder.zext(builder.load(ptr), i32), i32(16)), f32)

            acc = [[cgutils.alloca_once_value(builder, ir.Constant(vec, [0.0] * VF)) for _ in range(IC)] for _ in range(P)]
            tail = [cgutils.alloca_once_value(builder, f32(0.0)) for _ in range(P)]
            n_main = builder.mul(builder.sdiv(n_in, idx(VF * IC)), idx(VF * IC))
            with cgutils.for_range_slice(builder, idx(0), n_main, idx(VF * IC)) as (k0, _):
                for u in range(IC):                      # accumulator u takes lanes k0 + 8u .. k0 + 8u + 7
                    k = builder.add(k0, idx(u * VF))
                    wv = load_wv(builder.gep(w_row, [k]))
                    for p in range(P):
                        xv = builder.load(builder.bitcast(builder.gep(x_rows[p], [k]), vec.as_pointer()), align=4)
                        builder.store(builder.call(fma_v, [wv, xv, builder.load(acc[p][u])]), acc[p][u])
            with cgutils.for_range_slice(builder, n_main, n_in, idx(1)) as (k, _):      # the tail, in order
                wk = load_w(builder.gep(w_row, [k]))
                for p in range(P):
                    xk = builder.load(builder.gep(x_rows[p], [k]))
                    builder.store(builder.call(fma_s, [wk, xk, builder.load(tail[p])]), tail[p])
            for p in range(P):
                terms = [builder.load(a) for a in acc[p]]
                while len(terms) > 1:                    # accumulators, then lanes: halves added pairwise
                    terms = [builder.fadd(a, b) for a, b in zip(terms[:len(terms) // 2], terms[len(terms) // 2:])]
                lanes = [builder.extract_element(terms[0], ir.IntType(32)(i)) for i in range(VF)]
                while len(lanes) > 1:
                    lanes = [builder.fadd(a, b) for a, b in zip(lanes[:len(lanes) // 2], lanes[len(lanes) // 2:])]
                out = builder.gep(ya.data, [builder.add(builder.mul(builder.add(j_, idx(p)), n_out), o_)])
                builder.store(builder.fadd(lanes[0], builder.load(tail[p])), out)
            return context.get_dummy_value()
        return types.void(w, x, y, o, j), codegen

    return dots


dots4, dots2, dots1 = _dot_rows(4), _dot_rows(2), _dot_rows(1)


@numba.njit(cache=True, boundscheck=False, nogil=True)
def _rows_block(w, x, y, lo, hi):            # y[:, lo:hi] = x w[lo:hi]^T; each weight row read once, from L1 after
    rows = x.shape[0]
    for o in range(lo, hi):
        j = 0
        while j + 4 <= rows:
            dots4(w, x, y, o, j)
            j += 4
        if j + 2 <= rows:
            dots2(w, x, y, o, j)
            j += 2
        if j < rows:
            dots1(w, x, y, o, j)


@numba.njit(parallel=True, cache=True, boundscheck=False, nogil=True)
def rows_times_weight(w, x, y):              # y[j, o] = w[o] . x[j]; each weight row read once, from L1 after
    n_out, block = w.shape[0], 32
    for b in numba.prange((n_out + block - 1) // block):
        _rows_block(w, x, y, b * block, min(n_out, b * block + block))


@numba.njit(parallel=True, cache=True, boundscheck=False, nogil=True)
def attend(q, k, v, cap, L, allow, scale, s, out):
    """Attention of every (query head, query) pair on its own, in one fixed order: out[h, i] = sum_j p_j v_h'[j] over
    the keys j that query i may see (`allow[i, j]`, increasing j), p the softmax of scale * q[h, i] . k_h'[j], where
    h' = h // (query heads per key/value head) and k_h' = k[h' cap : h' cap + L] (v the same). q (Hq, n, d); k and v
    (Hkv cap, d), key/value head h' in rows h' cap ..; s (Hq, n, L) scratch; out (Hq, n, d); all fp32 C-contiguous.
    The dot products are the row kernel's (each in the declared order, whatever else its call holds); max, exp, the
    softmax's sum and the weighted sum run in plain order over j, so a query's output depends neither on which
    other queries share the call nor on keys it cannot see."""
    Hq, n, d = q.shape
    G = Hq // (k.shape[0] // cap)
    for h in numba.prange(Hq):
        base = (h // G) * cap
        kh, vh, sh = k[base:base + L], v[base:base + L], s[h]
        _rows_block(kh, q[h], sh, 0, L)
        for i in range(n):
            m = np.float32(-np.inf)                   # max of the raw scores: scaling after is exact (monotone)
            for j in range(L):
                if allow[i, j] and sh[i, j] > m:
                    m = sh[i, j]
            m = m * scale
            total = np.float32(0.0)
            for j in range(L):
                if allow[i, j]:
                    e = np.exp(sh[i, j] * scale - m)
                    sh[i, j] = e
                    total += e
            acc = np.zeros(d, np.float32)
            for j in range(L):
                if allow[i, j]:
                    p = sh[i, j] / total
                    for c in range(d):
                        acc[c] += p * vh[j, c]
            out[h, i] = acc
