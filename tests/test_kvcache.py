"""The in-place cache: the same keys and values as concatenation, appended into spare capacity, robust to the
slicing and in-place writes `LM.keep` does and to tensors replaced behind its back."""

import torch
from tiny import tiny_llama
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from specviz.models import kvcache
from specviz.models.lm import LM


def _states(g, n, heads=3, dim=8):
    return torch.randn(1, heads, n, dim, generator=g), torch.randn(1, heads, n, dim, generator=g)


def test_growing_layer_holds_what_concatenation_holds_and_appends_in_place():
    g = torch.Generator().manual_seed(0)
    grow, plain = kvcache.GrowingLayer(), DynamicLayer()
    ptrs = set()
    for n in (5, 1, 1, 4, 1, 70, 2):
        k, v = _states(g, n)
        gk, gv = grow.update(k, v)
        pk, pv = plain.update(k, v)
        assert torch.equal(gk, pk) and torch.equal(gv, pv)
        assert grow.get_seq_length() == plain.get_seq_length()
        ptrs.add(grow._kbuf.data_ptr())
    assert len(ptrs) == 2  # 5 + 64 slots, then one doubling past them
    grow.reset()
    assert grow.get_seq_length() == 0 and grow._kbuf is None


def test_slices_and_in_place_writes_keep_the_buffer_and_replaced_tensors_are_adopted():
    g = torch.Generator().manual_seed(1)
    layer = kvcache.GrowingLayer()
    k, v = _states(g, 10)
    layer.update(k, v)
    buf = layer._kbuf
    layer.keys[..., 3:4, :] = layer.keys.index_select(-2, torch.tensor([7]))  # what LM.keep does
    layer.values[..., 3:4, :] = layer.values.index_select(-2, torch.tensor([7]))
    layer.keys, layer.values = layer.keys[..., :4, :], layer.values[..., :4, :]
    k2, v2 = _states(g, 2)
    keys, values = layer.update(k2, v2)
    assert layer._kbuf is buf and keys.shape[-2] == 6
    assert torch.equal(keys, torch.cat([k[..., [0, 1, 2, 7], :], k2], -2))
    assert torch.equal(values, torch.cat([v[..., [0, 1, 2, 7], :], v2], -2))
    other = torch.zeros(1, 3, 6, 8)
    layer.keys, layer.values = other, other.clone()  # replaced, as batch_select would
    k3, v3 = _states(g, 1)
    keys, _ = layer.update(k3, v3)
    assert layer._kbuf is not buf and torch.equal(keys, torch.cat([other, k3], -2))


def test_lm_forwards_match_a_concatenating_cache():
    model = tiny_llama(vocab=64, layers=2, hidden=32)
    lm = LM(model)
    assert all(type(layer) is kvcache.GrowingLayer for layer in lm.cache.layers)
    ids = [int(t) for t in torch.randint(0, 64, (40,), generator=torch.Generator().manual_seed(2))]

    def run(cache_factory):
        lm.cache = cache_factory()
        out = [lm.forward(ids[:20]).logits]
        for i in range(20, 36, 4):
            out.append(lm.forward(ids[i : i + 4], parents=[-1, 0, 0, 2]).logits)  # a small tree
            lm.keep(list(range(i)) + [i, i + 2])  # keep two of its nodes
            out.append(lm.forward([ids[i + 3]]).logits)
        return torch.cat(out)

    torch.testing.assert_close(
        run(lambda: kvcache.new_cache(model.config)),
        run(lambda: DynamicCache(config=model.config)),
        rtol=1e-5,
        atol=1e-5,
    )
