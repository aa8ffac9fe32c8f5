"""The skinny linear kernel: same numbers as F.linear, installed only where it pays, reversible."""

import pytest
import torch
import torch.nn.functional as F
from tiny import tiny_llama

from specviz import kernels
from specviz.models.lm import LM


def test_skinny_linear_matches_f_linear_for_every_row_count():
    g = torch.Generator().manual_seed(0)
    w, b = torch.randn(48, 20, generator=g), torch.randn(48, generator=g)
    for shape in [(1, 20), (2, 20), (7, 20), (1, 3, 20), (2, 5, 20), (20,), (3, 50, 20)]:
        x = torch.randn(*shape, generator=g)
        for bias in (None, b):
            got, want = kernels.skinny_linear(x, w, bias), F.linear(x, w, bias)
            assert got.shape == want.shape and got.is_contiguous()
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_install_is_cpu_fp32_and_bf16_and_stock_restores_it():
    model = tiny_llama()
    lin = [m for m in model.modules() if type(m) is torch.nn.Linear]
    assert kernels.install(model) == len(lin) > 0 and all("forward" in m.__dict__ for m in lin)
    assert model.config._attn_implementation == kernels.ATTENTION
    bf16 = tiny_llama(dtype=torch.bfloat16)  # a bf16 target: the invariant attention
    assert kernels.install(bf16) == len(lin) and bf16.config._attn_implementation == kernels.ROWS_ATTENTION
    with kernels.stock(model, model, bf16):  # the same model twice (a self-draft pair) is fine
        assert not any("forward" in m.__dict__ for m in lin) and model.config._attn_implementation == "sdpa"
        assert bf16.config._attn_implementation == "sdpa"
    assert all("forward" in m.__dict__ for m in lin) and model.config._attn_implementation == kernels.ATTENTION
    assert bf16.config._attn_implementation == kernels.ROWS_ATTENTION
    bf16_draft = tiny_llama(dtype=torch.bfloat16)  # a bf16 draft: the fused attention, never fp16 rows
    assert kernels.install(bf16_draft, half_rows=True) and not any(kernels.halves(m) for m in bf16_draft.modules())
    assert bf16_draft.config._attn_implementation == kernels.ATTENTION
    f16 = tiny_llama(dtype=torch.float16)
    assert kernels.install(f16) == 0 and f16.config._attn_implementation == "sdpa"


