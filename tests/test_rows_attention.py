"""The pieces of the batch-invariant attention (`rows_attention`, `_attention_ir.attend`): exp, weighted sums,
rounding, masks, and a query's output where its keys sit anywhere in the cache."""

import numpy as np
import pytest
import torch

numba = pytest.importorskip("numba")
from specviz import kernels  # noqa: E402
from specviz.kernels import _attention_ir as ir  # noqa: E402
from specviz.kernels import _softmax_ir as softmax_ir  # noqa: E402
from specviz.kernels._rowkernel_ir import _rows_block  # noqa: E402
from specviz.kernels.attention import _allowed  # noqa: E402


@numba.njit
def weighted_rows(acc, v, rows, e, C):  # one query's chains from zero; the intrinsic runs inside compiled code only
    acc[:] = 0.0
    ir.sums1(acc.reshape(1, acc.shape[0]), v, rows, e[:C].reshape(1, C), 0, C)


@numba.njit
def exp_rows(x, e, C):  # e[c] = exp(x[c]), c < C: the softmax's exp unscaled, unshifted (x 1 - 0 is x)
    softmax_ir._exp_shifted(x.reshape(1, x.shape[0]), e.reshape(1, e.shape[0]), 0, C, np.float32(1.0), np.float32(0.0))


@numba.njit
def store(src, dst):
    ir._store(src, dst)


def test_exp_is_accurate_and_the_same_in_any_lane():
    """Relative error under 2e-7 against float64 on [-87, 0]; an element's bits do not depend on the array's length
    or on where it sits in it (vector body or scalar tail)."""
    x = -np.random.default_rng(0).random(1003).astype(np.float32) * 87
    x[:3] = (0.0, -1e-7, -87.0)
    e = np.empty_like(x)
    exp_rows(x, e, len(x))
    assert np.abs(e / np.exp(x.astype(np.float64)) - 1).max() < 2e-7
    for lo, n in ((1, 17), (5, 3), (0, 1), (7, 900)):
        part = np.empty(n, np.float32)
        exp_rows(x[lo : lo + n].copy(), part, n)
        assert np.array_equal(part, e[lo : lo + n])


@numba.njit
def exp_shifted(s, e, i, C, scale, m):
    softmax_ir._exp_shifted(s, e, i, C, scale, m)


def test_the_softmax_exp_scales_and_shifts_each_score_first():
    """exp(s scale - m) of a row of scores: the bits of the exp of s scale - m rounded in float32 first."""
    g = np.random.default_rng(4)
    s = (g.standard_normal((3, 50)) * 4).astype(np.float32)
    scale, m = np.float32(0.125), np.float32(s[1].max() * np.float32(0.125))
    e = np.full((3, 50), -1.0, np.float32)
    exp_shifted(s, e, 1, 37, scale, m)
    ref = np.empty(37, np.float32)
    exp_rows(s[1, :37] * scale - m, ref, 37)
    assert np.array_equal(e[1, :37], ref) and (e[1, 37:] == -1).all() and (e[[0, 2]] == -1).all()


@pytest.mark.parametrize("bf16", [False, True])
def test_weighted_rows_is_a_fixed_fma_chain_per_column(bf16):
    """acc[t] = sum_c e[c] v[rows[c], t]: close to float64, and a column's bits are the same whatever the width
    around it (register blocks of 64, 8 and 1 columns), in bf16 as over its exact fp32 widening."""
    g = np.random.default_rng(1)
    v32 = torch.from_numpy(g.standard_normal((50, 75)).astype(np.float32)).bfloat16().float().numpy()
    rows, e = np.array([3, 9, 10, 41, 0, 7], np.int64), g.random(6).astype(np.float32)
    v = torch.from_numpy(v32).bfloat16().view(torch.int16).numpy() if bf16 else v32
    acc = np.empty(75, np.float32)
    weighted_rows(acc, v, rows, e, len(rows))
    ref = (e[:, None].astype(np.float64) * v32[rows].astype(np.float64)).sum(0)
    assert np.abs(acc - ref).max() < 1e-5
    for w in (64, 8, 3, 1):
        part = np.empty(w, np.float32)
        weighted_rows(part, np.ascontiguousarray(v[:, :w]), rows, e, len(rows))
        assert np.array_equal(part, acc[:w])
    weighted_rows(acc[:8], np.ascontiguousarray(v[:, :8]), rows, e, 0)
    assert not acc[:8].any()  # no rows: zeros


