"""The fused elementwise kernels give torch's bits (the rotary embedding in bf16 and fp32, the bf16 RMS norm) and leave
what they do not serve (prefills' rotary embedding, autograd, fp32 norms, the Hugging Face baselines) to torch."""

import pytest
import torch
from tiny import tiny_llama
from transformers.models.llama.modeling_llama import LlamaRMSNorm, apply_rotary_pos_emb

from specviz import kernels
from specviz.kernels import elementwise

pytestmark = pytest.mark.skipif(elementwise._kernel() is None, reason="numba is not installed")


def _tables(n: int, d: int, dtype, start: int = 1000):
    inv = 1.0 / (100000 ** (torch.arange(0, d, 2).float() / d))
    angles = (torch.arange(start, start + n)[None, :, None].float() * inv).repeat(1, 1, 2)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int16 if t.dtype == torch.bfloat16 else torch.int32)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("n,heads,kv_heads,d", [(1, 9, 3, 64), (5, 9, 3, 64), (64, 4, 2, 32), (3, 2, 2, 8)])
def test_rotary_gives_torch_bits_in_torch_layout(dtype, n, heads, kv_heads, d):
    g = torch.Generator().manual_seed(n * d)
    qx = (torch.randn(1, n, heads * d, generator=g) * 40).to(dtype)
    kx = (torch.randn(1, n, kv_heads * d, generator=g) * 0.01).to(dtype)
    qx[0, 0, :4] = torch.tensor([0.0, -0.0, 3e38, -1e-30])  # zeros of both signs, a huge and a tiny value
    cos, sin = _tables(n, d, dtype)
    want_q, want_k = apply_rotary_pos_emb(
        qx.view(1, n, heads, d).transpose(1, 2), kx.view(1, n, kv_heads, d).transpose(1, 2), cos, sin
    )
    q, k = elementwise.rotary(cos, sin, dtype)(qx, kx)
    assert q.shape == want_q.shape and k.shape == want_k.shape
    assert torch.equal(_bits(q), _bits(want_q)) and torch.equal(_bits(k), _bits(want_k))
    if n > 1:
        assert q.stride() == want_q.stride() and k.stride() == want_k.stride()


def test_rotary_leaves_what_it_does_not_serve_to_torch():
    cos, sin = _tables(4, 8, torch.bfloat16)
    assert elementwise.rotary(cos, sin, torch.bfloat16) is not None
    wide = _tables(elementwise.ROPE_MAX_ROWS + 1, 8, torch.bfloat16)
    assert elementwise.rotary(*wide, torch.bfloat16) is None  # a prefill: torch's ops, the same bits
    assert elementwise.rotary(cos.half(), sin.half(), torch.float16) is None
    assert elementwise.rotary(cos, sin, torch.float32) is None  # projections of another dtype
    with elementwise.off():
        assert elementwise.rotary(cos, sin, torch.bfloat16) is None
    with torch.enable_grad():
        assert elementwise.rotary(cos.float().requires_grad_(), sin.float(), torch.float32) is None


def _norm(D: int = 96, seed: int = 0) -> LlamaRMSNorm:
    g = torch.Generator().manual_seed(seed)
    norm = LlamaRMSNorm(D, eps=1e-5).to(torch.bfloat16)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(D, generator=g) * 0.5 + 1)
    return norm


@pytest.mark.parametrize("D", [96, 576, 37])
def test_norm_gives_torch_bits_and_each_row_alone(D):
    norm = _norm(D)
    g = torch.Generator().manual_seed(1)
    scale = torch.pow(10, torch.rand(1, 40, D, generator=g) * 6 - 3)  # six decades: where a sum's order shows
    x = (torch.randn(1, 40, D, generator=g) * scale).to(torch.bfloat16)
    with torch.inference_mode():
        got, want = elementwise.rms_norm_forward(norm, x), norm.forward(x)
        alone = torch.cat([elementwise.rms_norm_forward(norm, x[:, i : i + 1]) for i in range(40)], 1)
    assert torch.equal(_bits(got), _bits(want))
    assert torch.equal(_bits(alone), _bits(got))


def test_norm_leaves_autograd_fp32_and_other_shapes_to_torch():
    norm = _norm()
    x = torch.randn(1, 3, 96).to(torch.bfloat16).requires_grad_()
    out = elementwise.rms_norm_forward(norm, x)
    out.float().sum().backward()  # torch's ops: the gradient flows
    assert x.grad is not None and norm.weight.grad is not None
    fp32 = LlamaRMSNorm(96)
    y = torch.randn(1, 3, 96)
    assert torch.equal(elementwise.rms_norm_forward(fp32, y), fp32.forward(y))
    with torch.inference_mode():
        batch = torch.randn(2, 3, 96).to(torch.bfloat16)  # a batch of two: torch's
        assert torch.equal(elementwise.rms_norm_forward(norm, batch), norm.forward(batch))


def test_install_fuses_bf16_norms_and_stock_puts_torch_back():
    bf16, fp32 = tiny_llama(dtype=torch.bfloat16), tiny_llama()
    kernels.install(bf16)
    kernels.install(fp32)
    norms = [m for m in bf16.modules() if isinstance(m, LlamaRMSNorm)]
    assert norms and all(m.forward.__func__ is elementwise.rms_norm_forward for m in norms)
    assert all("forward" not in m.__dict__ for m in fp32.modules() if isinstance(m, LlamaRMSNorm))
    with kernels.stock(bf16):
        assert all("forward" not in m.__dict__ for m in norms)
    assert all(m.forward.__func__ is elementwise.rms_norm_forward for m in norms)