def test_shared_kv_attention_matches_stock_on_cache_chain_and_tree():
    """Prefill, a chain on top of the cache, a tree with its 4-D mask: the same logits with the shared-head
    attention as with Hugging Face's (the tiny model has 4 query heads over 2 key/value heads)."""

    def run(lm):
        return [
            lm.forward(list(range(3, 20))).logits,
            lm.forward([5, 6, 7]).logits,
            lm.forward([8, 9, 10, 11, 12], [-1, 0, 0, 1, 2]).logits,
        ]

    lm = LM(tiny_llama(vocab=64, layers=2, hidden=32))
    assert lm.config.num_key_value_heads < lm.config.num_attention_heads
    ours = run(lm)
    lm.reset()
    with kernels.stock(lm.model):
        theirs = run(lm)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_lm_forward_agrees_with_stock_kernels():
    lm = LM(tiny_llama(vocab=64, layers=2, hidden=32))
    ids = list(range(3, 20))
    a = lm.forward(ids).logits
    lm.reset()
    with kernels.stock(lm.model):
        b = lm.forward(ids).logits
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_half_rows_serve_one_row_steps_of_a_draft_only():
    """A draft's one-row products run over fp16 weights (close to fp32, not equal); wider inputs, autograd and
    the target keep fp32; `full_rows` turns them off for a while; a row past fp16's range falls back to fp32."""
    draft, target = LM(tiny_llama(seed=1), half_rows=True), LM(tiny_llama(seed=2))
    lin = [m for m in draft.model.modules() if type(m) is torch.nn.Linear]
    assert all(kernels.halves(m) for m in lin) and not any(
        kernels.halves(m) for m in target.model.modules() if type(m) is torch.nn.Linear
    )
    m = lin[0]
    x = torch.randn(1, m.in_features, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        half = m(x)
        with kernels.full_rows(draft.model):
            full = m(x)
        assert kernels.halves(m)
        wide = m(x.expand(3, -1).contiguous())
    assert not torch.equal(half, full)
    torch.testing.assert_close(half, full, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(wide, full.expand(3, -1), rtol=1e-5, atol=1e-5)  # 3 rows: fp32
    grad = m(x)  # autograd on: fp32
    assert grad.requires_grad and not torch.equal(grad, half)
    torch.testing.assert_close(grad, F.linear(x, m.weight), rtol=1e-5, atol=1e-6)
    big = x * 1e6  # fp16 overflows: fp32 again
    with torch.inference_mode():
        torch.testing.assert_close(m(big), F.linear(big, m.weight), rtol=1e-5, atol=1e-2)
    with torch.no_grad():  # the fp16 copy follows the weight
        m.weight.mul_(2)
        torch.testing.assert_close(m(x), 2 * full, rtol=1e-2, atol=1e-2)


def test_reduced_head_half_rows_follow_a_widening_support():
    """The reduced head's fp16 mirror grows with the context vocabulary: one-row logits match the fp32 ones
    to fp16 rounding on the same support, -inf outside it."""
    ids = torch.arange(0, 64, 4)
    half = LM(tiny_llama(seed=3), head_ids=ids, context_vocab=True, half_rows=True)
    full = LM(tiny_llama(seed=3), head_ids=ids, context_vocab=True)
    prompt = [1, 2, 3, 5, 4, 9, 11, 13] + list(range(20, 60, 3))
    a, b = half.forward(prompt, rows=[-1]).logits, full.forward(prompt, rows=[-1]).logits
    assert torch.equal(half.support, full.support) and len(half.support) > len(ids)
    for _ in range(3):
        a, b = half.forward([7]).logits, full.forward([7]).logits
        assert torch.equal(torch.isinf(a), torch.isinf(b)) and not torch.equal(a, b)
        torch.testing.assert_close(a, b, rtol=1e-2, atol=1e-2)


def test_padded_rows_skip_the_slow_widths():
    """One row pads to two (the one-row gemv measured slower than the two-row skinny gemm), 3 to 4, 6-16 to 16,
    17-32 to a multiple of 8; other widths stay; padding never drops a row."""
    assert [kernels.padded_rows(r) for r in (1, 2, 3, 4, 5, 6, 15, 16, 17, 24, 25, 33)] == [
        2,
        2,
        4,
        4,
        5,
        16,
        16,
        16,
        24,
        24,
        32,
        33,
    ]
    assert all(kernels.padded_rows(r) >= r for r in range(1, 130))


def test_rows_attention_is_batch_invariant_and_agrees_with_sdpa():
    """A query's output is bitwise the same alone or among 2-16 others (causal, additive and bool masks, a cache
    view with spare rows), and equal to the fused kernel's within float rounding."""
    g = torch.Generator().manual_seed(3)
    q, k, v = (
        torch.randn(1, 6, 16, 32, generator=g),
        torch.randn(1, 2, 90, 32, generator=g),
        torch.randn(1, 2, 90, 32, generator=g),
    )
    k, v = k[:, :, :80], v[:, :, :80]  # views with 10 spare rows a head, as kvcache hands them
    alone = torch.cat(
        [
            kernels.rows_attention(None, q[:, :, i : i + 1], k[:, :, : 65 + i], v[:, :, : 65 + i], None)[0]
            for i in range(16)
        ],
        1,
    )
    for n in (2, 5, 16):
        causal = kernels.rows_attention(None, q[:, :, :n], k[:, :, : 64 + n], v[:, :, : 64 + n], None)[0]
        allow = torch.ones(n, 64 + n, dtype=torch.bool).tril(64)[None, None]
        additive = torch.zeros(allow.shape).masked_fill(~allow, torch.finfo(torch.float32).min)
        for mask in (allow, additive):
            got = kernels.rows_attention(None, q[:, :, :n], k[:, :, : 64 + n], v[:, :, : 64 + n], mask)[0]
            assert torch.equal(got, causal)
        assert torch.equal(causal, alone[:, :n])
        fused = kernels.sdpa_gqa(None, q[:, :, :n], k[:, :, : 64 + n], v[:, :, : 64 + n], additive)[0]
        torch.testing.assert_close(causal, fused, rtol=1e-5, atol=1e-5)
    soft = additive.clone()
    soft[..., 0] = -1.5  # a bias, not a mask: the fused kernel takes it
    torch.testing.assert_close(
        kernels.rows_attention(None, q[:, :, :16], k, v, soft)[0], kernels.sdpa_gqa(None, q[:, :, :16], k, v, soft)[0]
    )
    qg = q[:, :, :2].clone().requires_grad_()  # autograd: the fused kernel, gradients flow
    kernels.rows_attention(None, qg, k[:, :, :66], v[:, :, :66], None)[0].sum().backward()
    assert qg.grad is not None and torch.isfinite(qg.grad).all()


def test_a_bf16_target_is_batch_invariant_on_chains_and_trees():
    """bf16 logits bitwise the same for a token run alone, in a chain of 2-8, or at its place in a tree."""
    lm = LM(tiny_llama(vocab=64, layers=2, hidden=64, dtype=torch.bfloat16))
    if not kernels.bf16_linear_invariant(lm.model):
        pytest.skip("this CPU's bf16 matmuls are not batch-invariant (what load_pair probes)")
    ctx, new = list(range(3, 40)), [10, 11, 12, 13, 14, 15, 16, 17]
    lm.forward(ctx)
    alone = torch.cat([lm.forward([t]).logits for t in new])
    for n in (2, 3, 8):
        lm.crop(len(ctx))
        assert torch.equal(lm.forward(new[:n]).logits, alone[:n])
    lm.crop(len(ctx))  # the chain 10 11 12 and a sibling branch 20 21
    tree = lm.forward([10, 20, 11, 21, 12], parents=[-1, -1, 0, 1, 2]).logits
    assert torch.equal(tree[[0, 2, 4]], alone[:3])
