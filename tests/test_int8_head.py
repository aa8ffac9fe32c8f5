"""A bf16 draft's output layer over int8 weights for its few-row steps (kernels.int8_linear): the drafting
speed-up of a CPU with AMX, where a draft step after a target forward reads its weights from memory."""

import torch
from tiny import tiny_llama

from specviz import kernels
from specviz.kernels import linear
from specviz.models.lm import LM


def test_quantize_rows_is_within_half_a_step_and_keeps_the_range():
    g = torch.Generator().manual_seed(0)
    w = (torch.randn(50, 40, generator=g) * torch.logspace(-3, 3, 50)[:, None]).bfloat16()
    w8, scale = kernels.quantize_rows(w)
    assert w8.dtype == torch.int8 and scale.dtype == torch.bfloat16 and int(w8.abs().max()) == 127
    err = (w8.float() * scale.float()[:, None] - w.float()).abs().amax(1) / scale.float()
    assert float(err.max()) <= 0.5 + 1e-6


def test_int8_serves_a_bf16_drafts_output_layer_only():
    """The output layer of a bf16 draft (half_rows) runs 1-4 rows over int8 weights, close to bf16 and following
    the weight; 5 rows, autograd, its other layers, a target and `full_rows` keep the bf16 weights."""
    draft = LM(tiny_llama(seed=1, dtype=torch.bfloat16), half_rows=True)
    target = LM(tiny_llama(seed=2, dtype=torch.bfloat16))
    head = draft.model.get_output_embeddings()
    lin = [m for m in draft.model.modules() if type(m) is torch.nn.Linear]
    assert kernels.int8s(head) and not any(kernels.int8s(m) for m in lin if m is not head)
    assert not any(kernels.int8s(m) for m in target.model.modules() if type(m) is torch.nn.Linear)
    assert draft.half_rows and not target.half_rows
    x = torch.randn(4, head.in_features, generator=torch.Generator().manual_seed(0)).bfloat16()
    with torch.inference_mode():
        q = head(x)
        with kernels.full_rows(draft.model):
            full = head(x)
            assert not draft.half_rows
        wide = head(torch.cat([x, x[:1]]))
        with torch.no_grad():
            head.weight.mul_(2)
        doubled = head(x)
    assert not torch.equal(q, full)
    torch.testing.assert_close(q.float(), full.float(), rtol=0.05, atol=0.05)
    torch.testing.assert_close(wide[:4], full, rtol=1e-2, atol=1e-2)  # 5 rows: bf16 weights
    torch.testing.assert_close(doubled.float(), 2 * full.float(), rtol=0.05, atol=0.1)


def test_the_reduced_heads_int8_mirror_follows_a_widening_support():
    ids = torch.arange(0, 64, 4)
    q = LM(tiny_llama(seed=3, dtype=torch.bfloat16), head_ids=ids, context_vocab=True, half_rows=True)
    full = LM(tiny_llama(seed=3, dtype=torch.bfloat16), head_ids=ids, context_vocab=True)
    prompt = [1, 2, 3, 5, 4, 9, 11, 13] + list(range(20, 60, 3))
    q.forward(prompt, rows=[-1]), full.forward(prompt, rows=[-1])
    assert torch.equal(q.support, full.support) and len(q.support) > len(ids)
    for step in ([7], [8, 9]):
        a, b = q.forward(step).logits, full.forward(step).logits
        assert torch.equal(torch.isinf(a), torch.isinf(b)) and not torch.equal(a, b)
        torch.testing.assert_close(a, b, rtol=0.05, atol=0.05)


def test_a_torch_without_the_int8_kernel_falls_back(monkeypatch):
    draft = LM(tiny_llama(seed=1, dtype=torch.bfloat16), half_rows=True)
    head = draft.model.get_output_embeddings()
    x = torch.randn(1, head.in_features).bfloat16()

    def missing(*args):
        raise RuntimeError("no such kernel")

    monkeypatch.setattr(torch.ops.aten, "_weight_int8pack_mm", missing)
    monkeypatch.setitem(linear._int8, "failed", False)
    with torch.inference_mode():
        y = head(x)
    assert linear._int8["failed"] and not kernels.int8s(head)
    torch.testing.assert_close(y, torch.nn.functional.linear(x, head.weight))
