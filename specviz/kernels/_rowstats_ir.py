"""The distribution summaries' code (`rowstats` imports it where numba is installed): `summarize`, the top k entries
and the entropy of chosen rows of a probability matrix in one pass over each row, and its pieces: a float's bits
and back, a vectorizable log.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from specviz.kernels._softmax_ir import _row_max

BLOCK = 128  # entries a block: the top k's candidates are the blocks whose maximum beats the k-th best so far
_SQRT_HALF_BITS = 0x3F3504F3  # float32 bits of sqrt(1/2): the mantissa is reduced to [sqrt(1/2), sqrt(2))
_TINY_BITS = 0x0DA24260  # float32 bits of 1e-30: smaller entries count 0 in the entropy (0 log 0 = 0)
_LN2 = np.float32(0.6931471805599453)


@intrinsic
def _bits(typingctx, x):
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.int32(types.float32), codegen


@intrinsic
def _float(typingctx, b):
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.int32), codegen


@numba.njit(cache=True, inline="always", error_model="numpy")
def _log(x):
    """ln x for a normal positive float32: x = 2^e m with m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh(s) with
    s = (m - 1) / (m + 1), |s| <= 0.172, by its series to s^9 (relative error under 1e-7). No call, no branch: a
    loop of them vectorizes."""
    b = _bits(x)
    e = (b - np.int32(_SQRT_HALF_BITS)) >> np.int32(23)
    m = _float(b - (e << np.int32(23)))
    s = (m - np.float32(1.0)) / (m + np.float32(1.0))
    s2 = s * s
    poly = np.float32(1.0) + s2 * (
        np.float32(1 / 3) + s2 * (np.float32(1 / 5) + s2 * (np.float32(1 / 7) + s2 * np.float32(1 / 9)))
    )
    return np.float32(e) * _LN2 + np.float32(2.0) * s * poly


@numba.njit(cache=True, boundscheck=False, nogil=True, fastmath=True, error_model="numpy")
def _plogp(p):
    """sum of p ln p over row p (entries under 1e-30 count 0), in vector lanes."""
    acc = np.float32(0.0)
    for j in range(p.shape[0]):
        x = p[j]
        t = x * _log(x)
        acc += t if _bits(x) >= np.int32(_TINY_BITS) else np.float32(0.0)
    return acc


@numba.njit(cache=True, boundscheck=False, nogil=True)
def _block_max(p, bmax):
    """bmax[b] = the largest entry of block b of row p: whole blocks sixteen lanes at a time (`_row_max`)."""
    whole = p.shape[0] // BLOCK
    blocks = p[: whole * BLOCK].reshape(whole, BLOCK)
    for b in range(whole):
        bmax[b] = _row_max(blocks, b, BLOCK)
    if whole < bmax.shape[0]:
        m = np.float32(-np.inf)
        for j in range(whole * BLOCK, p.shape[0]):
            if p[j] > m:
                m = p[j]
        bmax[whole] = m


@numba.njit(cache=True, boundscheck=False, nogil=True)
def _top(p, bmax, vals, ids):
    """vals, ids: row p's k largest entries, largest first (the earlier index first among equal ones): only the
    blocks whose maximum beats the k-th best so far are read again."""
    k = vals.shape[0]
    vals[:] = -np.inf
    ids[:] = -1
    for b in range(bmax.shape[0]):
        if not bmax[b] > vals[k - 1]:
            continue
        for j in range(b * BLOCK, min(p.shape[0], b * BLOCK + BLOCK)):
            x = p[j]
            if x > vals[k - 1]:
                i = k - 1
                while i > 0 and x > vals[i - 1]:
                    vals[i] = vals[i - 1]
                    ids[i] = ids[i - 1]
                    i -= 1
                vals[i] = x
                ids[i] = j


@numba.njit(parallel=True, cache=True, boundscheck=False, nogil=True)
def summarize(probs, rows, vals, ids, entropy):
    """For each r, of row rows[r] of probs (N, V) fp32, C-contiguous: its k = vals.shape[1] largest entries
    (vals[r], their indices ids[r]) and, where `entropy` has a place for it (len(rows) of them, else none), its
    entropy in nats, -sum p ln p (entropy[r], >= 0)."""
    nb = (probs.shape[1] + BLOCK - 1) // BLOCK
    for r in numba.prange(rows.shape[0]):
        p = probs[rows[r]]
        bmax = np.empty(nb, np.float32)
        _block_max(p, bmax)
        if entropy.shape[0]:
            entropy[r] = max(np.float32(0.0), -_plogp(p))
        _top(p, bmax, vals[r], ids[r])


@numba.njit(cache=True, boundscheck=False, nogil=True)
def _first_nan(p):
    """The index of row p's first NaN, or -1: its bits OR-ed a vector at a time, then found one by one."""
    bad = np.int32(0)
    for j in range(p.shape[0]):
        bad |= np.int32((_bits(p[j]) & np.int32(0x7FFFFFFF)) > np.int32(0x7F800000))
    if bad == 0:
        return -1
    j = 0
    while p[j] == p[j]:
        j += 1
    return j


@numba.njit(parallel=True, cache=True, boundscheck=False, nogil=True)
def argmax(x, out):
    """out[i] = torch.argmax(x[i]) for x (n, V) fp32, C-contiguous, V > 0: the first index of the row's largest
    entry, or of its first NaN where it has one. The blocks' maxima sixteen lanes at a time (`_block_max`), then the
    first block holding the largest is read again for its first entry equal to it (-0 equals +0, as torch compares)."""
    nb = (x.shape[1] + BLOCK - 1) // BLOCK
    for i in numba.prange(x.shape[0]):
        p = x[i]
        j = _first_nan(p)
        if j < 0:
            bmax = np.empty(nb, np.float32)
            _block_max(p, bmax)
            best = 0
            for b in range(1, nb):
                if bmax[b] > bmax[best]:
                    best = b
            m = bmax[best]
            j = best * BLOCK
            while not p[j] == m:  # a row of -inf: m = -inf, found at 0
                j += 1
        out[i] = j
