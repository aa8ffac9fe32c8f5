"""The invariant attention's code (`attention.rows_attention` imports it where numba is installed): `attend`, the
attention of every (query head, query) pair in one fixed order, and its pieces: the scores as the row kernel's dot
products (`_rowkernel_ir`), sixteen keys at a time; the max, the exp and the softmax's sums in vector lanes
(`_softmax_ir`); the weighted sums of value rows; the rounding back to bf16.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from specviz.kernels._rowkernel_ir import VF, W_LANES, _fma, _lanes, _product_args, _rows_block, _widening_loads
from specviz.kernels._softmax_ir import _exp_shifted, _row_max, _sum4


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