@numba.njit
def shared_then_own(acc, v, rows, e, shared, counts):  # attend's order: the shared keys side by side, then each
    i, n = 0, acc.shape[0]
    while i + 4 <= n:
        ir.sums4(acc[i:], v, rows[i], e[i:], 0, shared)
        i += 4
    if i + 2 <= n:
        ir.sums2(acc[i:], v, rows[i], e[i:], 0, shared)
        i += 2
    if i < n:
        ir.sums1(acc[i:], v, rows[i], e[i:], 0, shared)
    for i in range(n):
        ir.sums1(acc[i:], v, rows[i], e[i:], shared, counts[i])


@pytest.mark.parametrize("bf16", [False, True])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_weighted_sums_side_by_side_keep_each_querys_bits(bf16, n):
    """Up to four queries summing the keys they share in one pass, each chain then continued over its own keys, give
    every query the bits of its sum alone (`weighted_rows` over all its keys in order)."""
    g = np.random.default_rng(n)
    d, L, shared = 70, 40, 25
    v32 = torch.from_numpy(g.standard_normal((L, d)).astype(np.float32)).bfloat16().float().numpy()
    v = torch.from_numpy(v32).bfloat16().view(torch.int16).numpy() if bf16 else v32
    rows = np.zeros((n, L), np.int64)
    counts = np.zeros(n, np.int64)
    for i in range(n):
        own = np.sort(g.choice(np.arange(shared, L), size=int(g.integers(0, L - shared)), replace=False))
        rows[i, : shared + len(own)] = np.concatenate([np.arange(shared), own])
        counts[i] = shared + len(own)
    e = g.random((n, L)).astype(np.float32)
    acc = np.zeros((n, d), np.float32)
    shared_then_own(acc, v, rows, e, shared, counts)
    for i in range(n):
        alone = np.empty(d, np.float32)
        weighted_rows(alone, v, rows[i], e[i], counts[i])
        assert np.array_equal(acc[i].view(np.int32), alone.view(np.int32))


@numba.njit
def row_max(a, i, n):
    return softmax_ir._row_max(a, i, n)


def test_row_max_is_the_scans_max():
    """Sixteen running maxima side by side give the max a scan finds, NaNs skipped, -inf where there is none."""
    g = np.random.default_rng(2)
    a = g.standard_normal((3, 83)).astype(np.float32)
    a[1, [0, 20, 70]] = np.nan
    a[2, :] = -np.inf
    for i in range(3):
        for n in (0, 1, 15, 16, 17, 40, 83):
            scan = np.float32(-np.inf)
            for x in a[i, :n]:
                scan = x if x > scan else scan
            assert row_max(a, i, n) == scan


def test_softmax_sums_side_by_side_are_each_rows_chain():
    g = np.random.default_rng(3)
    e = g.random((7, 50)).astype(np.float32)
    for i0, i1, C in ((0, 4, 50), (4, 7, 33), (2, 3, 1), (0, 2, 0)):
        total = np.full(7, -1.0, np.float32)
        softmax_ir._sum4(e, total, i0, i1, C)
        for i in range(i0, i1):
            chain = np.float32(0.0)
            for c in range(C):
                chain = np.float32(chain + e[i, c])
            assert total[i] == chain
        assert (total[:i0] == -1).all() and (total[i1:] == -1).all()  # rows outside i0 .. i1 untouched


@pytest.mark.parametrize("bf16", [False, True])
@pytest.mark.parametrize("d", [64, 128, 48])
def test_scores_sixteen_keys_at_a_time_keep_each_products_bits(bf16, d):
    """`_scores` (sixteen keys a step where the head is 64 or 128 wide, the rest one key at a time) gives every score
    the bits of the row kernel's product alone, for any number of queries and keys."""
    g = np.random.default_rng(d)
    k32 = torch.from_numpy(g.standard_normal((83, d)).astype(np.float32)).bfloat16().float().numpy()
    k = torch.from_numpy(k32).bfloat16().view(torch.int16).numpy() if bf16 else k32
    for n in (1, 2, 3, 5):
        x = g.standard_normal((n, d)).astype(np.float32)
        for L in (16, 40, 83):
            fast, alone = np.empty((n, L), np.float32), np.empty((n, L), np.float32)
            ir._scores(k, x, fast, L)
            for i in range(n):
                _rows_block(k, x[i : i + 1], alone[i : i + 1], 0, L)
            assert np.array_equal(fast.view(np.int32), alone.view(np.int32))
            assert np.abs(fast - x.astype(np.float64) @ k32[:L].T.astype(np.float64)).max() < 1e-4


