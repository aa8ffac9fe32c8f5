"""The softmax's pieces of the invariant attention, in vector lanes: the max of a row (`_row_max`, also the block
maxima of `_rowstats_ir`), the exp of the shifted, scaled scores (`_exp_shifted`), and the sums of up to four rows'
exps side by side (`_sum4`), each in the order a plain scalar loop would take.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from specviz.kernels._rowkernel_ir import W_LANES


@intrinsic
def _row_max(typingctx, a, i, n):
    """max(a[i, :n]) of a C-contiguous fp32 array as a scan with `>` would find it (NaNs skipped, -inf for none):
    sixteen running maxima side by side, then theirs, then the last elements. A max is exact, so only a tie of
    +0 and -0 could pick another of the two; the softmax subtracts the max, and x - 0 and x + 0 are the same bits
    for every x but -0, whose exp is 1 either way."""

    def codegen(context, builder, sig, args):
        f32, W = ir.FloatType(), W_LANES
        vec = ir.VectorType(f32, W)
        arr = context.make_array(sig.args[0])(context, builder, args[0])
        i_, n_ = (context.cast(builder, a_, t, types.intp) for a_, t in zip(args[1:], sig.args[1:]))
        idx = n_.type
        cols = cgutils.unpack_tuple(builder, arr.shape, 2)[1]
        row = builder.gep(arr.data, [builder.mul(i_, cols)])
        best = cgutils.alloca_once_value(builder, ir.Constant(vec, [float("-inf")] * W))
        n_main = builder.mul(builder.sdiv(n_, idx(W)), idx(W))
        with cgutils.for_range_slice(builder, idx(0), n_main, idx(W)) as (c, _):
            v = builder.load(builder.bitcast(builder.gep(row, [c]), vec.as_pointer()), align=4)
            m = builder.load(best)
            builder.store(builder.select(builder.fcmp_ordered(">", v, m), v, m), best)
        out = cgutils.alloca_once_value(builder, f32(float("-inf")))
        lanes = builder.load(best)
        for lane in range(W):
            x, m = builder.extract_element(lanes, ir.IntType(32)(lane)), builder.load(out)
            builder.store(builder.select(builder.fcmp_ordered(">", x, m), x, m), out)
        with cgutils.for_range_slice(builder, n_main, n_, idx(1)) as (c, _):
            x, m = builder.load(builder.gep(row, [c])), builder.load(out)
            builder.store(builder.select(builder.fcmp_ordered(">", x, m), x, m), out)
        return builder.load(out)

    return types.float32(a, i, n), codegen


_LOG2E, _LN2_HI, _LN2_LO = np.float32(1.4426950408889634), np.float32(0.693359375), np.float32(-2.12194440e-4)
_EXP_C = tuple(np.float32(1.0 / f) for f in (5040.0, 720.0, 120.0, 24.0, 6.0, 2.0, 1.0, 1.0))


@intrinsic
def _exp_shifted(typingctx, s, e, i, C, scale, m):
    """e[i, c] = exp(s[i, c] scale - m) for c < C (s[i, c] scale <= m), s and e (rows, *) C-contiguous fp32: with
    x = s scale - m, 2^t e^r, t = round(x log2 e), r = x - t ln 2 (two parts), e^r by its degree-7 Taylor
    polynomial (relative error under 1e-7 for |r| <= ln 2 / 2) and 2^t added to the exponent bits. Sixteen
    elements a vector step, then one at a time, every element the same sequence of plain float32 operations (no
    fma, no reassociation), so its value is the same in a vector lane or in the tail."""

    def codegen(context, builder, sig, args):
        f32, i32, W = ir.FloatType(), ir.IntType(32), W_LANES
        sa, ea = (context.make_array(t)(context, builder, a) for t, a in zip(sig.args[:2], args[:2]))
        i_, C_ = (context.cast(builder, a, t, types.intp) for a, t in zip(args[2:4], sig.args[2:4]))
        scale_, m_ = args[4], args[5]
        idx = C_.type
        s_row = builder.gep(sa.data, [builder.mul(i_, cgutils.unpack_tuple(builder, sa.shape, 2)[1])])
        e_row = builder.gep(ea.data, [builder.mul(i_, cgutils.unpack_tuple(builder, ea.shape, 2)[1])])

        def block(c, lanes):
            vec = ir.VectorType(f32, lanes) if lanes > 1 else f32
            ivec = ir.VectorType(i32, lanes) if lanes > 1 else i32

            def const(x, t=vec, base=f32):
                return ir.Constant(t, [base(float(x) if base is f32 else int(x))] * lanes) if lanes > 1 else base(x)

            def splat(v):
                if lanes == 1:
                    return v
                out = ir.Constant(vec, ir.Undefined)
                for lane in range(lanes):
                    out = builder.insert_element(out, v, i32(lane))
                return out

            ptr = builder.gep(s_row, [c])
            x = builder.load(builder.bitcast(ptr, vec.as_pointer()) if lanes > 1 else ptr, align=4)
            x = builder.fsub(builder.fmul(x, splat(scale_)), splat(m_))
            y = builder.select(builder.fcmp_ordered(">", x, const(-87.0)), x, const(-87.0))
            floor = cgutils.get_or_insert_function(
                builder.module,
                ir.FunctionType(vec, [vec]),
                f"llvm.floor.v{lanes}f32" if lanes > 1 else "llvm.floor.f32",
            )
            k = builder.call(floor, [builder.fadd(builder.fmul(y, const(_LOG2E)), const(0.5))])
            r = builder.fsub(builder.fsub(y, builder.fmul(k, const(_LN2_HI))), builder.fmul(k, const(_LN2_LO)))
            p = const(_EXP_C[0])
            for a in _EXP_C[1:]:
                p = builder.fadd(builder.fmul(p, r), const(a))
            two_t = builder.shl(builder.fptosi(k, ivec), const(23, ivec, i32))
            out = builder.bitcast(builder.add(builder.bitcast(p, ivec), two_t), vec)
            dst = builder.gep(e_row, [c])
            builder.store(out, builder.bitcast(dst, vec.as_pointer()) if lanes > 1 else dst, align=4)

        n_main = builder.mul(builder.sdiv(C_, idx(W)), idx(W))
        with cgutils.for_range_slice(builder, idx(0), n_main, idx(W)) as (c, _):
            block(c, W)
        with cgutils.for_range_slice(builder, n_main, C_, idx(1)) as (c, _):
            block(c, 1)
        return context.get_dummy_value()

    return types.void(s, e, i, C, scale, m), codegen


@numba.njit(cache=True, boundscheck=False, nogil=True)
def _sum4(e, total, i0, i1, C):
    """total[i] = e[i, 0] + e[i, 1] + ... + e[i, C - 1], in that order, for i0 <= i < i1 <= i0 + 4: the rows' chains
    side by side, each in a register."""
    t0 = t1 = t2 = t3 = np.float32(0.0)
    r1, r2, r3 = min(i0 + 1, i1 - 1), min(i0 + 2, i1 - 1), min(i0 + 3, i1 - 1)  # fewer rows: repeats, not stored
    for c in range(C):
        t0 += e[i0, c]
        t1 += e[r1, c]
        t2 += e[r2, c]
        t3 += e[r3, c]
    sums = (t0, t1, t2, t3)
    for i in range(i1 - i0):
        total[i0 + i] = sums[i]
