"""The row kernel's code (`rowkernel` imports it where numba is installed): y[j, o] = w[o] . x[j] for C-contiguous
arrays, fp32 x and y, w fp32 or bf16 (its bits as int16: widened to fp32 exactly, by a 16-bit shift, as it is
loaded), each weight row read once, in the fixed summation order `rowkernel`'s docstring declares.
"""

from __future__ import annotations

import numba
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

VF, IC = 8, 2  # the summation order (rowkernel's docstring): IC accumulators of VF lanes per product
W_LANES = VF * IC


def _widening_loads(builder, bf16: bool, lanes: int = VF):
    """Loaders of `lanes` weights and of one weight as fp32, from fp32 or from bf16 bits (int16: a 16-bit shift,
    exact)."""
    f32 = ir.FloatType()
    vec, i16v, i32v, i32 = (
        ir.VectorType(f32, lanes),
        ir.VectorType(ir.IntType(16), lanes),
        ir.VectorType(ir.IntType(32), lanes),
        ir.IntType(32),
    )

    def load_v(ptr):
        if not bf16:
            return builder.load(builder.bitcast(ptr, vec.as_pointer()), align=4)
        bits = builder.zext(builder.load(builder.bitcast(ptr, i16v.as_pointer()), align=2), i32v)
        return builder.bitcast(builder.shl(bits, ir.Constant(i32v, [16] * lanes)), vec)

    def load_1(ptr):
        if not bf16:
            return builder.load(ptr)
        return builder.bitcast(builder.shl(builder.zext(builder.load(ptr), i32), i32(16)), f32)

    return load_v, load_1


def _fma(builder, vec):
    name = f"llvm.fma.v{vec.count}f32" if isinstance(vec, ir.VectorType) else "llvm.fma.f32"
    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(vec, [vec] * 3), name)


def _lanes(builder, a, b, idx: list[int]):
    return builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(ir.IntType(32), len(idx)), idx))


def _halve_groups(builder, vectors: list, width: int):
    """The sums of P vectors of `width` lanes, each in the declared order (the accumulators added, then the lanes
    pairwise by halves), as one vector of P lanes. All P sums are formed at once: the vectors are laid end to end
    and every step adds, in each group of w lanes, lane i to lane i + w / 2, so each sum is the same sequence of
    roundings as alone, in four vector additions for all P instead of 2 x width scalar operations a product."""
    while len(vectors) > 1:  # laid end to end: shuffles, no arithmetic (P is 1, 2 or 4)
        n = vectors[0].type.count
        vectors = [_lanes(builder, a, b, list(range(2 * n))) for a, b in zip(vectors[::2], vectors[1::2])]
    v, w = vectors[0], width
    groups = v.type.count // width
    while w > 1:
        h = w // 2
        first = [g * w + i for g in range(groups) for i in range(h)]
        v = builder.fadd(_lanes(builder, v, v, first), _lanes(builder, v, v, [i + h for i in first]))
        w = h
    return v


def _product_args(context, builder, sig, args, P: int):
    """The arguments (w, x, y, o, j) of a product intrinsic: w's and y's arrays, o and j, the input and output widths
    and pointers to x's rows j .. j + P - 1."""
    wa, xa, ya = (context.make_array(t)(context, builder, a) for t, a in zip(sig.args[:3], args[:3]))
    o_, j_ = (context.cast(builder, a, t, types.intp) for a, t in zip(args[3:], sig.args[3:]))
    n_in = cgutils.unpack_tuple(builder, wa.shape, 2)[1]
    n_out = cgutils.unpack_tuple(builder, ya.shape, 2)[1]
    x_rows = [builder.gep(xa.data, [builder.mul(builder.add(j_, n_in.type(p)), n_in)]) for p in range(P)]
    return wa, ya, o_, j_, n_in, n_out, x_rows


def _dot_rows(P: int):
    """A numba intrinsic dots(w, x, y, o, j): y[j + p, o] = w[o] . x[j + p] for p < P, in the fixed order.

    Written in LLVM IR with explicit vectors and fma, with no fast-math flags, so the compiler may
    schedule it freely but cannot reorder a sum: the P products of one call interleave for instruction-level
    parallelism, and each is the same sequence of roundings as when it runs alone (C-contiguous rows). One weight
    row a call: tiles of several weight rows measured slower for 4-8 input rows (on a Xeon with AMX). The IC
    accumulators are one vector of VF x IC lanes (lane 8u + l is accumulator u's lane l), split in halves for the
    sum: the same roundings, and half the instructions where the CPU has 16-lane registers (AVX-512).
    """
    f32, W = ir.FloatType(), W_LANES
    wide = ir.VectorType(f32, W)  # lane 8u + l is accumulator u's lane l: the declared order

    @intrinsic
    def dots(typingctx, w, x, y, o, j):
        def codegen(context, builder, sig, args):
            wa, ya, o_, j_, n_in, n_out, x_rows = _product_args(context, builder, sig, args, P)
            idx = n_in.type
            w_row = builder.gep(wa.data, [builder.mul(o_, n_in)])
            fma_v, fma_s = _fma(builder, wide), _fma(builder, f32)
            load_wv, load_w = _widening_loads(builder, sig.args[0].dtype != types.float32, W)  # bf16 bits: widen

            acc = [cgutils.alloca_once_value(builder, ir.Constant(wide, [0.0] * W)) for _ in range(P)]
            tail = [cgutils.alloca_once_value(builder, f32(0.0)) for _ in range(P)]
            n_main = builder.mul(builder.sdiv(n_in, idx(W)), idx(W))
            with cgutils.for_range_slice(builder, idx(0), n_main, idx(W)) as (k, _):
                wv = load_wv(builder.gep(w_row, [k]))  # elements k .. k + 15: accumulator u takes
                for p in range(P):  # k + 8u .. k + 8u + 7, by fma
                    xv = builder.load(builder.bitcast(builder.gep(x_rows[p], [k]), wide.as_pointer()), align=4)
                    builder.store(builder.call(fma_v, [wv, xv, builder.load(acc[p])]), acc[p])
            with cgutils.for_range_slice(builder, n_main, n_in, idx(1)) as (k, _):  # the tail, in order
                wk = load_w(builder.gep(w_row, [k]))
                for p in range(P):
                    xk = builder.load(builder.gep(x_rows[p], [k]))
                    builder.store(builder.call(fma_s, [wk, xk, builder.load(tail[p])]), tail[p])
            sums = _halve_groups(builder, [builder.load(v) for v in acc], W)  # (P,): product p's sum in lane p
            for p in range(P):
                out = builder.gep(ya.data, [builder.add(builder.mul(builder.add(j_, idx(p)), n_out), o_)])
                lane = builder.extract_element(sums, ir.IntType(32)(p))
                builder.store(builder.fadd(lane, builder.load(tail[p])), out)
            return context.get_dummy_value()

        return types.void(w, x, y, o, j), codegen

    return dots


dots4, dots2, dots1 = _dot_rows(4), _dot_rows(2), _dot_rows(1)


@numba.njit(cache=True, boundscheck=False, nogil=True)
def _rows_block(w, x, y, lo, hi):  # y[:, lo:hi] = x w[lo:hi]^T; each weight row read once, from L1 after
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
def rows_times_weight(w, x, y):  # y[j, o] = w[o] . x[j]; each weight row read once, from L1 after
    n_out, block = w.shape[0], 32
    for b in numba.prange((n_out + block - 1) // block):
        _rows_block(w, x, y, b * block, min(n_out, b * block + block))