@pytest.mark.parametrize("n", [2, 5, 16])
@pytest.mark.parametrize("Hq, Hkv, d", [(9, 3, 64), (4, 2, 128)])
def test_attend_gives_each_query_its_bits_alone(n, Hq, Hkv, d):
    """Queries attending together (the verify's shared prefix, then each its own keys) get, bit for bit, what each
    gets alone: bf16, heads 64 wide with three query heads to a key/value head (the default target) or 128 wide."""
    g = torch.Generator().manual_seed(n)
    L = 120
    q = torch.randn(Hq, n, d, generator=g).bfloat16().view(torch.int16).numpy()
    k, v = (torch.randn(Hkv * L, d, generator=g).bfloat16().view(torch.int16).numpy() for _ in range(2))
    allow = np.tril(np.ones((n, L), np.bool_), L - n)
    allow[n - 1, L - n : L - 1] = False  # a tree node: the prefix and itself
    together = np.empty((n, Hq, d), np.int16)
    ir.attend(q, k, v, L, L, allow, np.float32(d**-0.5), together)
    for i in range(n):
        alone = np.empty((1, Hq, d), np.int16)
        ir.attend(
            np.ascontiguousarray(q[:, i : i + 1]), k, v, L, L, allow[i : i + 1].copy(), np.float32(d**-0.5), alone
        )
        assert np.array_equal(together[i], alone[0])


def test_bf16_rounding_matches_torch():
    x = torch.randn(4096) * torch.logspace(-30, 30, 4096)
    x[:4] = torch.tensor([0.0, -0.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8])  # ties go to even
    out = torch.empty(4096, dtype=torch.bfloat16)
    store(x.numpy(), out.view(torch.int16).numpy())
    assert torch.equal(out.view(torch.int16), x.bfloat16().view(torch.int16))


def test_masks_become_the_keys_each_query_sees():
    allow = torch.tensor([[1, 1, 0, 1], [1, 0, 1, 1]], dtype=torch.bool)
    additive = torch.zeros(1, 1, 2, 5).masked_fill(~torch.cat([allow, allow[:, :1]], 1), torch.finfo(torch.float32).min)
    assert np.array_equal(_allowed(None, additive, 2, 4, {}), allow.numpy())
    assert np.array_equal(_allowed(None, allow[None, None].clone(), 2, 4, {}), allow.numpy())
    assert np.array_equal(_allowed(None, None, 2, 4, {}), np.tril(np.ones((2, 4), bool), 2))
    biased = additive.clone()
    biased[..., 0] = -0.5
    assert _allowed(None, biased, 2, 4, {}) is None  # a bias: the fused kernel's job
    same = additive.clone()
    assert _allowed(None, same, 2, 4, {}) is not None
    same[..., 1] = -0.5  # changed in place after a call: read again
    assert _allowed(None, same, 2, 4, {}) is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_query_does_not_see_where_its_keys_sit(dtype):
    """A tree node's keys sit at scattered cache positions; the same keys in a plain chain give the same bits."""
    g = torch.Generator().manual_seed(5)
    q = torch.randn(1, 4, 1, 16, generator=g).to(dtype)
    k, v = (torch.randn(1, 2, 40, 16, generator=g).to(dtype) for _ in range(2))
    seen = torch.tensor([0, 1, 2, 3, 4, 9, 17, 30, 39])  # the prefix and a path through a tree
    mask = torch.zeros(40, dtype=torch.bool)
    mask[seen] = True
    scattered = kernels.rows_attention(None, q, k, v, mask[None, None, None].clone())[0]
    chain = kernels.rows_attention(None, q, k[:, :, seen], v[:, :, seen], None)[0]
    assert scattered.dtype == dtype and torch.equal(scattered, chain)
    fused = kernels.sdpa_gqa(None, q.float(), k[:, :, seen].float(), v[:, :, seen].float(), None)[0]
    torch.testing.assert_close(chain.float(), fused, rtol=1e-2 if dtype == torch.bfloat16 else 1e-5, atol=1e-5)


def test_every_kind_of_forward_runs_one_compiled_kernel():
    """A one-token step, a chain verify (no mask) and a tree verify (a mask) hand the kernel arrays of one type, so
    the kernel a warm-up compiled serves them all: no compile in the middle of a timed run."""
    g = torch.Generator().manual_seed(7)
    k, v = (torch.randn(1, 3, 40, 64, generator=g).bfloat16() for _ in range(2))

    def query(n):  # as a model hands it over: heads moved in front of a (1, n, heads, d) tensor
        return torch.randn(1, n, 9, 64, generator=g).bfloat16().transpose(1, 2)

    kernels.rows_attention(None, query(1), k, v, None)
    compiled = set(ir.attend.signatures)
    kernels.rows_attention(None, query(5), k, v, None)
    tree = torch.ones(1, 1, 3, 40, dtype=torch.bool)
    tree[0, 0, 2, 38] = False
    kernels.rows_attention(None, query(3), k, v, tree)
    assert set(ir.attend.signatures) == compiled
