"""The row kernel's code (`rowkernel` imports it where numba is installed): y[j, o] = w[o] . x[j] for fp32 C-contiguous
arrays, each weight row read once, in the fixed summation order `rowkernel`'s docstring declares.
"""
from __future__ import annotations

import numba
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

VF, IC = 8, 2                     # the summation order (rowkernel's docstring): IC accumulators of VF lanes per product


def _dot_rows(P: int):
    """A numba intrinsic dots(w, x, y, o, j): y[j + p, o] = w[o] . x[j + p] for p < P, in the fixed order.

    Written in LLVM IR with explicit vectors and fma, with no fast-math flags, so the compiler may
    schedule it freely but cannot reorder a sum: the P products of one call interleave for instruction-level
    parallelism, and each is the same sequence of roundings as when it runs alone (C-contiguous fp32 arrays).
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
            acc = [[cgutils.alloca_once_value(builder, ir.Constant(vec, [0.0] * VF)) for _ in range(IC)] for _ in range(P)]
            tail = [cgutils.alloca_once_value(builder, f32(0.0)) for _ in range(P)]
            n_main = builder.mul(builder.sdiv(n_in, idx(VF * IC)), idx(VF * IC))
            with cgutils.for_range_slice(builder, idx(0), n_main, idx(VF * IC)) as (k0, _):
                for u in range(IC):                      # accumulator u takes lanes k0 + 8u .. k0 + 8u + 7
                    k = builder.add(k0, idx(u * VF))
                    wv = builder.load(builder.bitcast(builder.gep(w_row, [k]), vec.as_pointer()), align=4)
                    for p in range(P):
                        xv = builder.load(builder.bitcast(builder.gep(x_rows[p], [k]), vec.as_pointer()), align=4)
                        builder.store(builder.call(fma_v, [wv, xv, builder.load(acc[p][u])]), acc[p][u])
            with cgutils.for_range_slice(builder, n_main, n_in, idx(1)) as (k, _):      # the tail, in order
                wk = builder.load(builder.gep(w_row, [k]))
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


@numba.njit(parallel=True, cache=True, boundscheck=False, nogil=True)
def rows_times_weight(w, x, y):              # y[j, o] = w[o] . x[j]; each weight row read once, from L1 after
    n_out, rows, block = w.shape[0], x.shape[0], 32
    for b in numba.prange((n_out + block - 1) // block):
        for o in range(b * block, min(n_out, b * block + block)):
            j = 0
            while j + 4 <= rows:
                dots4(w, x, y, o, j)
                j += 4
            if j + 2 <= rows:
                dots2(w, x, y, o, j)
                j += 2
            if j < rows:
                dots1(w, x, y, o, j)
