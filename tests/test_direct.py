"""The layer-by-layer Llama forward (`models.direct`): bitwise Hugging Face's, on every kind of forward `LM` runs."""

import pytest
import torch
from tiny import tiny_config, tiny_llama
from transformers import MistralConfig, MistralForCausalLM

from specviz.models import direct
from specviz.models.eagle import EagleLM, build_eagle
from specviz.models.lm import LM


def _steps(lm: LM) -> list:
    """Every kind of forward a round makes: a prefill, a chain, a tree, a tree over a cache with a hidden branch,
    after `keep`; the hidden states and logits of each."""
    out = []
    lm.reset()
    out.append(lm.forward([5, 9, 3, 17, 4, 8, 11]))
    out.append(lm.forward([6, 7, 8]))
    out.append(lm.forward([12, 13, 14, 15], parents=[-1, 0, 0, 2]))
    lm.keep(list(range(10)) + [11])
    past = lm.length
    visible = torch.ones(2, past, dtype=torch.bool)
    visible[1, past - 1] = False  # the second token hangs off the prefix without the last cached position
    out.append(lm.forward([20, 21], parents=[-1, -1], visible=visible))
    out.append(lm.forward([22]))
    return [(f.hidden.clone(), f.logits.clone()) for f in out]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kv_cache", ["growing", "fixed"])
def test_direct_forward_is_bitwise_hugging_faces(dtype, kv_cache):
    model = tiny_llama(vocab=64, layers=3, dtype=dtype)
    lm = LM(model, kv_cache=kv_cache)
    assert lm.direct
    fast = _steps(lm)
    lm.direct = False
    stock = _steps(lm)
    for (h1, l1), (h2, l2) in zip(fast, stock):
        assert torch.equal(h1, h2) and torch.equal(l1, l2)


def test_direct_forward_reads_inputs_embeds_like_hugging_face():
    """A feature drafter hands the stack its own input embeddings (EagleLM)."""
    target = tiny_llama(vocab=64, layers=2)
    eagle = EagleLM(build_eagle(target))
    assert eagle.direct
    feats = torch.randn(12, target.config.hidden_size, generator=torch.Generator().manual_seed(0))

    def run():
        eagle.reset()
        eagle.add_target_features(0, feats)
        a = eagle.forward(list(range(3, 13)))
        b = eagle.forward([20, 21, 22], parents=[-1, 0, 0])
        return [a.hidden.clone(), a.logits.clone(), b.hidden.clone(), b.logits.clone()]

    fast = run()
    eagle.direct = False
    assert all(torch.equal(x, y) for x, y in zip(fast, run()))


def test_other_stacks_keep_hugging_faces_forward():
    torch.manual_seed(0)
    lm = LM(MistralForCausalLM(tiny_config(MistralConfig, sliding_window=None)).eval())
    assert not direct.serves(lm.base) and not lm.direct
    assert lm.forward([1, 2, 3]).logits.shape == (3, 64)


def test_a_model_in_training_mode_keeps_hugging_faces_forward(monkeypatch):
    lm = LM(tiny_llama(vocab=64, layers=1))
    assert lm.direct
    lm.model.train()

    def refused(*args, **kwargs):
        raise AssertionError("the layer loop ran a model in training mode")

    monkeypatch.setattr(direct, "forward", refused)
    assert lm.forward([1, 2, 3]).logits.shape == (3, 64)
