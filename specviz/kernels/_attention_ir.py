"""The invariant attention's code (`attention.rows_attention` imports it where numba is installed): `attend`, the
attention of every (query head, query) pair in one fixed order, and its pieces: the scores as the row kernel's dot
products (`_rowkernel_ir`), sixteen keys at a time; the max, the exp and the softmax's sums in vector lanes; the
weighted sums of value rows; the rounding back to bf16.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from specviz.kernels._rowkernel_ir import VF, W_LANES, _fma, _lanes, _product_args, _rows_block, _widening_loads


def _sum_pairs(builder, x, y, keys: int):
    """One step of the declared lane sum for several products at once: x and y hold `keys` products' partial sums
    each, w = 16 / keys lanes a product, side by side; the result holds those 2 x keys products, x's first, each with
    w / 2 lanes, lane i the sum of its lanes i and i + w / 2 (the step `_halve_groups` takes for one product)."""
    w = W_LANES // keys
    first = [b * W_LANES + g * w + i for b in range(2) for g in range(keys) for i in range(w // 2)]
    return builder.fadd(_lanes(builder, x, y, first), _lanes(builder, x, y, [i + w // 2 for i in first]))


def _dot_keys(P: int, chunks: int):
    """A numba intrinsic kdots(w, x, y, o, j): y[j + p, o + r] = w[o + r] . x[j + p] for r < 16 and p < P, for an
    input dimension of 16 x `chunks` (unrolled): the same products, each the same sequence of roundings, as `dots`
    gives one weight row at a time (its accumulator vector, then its lanes summed by halves, then + 0, the empty
    tail). Sixteen rows of w (an attention's keys) make one vector of sums: the lane sums of every two products
    run as one vector step (`_sum_pairs`), as soon as both are ready, so the sixteen sums cost 15 additions and
    the 16 results are stored as one vector, where `dots` spends a reduction and a store on each."""
    f32, W = ir.FloatType(), W_LANES
    wide = ir.VectorType(f32, W)

    @intrinsic
    def kdots(typingctx, w, x, y, o, j):
        def codegen(context, builder, sig, args):
            wa, ya, o_, j_, n_in, n_out, x_rows = _product_args(context, builder, sig, args, P)
            idx = n_in.type
            fma_v = _fma(builder, wide)
            load_wv = _widening_loads(builder, sig.args[0].dtype != types.float32, W)[0]
            zero = ir.Constant(wide, [0.0] * W)
            stacks = [[] for _ in range(P)]  # per product row: (keys, vector) partial sums, a binary counter
            for r in range(W):
                w_row = builder.gep(wa.data, [builder.mul(builder.add(o_, idx(r)), n_in)])
                acc = [zero] * P
                for c in range(chunks):  # unrolled: the input dimension is 16 x chunks
                    wv = load_wv(builder.gep(w_row, [idx(c * W)]))
                    for p in range(P):
                        xv = builder.load(
                            builder.bitcast(builder.gep(x_rows[p], [idx(c * W)]), wide.as_pointer()), align=4
                        )
                        acc[p] = builder.call(fma_v, [wv, xv, acc[p]])
                for p in range(P):
                    stack = stacks[p]
                    stack.append((1, acc[p]))
                    while len(stack) > 1 and stack[-1][0] == stack[-2][0]:
                        (keys, b), (_, a) = stack.pop(), stack.pop()
                        stack.append((2 * keys, _sum_pairs(builder, a, b, keys)))
            for p in range(P):
                sums = builder.fadd(stacks[p][0][1], zero)  # + the empty tail, as `dots` adds it
                out = builder.gep(ya.data, [builder.add(builder.mul(builder.add(j_, idx(p)), n_out), o_)])
                builder.store(sums, builder.bitcast(out, wide.as_pointer()), align=4)
            return context.get_dummy_value()

        return types.void(w, x, y, o, j), codegen

    return kdots


kdots2_64, kdots1_64 = _dot_keys(2, 4), _dot_keys(1, 4)  # heads 64 wide (16 x 4)
kdots2_128, kdots1_128 = _dot_keys(2, 8), _dot_keys(1, 8)


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


@numba.njit(cache=True, boundscheck=False, nogil=True)
def _scores(k, x, y, L):
    """y[:, :L] = x k[:L]^T, each product the bits `_rows_block` gives it: two query rows and sixteen keys a step
    (`kdots`) where the head is 64 or 128 wide (two rows measured faster than four, which spill registers), the
    keys past the last sixteen and other widths one key at a time."""
    rows, d = x.shape
    blocks = L // W_LANES * W_LANES if d == 64 or d == 128 else 0
    j = 0
    while j < rows:
        two = j + 2 <= rows
        for o in range(0, blocks, W_LANES):
            if d == 64:
                if two:
                    kdots2_64(k, x, y, o, j)
                else:
                    kdots1_64(k, x, y, o, j)
            elif two:
                kdots2_128(k, x, y, o, j)
            else:
                kdots1_128(k, x, y, o, j)
        j += 2 if two else 1
    _rows_block(k, x, y, blocks, L)


def _weighted(Q: int):
    """A numba intrinsic sums(acc, v, rows, e, c0, c1): for q < Q and every column t, acc[q, t] += e[q, c] v[rows[c], t]
    for c = c0 .. c1 - 1, in increasing c, one fma each: the weighted sums of value rows, one per query. acc (>= Q, d)
    fp32 and e (>= Q, *) fp32, C-contiguous; v (R, d) fp32 or bf16 bits (int16), C-contiguous; rows int64. A
    column's sum is one chain of fma, continued from acc, so summing [0, c) then [c, C) gives the bits of [0, C), and
    the Q rows' chains share each value row's load (Q queries that see the same keys). The sums of a block of NB
    vectors of t stay in registers across the whole c loop; a t's sum is the same chain of fma in any block."""

    @intrinsic
    def sums(typingctx, acc, v, rows, e, c0, c1):
        def codegen(context, builder, sig, args):
            f32, W, NB = ir.FloatType(), W_LANES, 4
            aa, va, ra, ea = (context.make_array(t)(context, builder, a) for t, a in zip(sig.args[:4], args[:4]))
            lo, hi = (context.cast(builder, a, t, types.intp) for a, t in zip(args[4:], sig.args[4:]))
            d = cgutils.unpack_tuple(builder, va.shape, 2)[1]
            e_len = cgutils.unpack_tuple(builder, ea.shape, 2)[1]
            idx = d.type
            acc_rows = [builder.gep(aa.data, [builder.mul(idx(q), d)]) for q in range(Q)]
            e_rows = [builder.gep(ea.data, [builder.mul(idx(q), e_len)]) for q in range(Q)]
            bf16 = sig.args[1].dtype != types.float32

            def block(t0, width, nb):  # acc[:Q, t0 : t0 + nb width] over c in [lo, hi), Q x nb sums in registers
                vec = ir.VectorType(f32, width) if width > 1 else f32
                load = _widening_loads(builder, bf16, width)[0 if width > 1 else 1]
                fma = _fma(builder, vec)

                def at(q, u):
                    ptr = builder.gep(acc_rows[q], [builder.add(t0, idx(u * width))])
                    return builder.bitcast(ptr, vec.as_pointer()) if width > 1 else ptr

                total = [
                    [cgutils.alloca_once_value(builder, builder.load(at(q, u), align=4)) for u in range(nb)]
                    for q in range(Q)
                ]
                with cgutils.for_range_slice(builder, lo, hi, idx(1)) as (c, _):
                    row = builder.gep(va.data, [builder.mul(builder.load(builder.gep(ra.data, [c])), d)])
                    vals = [load(builder.gep(row, [builder.add(t0, idx(u * width))])) for u in range(nb)]
                    for q in range(Q):
                        p = builder.load(builder.gep(e_rows[q], [c]))
                        if width > 1:
                            pv = ir.Constant(vec, ir.Undefined)
                            for lane in range(width):
                                pv = builder.insert_element(pv, p, ir.IntType(32)(lane))
                        else:
                            pv = p
                        for u in range(nb):
                            builder.store(builder.call(fma, [pv, vals[u], builder.load(total[q][u])]), total[q][u])
                for q in range(Q):
                    for u in range(nb):
                        builder.store(builder.load(total[q][u]), at(q, u), align=4)

            start = idx(0)
            for width, nb in ((W, NB), (W, 1), (VF, 1), (1, 1)):  # blocks of NB x 16, 16, 8 columns, then one at a time
                end = builder.mul(builder.sdiv(d, idx(width * nb)), idx(width * nb)) if width * nb > 1 else d
                with cgutils.for_range_slice(builder, start, end, idx(width * nb)) as (t0, _):
                    block(t0, width, nb)
                start = end
            return context.get_dummy_value()

        return types.void(acc, v, rows, e, c0, c1), codegen

    return sums


sums4, sums2, sums1 = _weighted(4), _weighted(2), _weighted(1)


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


def _to_f32(src, dst):
    """dst[:] = src (2-D, any strides) as fp32: bf16 bits (int16) widened by a 16-bit shift, fp32 copied."""


@overload(_to_f32)
def _to_f32_impl(src, dst):
    if src.dtype == types.int16:

        def widen(src, dst):
            bits = dst.view(np.int32)
            for a in range(src.shape[0]):
                for b in range(src.shape[1]):
                    bits[a, b] = np.int32(src[a, b]) << 16

        return widen
    return _copy


def _store(src, dst):
    """dst[:] = src (1-D fp32) in dst's dtype: bf16 bits (int16) rounded to nearest even, as torch rounds, or fp32."""


@overload(_store)
def _store_impl(src, dst):
    if dst.dtype == types.int16:

        def narrow(src, dst):
            bits = src.view(np.int32)
            for t in range(src.shape[0]):
                u = np.int64(bits[t]) & 0xFFFFFFFF
                dst[t] = np.int16(((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF)

        return narrow
    return _copy


def _copy(src, dst):  # the fp32 case of both
    dst[:] = src


@numba.njit(cache=True, boundscheck=False, nogil=True)
def visible(m, blocked, allow):
    """allow = m > blocked for an additive mask m (n, L) fp32, any strides; False where m holds anything but 0 and
    values <= blocked (a bias, not a mask)."""
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            allow[i, j] = m[i, j] > blocked
            if allow[i, j] and m[i, j] != 0:
                return False
    return True


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


@numba.njit(parallel=True, cache=True, boundscheck=False, nogil=True)
def attend(q, k, v, cap, L, allow, scale, out):
    """Attention of every (query head, query) pair on its own, in one fixed order: out[i, h] = sum_j p_j v_h'[j] over
    the keys j that query i may see (`allow[i, j]`), p the softmax of scale * q[h, i] . k_h'[j], where
    h' = h // (query heads per key/value head) and k_h' = k[h' cap : h' cap + L] (v the same). q (Hq, n, d), any
    strides, and out (n, Hq, d): fp32 or bf16 bits (int16), the model's dtype; k and v (Hkv cap, d), C-contiguous,
    fp32 or bf16 bits, key/value head h' in rows h' cap ... Everything inside is fp32, rounded once into out. The
    dot products are the row kernel's (each in the declared order, whatever else its call holds; sixteen keys' sums
    formed side by side, `_scores`). The visible keys
    are then gathered in increasing j, and the max, the exp (`_exp_shifted`), the softmax's sum and the weighted sum
    of values (`sums1`: one fma chain per column) run in that order, so a query's output depends neither on the
    other queries of the call nor on the keys it cannot see, nor on where in the cache its keys sit (a tree's nodes
    and the same tokens in a chain give the same bits). Work is shared only where that changes no rounding: over the
    keys every query sees (a verify's cached prefix) the queries' softmax sums run side by side and up to four
    queries' weighted sums read each value row once, each chain then continued over the query's own keys; a max is
    the same whatever order finds it (`_row_max`)."""
    Hq, n, d = q.shape
    G = Hq // (k.shape[0] // cap)
    shared = L  # keys 0 .. shared - 1: visible to every query (a verify's whole cached prefix)
    for i in range(n):
        for j in range(shared):
            if not allow[i, j]:
                shared = j
                break
    keys = np.arange(L)  # the shared keys' rows: key c is row c
    for h in numba.prange(Hq):
        base = (h // G) * cap
        kh, vh = k[base : base + L], v[base : base + L]
        qh, sh = np.empty((n, d), np.float32), np.empty((n, L), np.float32)
        _to_f32(q[h], qh)
        _scores(kh, qh, sh, L)
        rows = np.empty((n, L), np.int64)
        e = np.empty((n, L), np.float32)
        count = np.empty(n, np.int64)
        total = np.zeros(n, np.float32)
        for i in range(n):
            # max of the raw scores (scaling after is exact: monotone): first of the keys every query sees, in place
            m = _row_max(sh, i, shared)
            C = shared
            for j in range(shared, L):  # then its own, gathered in increasing j, moved up in place (C <= j)
                if allow[i, j]:
                    rows[i, C] = j
                    sh[i, C] = sh[i, j]
                    if sh[i, C] > m:
                        m = sh[i, C]
                    C += 1
            _exp_shifted(sh, e, i, C, scale, m * scale)
            count[i] = C
        # the softmax's sums, each in increasing c: over the shared keys four queries' side by side (independent
        # chains in registers)
        lo = shared if n > 1 else 0
        i = 0
        while i < n:
            _sum4(e, total, i, min(n, i + 4), lo)
            i += 4
        for i in range(n):
            t = total[i]
            for c in range(lo, count[i]):
                t += e[i, c]
            total[i] = t
        acc = np.zeros((n, d), np.float32)
        i = 0  # the shared keys: the queries' sums side by side, one load of each value row for up to 4
        while i + 4 <= n:
            sums4(acc[i:], vh, keys, e[i:], 0, shared)
            i += 4
        if i + 2 <= n:
            sums2(acc[i:], vh, keys, e[i:], 0, shared)
            i += 2
        if i < n:
            sums1(acc[i:], vh, keys, e[i:], 0, shared)
        for i in range(n):  # then each query's own keys, its chains continued
            sums1(acc[i:], vh, rows[i], e[i:], shared, count[i])
            for t in range(d):
                acc[i, t] = acc[i, t] / total[i]
            _store(acc[i], out[i, h])
