"""The fixed cache and the bucketed (CUDA-graph-ready) forwards against the growing cache.

With the batch-invariant attention (`rows_attention`: masked keys and pad rows change no bit) every forward's
logits are the same to the bit, so whole runs are too, greedy and sampled; with the fused kernel, which blocks
over keys, they agree to fp32 rounding and greedy output is the same.
"""

from dataclasses import replace

import pytest
import torch
from helpers import LOOPY, eagle_pair
from tiny import TEST_DEVICE, tiny_llama

from specviz.core.config import ChainConfig, DySpecConfig, ModelConfig, RunConfig, SamplingConfig, TreeConfig
from specviz.engine.record import generate
from specviz.kernels.linear import ROWS_ATTENTION
from specviz.models import graphs, kvcache
from specviz.models.lm import LM
from specviz.models.pair import Pair

pytestmark = pytest.mark.usefixtures("one_thread")

PROMPT = [5, 9, 17, 3, 33, 8]
SETTINGS = [("fixed", False), ("fixed", True)]  # against ("growing", False)
RUNS = {
    "ar": RunConfig(method="ar"),
    "chain": RunConfig(method="chain", chain=ChainConfig(3)),
    "dyspec": RunConfig(method="dyspec", dyspec=DySpecConfig(budget=8, max_depth=5)),
    "kary": RunConfig(method="kary", tree=TreeConfig(width=2, depth=2)),
    "sequoia": RunConfig(method="sequoia", tree=TreeConfig(budget=8, max_depth=5)),
}
ROWS = TEST_DEVICE == "cpu"  # rows_attention is a CPU kernel


def _model(seed=0, rows=ROWS):
    m = tiny_llama(vocab=64, seed=seed)
    with torch.no_grad():
        m.lm_head.weight.mul_(20.0)  # peaked: deep trees, long accepted runs
    if rows:
        m.set_attn_implementation(ROWS_ATTENTION)
    return m


def _pair(rows=ROWS) -> Pair:
    return Pair(LM(_model(0, rows), name="target"), LM(_model(1000, rows), name="draft"), None, {})


def _use(pair, kind, cuda_graphs):
    for lm in (pair.target, pair.draft):
        lm.use_cache(kind, cuda_graphs)


def _steps(lm, ids, parents=(-1, 0, 0, 2), keep=(0, 2)):
    """A prefill, then rounds of a small tree, two of its nodes kept, and one token on top."""
    out, n = [lm.forward(ids[:20]).logits], len(parents)
    for i in range(20, len(ids) - n, n + 1):
        out.append(lm.forward(ids[i : i + n], parents=list(parents)).logits)
        past = lm.length - n
        lm.keep([*range(past), *(past + k for k in keep)])
        out.append(lm.forward([ids[i + n]]).logits)
    return torch.cat(out)


@pytest.mark.parametrize("kind,cuda_graphs", SETTINGS)
def test_forwards_equal_the_growing_cache_past_a_growth(kind, cuda_graphs):
    model = _model()
    ids = torch.randint(0, 64, (420,), generator=torch.Generator().manual_seed(2)).tolist()
    ref = _steps(LM(model), ids)
    lm = LM(model, kv_cache=kind, cuda_graphs=cuda_graphs)
    got = _steps(lm, ids)
    assert lm.cache.capacity == 2 * kvcache.FIXED_CAPACITY  # it grew once, keeping what it held
    if ROWS:
        assert torch.equal(got, ref)
    else:
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


def test_pad_rows_and_stale_slots_change_nothing_with_the_fused_kernel():
    model = _model(rows=False)
    ids = torch.randint(0, 64, (120,), generator=torch.Generator().manual_seed(3)).tolist()
    ref = _steps(LM(model), ids, parents=(-1, 0, 1))
    got = _steps(LM(model, kv_cache="fixed", cuda_graphs=True), ids, parents=(-1, 0, 1))
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
    assert torch.equal(got.argmax(-1), ref.argmax(-1))


@pytest.mark.parametrize("kind,cuda_graphs", SETTINGS)
@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("name", list(RUNS))
def test_runs_equal_the_growing_cache(name, temperature, kind, cuda_graphs):
    pair = _pair()
    run = replace(RUNS[name], max_new_tokens=40, sampling=SamplingConfig(temperature, seed=5))
    ref = generate(pair, PROMPT, run)
    _use(pair, kind, cuda_graphs)
    got = generate(pair, PROMPT, run)
    assert got.output_ids == ref.output_ids
    if ROWS:  # every probability the trace shows, to the bit
        assert [r.p for r in got.rounds] == [r.p for r in ref.rounds]
        assert [r.tree.tokens for r in got.rounds] == [r.tree.tokens for r in ref.rounds]


def test_reset_keeps_a_fixed_cache_and_its_buffers():
    lm = LM(_model(), kv_cache="fixed")
    lm.forward(PROMPT)
    cache, keys = lm.cache, lm.cache.layers[0].keys.data_ptr()
    lm.reset()
    assert lm.cache is cache and lm.length == 0 and lm.cache.layers[0].keys.data_ptr() == keys
    lm.use_cache("growing")
    assert kvcache.capacity(lm.cache) is None and lm.length == 0


def test_buckets_and_refusals():
    assert [graphs.bucket(n) for n in (1, 2, 3, 5, 16, 17, 64, 65, 200)] == [1, 2, 4, 8, 16, 32, 64, 65, 200]
    with pytest.raises(ValueError, match="fixed cache"):
        ModelConfig(cuda_graphs=True)
    with pytest.raises(ValueError, match="kv cache must be one of"):
        ModelConfig(kv_cache="paged")
    with pytest.raises(ValueError, match="fixed cache"):
        LM(_model(), cuda_graphs=True)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("name", ["chain", "dyspec"])
def test_eagle_runs_equal_the_growing_cache(name, temperature):
    pair = eagle_pair(copy=True)
    if ROWS:
        for lm in (pair.target, pair.eagle):
            lm.model.set_attn_implementation(ROWS_ATTENTION)
    knobs = {"max_new_tokens": 40, "sampling": SamplingConfig(temperature, seed=9), "drafter": "eagle", "copy": True}
    run = replace(RUNS[name], **knobs)
    ref = generate(pair, LOOPY, run)
    for lm in (pair.target, pair.eagle):
        lm.use_cache("fixed", cuda_graphs=True)
    got = generate(pair, LOOPY, run)
    assert got.output_ids == ref.output_ids and pair.eagle.forwards > 0
    if ROWS:
        assert [r.p for r in got.rounds] == [r.p for r in ref.rounds]
