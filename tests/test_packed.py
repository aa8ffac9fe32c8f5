"""bf16 products over a prepacked weight: F.linear's bits, batch-invariant, off under autograd, following the weight."""

import copy

import pytest
import torch
import torch.nn.functional as F
from tiny import tiny_llama

from specviz import kernels
from specviz.kernels import packed
from specviz.models.lm import LM

pytestmark = pytest.mark.skipif(not packed.mkldnn_packs(), reason="this torch or CPU has no oneDNN bf16")


def test_a_bf16_model_packs_its_linear_layers_and_gives_f_linears_bits():
    model = tiny_llama(dtype=torch.bfloat16)
    kernels.install(model)
    lins = [m for m in model.modules() if type(m) is torch.nn.Linear]
    assert lins and all(m.packed_rows for m in lins)
    g = torch.Generator().manual_seed(0)
    for m in lins[:3] + [model.get_output_embeddings()]:
        x = torch.randn(2, 17, m.in_features, generator=g).bfloat16()
        with torch.inference_mode():
            for n in (1, 2, 5, 9, 17):
                assert torch.equal(m(x[:, :n]), F.linear(x[:, :n], m.weight))
            alone = torch.cat([m(x[0, i : i + 1]) for i in range(17)])
            assert torch.equal(m(x[0]), alone)  # a row alone and among 17: the same bits
            wide = torch.randn(packed.PACKED_MAX_ROWS + 8, m.in_features, generator=g).bfloat16()
            assert torch.equal(m(wide), F.linear(wide, m.weight))  # a prefill's width: F.linear itself
    fp32 = tiny_llama()
    kernels.install(fp32)
    assert not any(m.packed_rows for m in fp32.modules() if type(m) is torch.nn.Linear)


def test_packed_rows_step_aside_for_autograd_and_follow_the_weight():
    model = tiny_llama(dtype=torch.bfloat16)
    kernels.install(model)
    m = next(m for m in model.modules() if type(m) is torch.nn.Linear)
    x = torch.randn(3, m.in_features, generator=torch.Generator().manual_seed(1)).bfloat16()
    y = m(x)  # autograd on: F.linear, gradients flow
    assert y.requires_grad
    y.float().sum().backward()
    assert m.weight.grad is not None
    assert not kernels.packs(m)
    with torch.inference_mode():
        before = m(x)
    with torch.no_grad():
        m.weight.mul_(2)  # in place: the packed copy is made again
        assert kernels.packs(m) and torch.equal(m(x), F.linear(x, m.weight)) and not torch.equal(m(x), before)
        with kernels.stock(model):
            assert "forward" not in m.__dict__


def test_a_model_with_packed_rows_still_copies():
    """oneDNN's packed tensors cannot be copied: a deep copy starts without them and packs again."""
    model = tiny_llama(dtype=torch.bfloat16)
    kernels.install(model)
    x = torch.tensor([[1, 2, 3]])
    with torch.inference_mode():
        before = model(x).logits
        twin = copy.deepcopy(model)
        assert torch.equal(twin(x).logits, before)


def test_a_bf16_target_with_packed_rows_decodes_as_with_plain_ones():
    lm = LM(tiny_llama(vocab=64, layers=2, hidden=64, dtype=torch.bfloat16))
    prompt = list(range(3, 30))
    with_packing = lm.forward(prompt).logits
    packed._packed["failed"] = True
    try:
        lm.reset()
        plain = lm.forward(prompt).logits
    finally:
        packed._packed["failed"] = False
    assert torch.equal(with_packing, plain)


def test_packed_linear_takes_a_bias_and_strided_rows():
    mod = torch.nn.Linear(32, 64, bias=True).to(torch.bfloat16)
    g = torch.Generator().manual_seed(2)
    with torch.inference_mode():
        for x in (torch.randn(32, 3, generator=g).bfloat16().t(), torch.randn(3, 1, 32, generator=g).bfloat16()):
            assert torch.equal(kernels.packed_linear(x, mod), F.linear(x, mod.weight, mod.bias))


def test_a_lone_row_gets_the_bits_it_gets_among_others():
    """oneDNN may sum a lone row in another order (a Zen 5 EPYC, at the down projection's 1,536 inputs): there
    `packed_linear` runs it beside a zero row, so a row's bits never depend on how many rows come with it."""
    g = torch.Generator().manual_seed(3)
    for out_f, in_f in ((576, 1536), (64, 576)):
        mod = torch.nn.Linear(in_f, out_f, bias=False).to(torch.bfloat16)
        x = torch.randn(packed.PACKED_MAX_ROWS, in_f, generator=g).bfloat16()
        with torch.inference_mode():
            alone = torch.cat([kernels.packed_linear(x[i : i + 1], mod) for i in range(len(x))])
            for n in (2, 3, 8, 17, packed.PACKED_MAX_ROWS):
                assert torch.equal(kernels.packed_linear(x[:n], mod), alone[:n])


def test_a_padded_lone_row_keeps_its_shape_and_bias(monkeypatch):
    mod = torch.nn.Linear(32, 64, bias=True).to(torch.bfloat16)
    monkeypatch.setitem(packed._lone, (64, 32), True)
    x = torch.randn(1, 1, 32, generator=torch.Generator().manual_seed(4)).bfloat16()
    with torch.inference_mode():
        y = kernels.packed_linear(x, mod)
        pair = F.linear(torch.cat([x[0], torch.zeros_like(x[0])]), mod.weight, mod.bias)
    assert y.shape == (1, 1, 64) and torch.equal(y[0], pair[:1])


def test_a_wrong_input_raises_as_f_linear_does_and_leaves_packing_on():
    mod = torch.nn.Linear(32, 64, bias=False).to(torch.bfloat16)
    with torch.inference_mode(), pytest.raises(RuntimeError):
        kernels.packed_linear(torch.randn(3, 31).bfloat16(), mod)
    assert not packed._packed["failed"]


def test_stacked_products_give_each_layers_bits_or_step_aside():
    model = tiny_llama(hidden=64, dtype=torch.bfloat16)
    kernels.install(model)
    attn, mlp = model.model.layers[0].self_attn, model.model.layers[0].mlp
    g = torch.Generator().manual_seed(1)
    with torch.inference_mode():
        for mods, owner in (((attn.q_proj, attn.k_proj, attn.v_proj), attn), ((mlp.gate_proj, mlp.up_proj), mlp)):
            for n in (1, 4, 17):
                x = torch.randn(1, n, 64, generator=g).bfloat16()
                outs = packed.stacked_linear(x, mods, owner)
                if outs is None:  # oneDNN blocks these shapes otherwise here: the layers run apart
                    assert not packed._stacks_exactly(mods)
                    continue
                assert all(torch.equal(o, m(x)) for o, m in zip(outs, mods))
            wide = torch.randn(1, packed.PACKED_MAX_ROWS + 1, 64, generator=g).bfloat16()
            assert packed.stacked_linear(wide, mods, owner) is None  # a prefill: one by one
            with torch.no_grad():
                mods[0].weight.mul_(2)  # a changed weight is stacked again
            x = torch.randn(1, 3, 64, generator=g).bfloat16()
            outs = packed.stacked_linear(x, mods, owner)
            assert outs is None or torch.equal(outs[0], mods[0](x))
    assert packed.stacked_linear(torch.randn(1, 2, 64), (attn.q_proj,), attn) is None  # fp32 rows
