"""A reduced head's support: the head's ids in front, the context's tokens appended as they are fed, each row the
output layer's own, buffers that grow themselves and are kept over a reset."""

import torch
from tiny import tiny_llama

from specviz.models.lm import LM
from specviz.models.support import HEADROOM, Support


def test_fed_tokens_join_once_with_the_output_layers_rows():
    head = tiny_llama(vocab=64, seed=2).get_output_embeddings()
    ids = torch.arange(0, 64, 8)
    s = Support(head, ids, context=True)
    s.grow([3, 8, 3, 5])  # 8 is the head's already; 3 comes twice
    assert s.ids[: s.n].tolist() == [*ids.tolist(), 3, 5]
    torch.testing.assert_close(s.weight[: s.n], head.weight[s.ids[: s.n]])
    assert s.ids is not ids and torch.equal(ids, torch.arange(0, 64, 8))  # the head's own buffer is never written


def test_buffers_double_past_their_room_and_stay_over_a_reset():
    head = torch.nn.Linear(4, 2 * HEADROOM + 64, bias=False)
    s = Support(head, torch.arange(8), context=True)
    s.grow(range(8, 12))
    room = len(s.ids)
    assert room == 8 + HEADROOM
    s.grow(range(12, 8 + HEADROOM + 40))
    assert len(s.ids) >= 8 + HEADROOM + 40 and s.n == 8 + HEADROOM + 40
    torch.testing.assert_close(s.weight[: s.n], head.weight[: s.n])
    buf = s.ids
    s.reset()
    assert s.n == 8 and s.ids is buf and torch.equal(s.ids[:8], torch.arange(8))
    s.grow([40, 9])
    assert s.ids[: s.n].tolist() == [*range(8), 9, 40]  # new ids in order


def test_an_lm_over_a_context_support_gives_minus_infinity_outside_it_only():
    lm = LM(tiny_llama(vocab=64, seed=3), head_ids=torch.arange(0, 64, 4), context_vocab=True)
    q = lm.forward([1, 2, 3, 5], rows=[-1]).logits[0]
    inside = set(range(0, 64, 4)) | {1, 2, 3, 5}
    assert {i for i in range(64) if torch.isfinite(q[i])} == inside
    lm.reset()
    assert lm.support.tolist() == list(range(0, 64, 4))
