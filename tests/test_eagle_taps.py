"""A feature drafter that also reads the target's middle layers (`models.eagle.add_feature_taps`): the target's
tapped forward, the drafter's start and bookkeeping, losslessness, its folder, and the training features (its
SpecDec++ head rows: test_eagle.py)."""

import json

import pytest
import torch
from lossless import greedy_equal
from scipy.stats import chisquare
from tiny import tiny_llama

from specviz.core.config import ChainConfig, DySpecConfig, RunConfig, SamplingConfig, TreeConfig
from specviz.core.sampling import warp
from specviz.engine.loop import iter_rounds
from specviz.engine.record import generate
from specviz.models.eagle import (
    EagleLM,
    add_copy_input,
    add_feature_taps,
    build_eagle,
    eagle_inputs,
    feature_taps,
    with_zero_taps,
)
from specviz.models.lm import LM
from specviz.models.loading import load_eagle
from specviz.models.pair import Pair
from specviz.train.data import Distill
from specviz.train.eagle import save_eagle, target_features

PROMPT = [5, 9, 3, 5, 9, 3, 17, 4]


def tapped_pair(vocab=64, layers=3, taps=(1, 2), seed=0, hidden=32, copy=True):
    target = tiny_llama(vocab=vocab, layers=layers, hidden=hidden, seed=seed)
    m = build_eagle(target, init_layer=0)
    if copy:
        add_copy_input(m, 3, gain=2.0)
    add_feature_taps(m, taps)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # random fc: features, copies and taps all steer the draft
        m.eagle_fc.weight.copy_(torch.randn(m.eagle_fc.weight.shape, generator=g) * 0.2)
    t = LM(target, name="target")
    t.tap(taps)
    draft = LM(tiny_llama(vocab=vocab, layers=1, hidden=hidden, seed=seed + 1000), name="draft")
    return Pair(t, draft, None, {"target": "tiny", "draft": "random"}, EagleLM(m))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_tapped_forward_adds_the_normed_middle_layers_and_keeps_the_hidden_states(dtype):
    target = tiny_llama(vocab=64, layers=3, seed=1).to(dtype)
    plain, tapped = LM(target), LM(target)
    tapped.tap((1, 2))
    a, b = plain.forward(PROMPT), tapped.forward(PROMPT)
    H = target.config.hidden_size
    assert torch.equal(a.hidden, b.hidden) and torch.equal(a.logits, b.logits) and a.features is a.hidden
    assert b.features.shape == (len(PROMPT), 3 * H) and torch.equal(b.features[:, :H], b.hidden)
    with torch.inference_mode():  # Hugging Face's hidden states, normed
        hs = target.get_decoder()(input_ids=torch.tensor([PROMPT]), output_hidden_states=True).hidden_states
        for i, k in enumerate((1, 2)):
            assert torch.equal(b.features[:, (i + 1) * H : (i + 2) * H], target.get_decoder().norm(hs[k])[0])
    # the rows of a later call over the cache, and a tree, carry their taps too
    assert tapped.forward([7, 8], parents=[-1, -1]).features.shape == (2, 3 * H)


def test_taps_are_checked():
    lm = LM(tiny_llama(vocab=64, layers=3))
    for bad in ((0,), (3,), (2, 1), (1, 1)):
        with pytest.raises(ValueError, match="taps"):
            lm.tap(bad)


def test_a_tapped_drafter_starts_as_the_one_it_widens_and_reads_zero_taps_after_a_drafted_parent():
    pair = tapped_pair()
    e = pair.eagle
    f = pair.target.forward(PROMPT, with_logits=False).features
    H = e.hidden_size
    e.add_target_features(0, f[:-1])
    a = e.forward(PROMPT).logits
    e.reset()
    e.add_target_features(0, torch.cat([f[:-1, :H], torch.zeros_like(f[:-1, H:])], 1))
    assert not torch.allclose(a[1:], e.forward(PROMPT).logits[1:], atol=1e-3)  # the taps matter
    with torch.no_grad():
        e.model.eagle_fc.weight[:, -2 * H :] = 0  # zero tap blocks: the drafter it widened
    e.reset()
    e.add_target_features(0, f[:-1])
    b = e.forward(PROMPT).logits
    e.reset()
    e.add_target_features(0, torch.cat([f[:-1, :H], torch.randn(len(PROMPT) - 1, 2 * H)], 1))
    torch.testing.assert_close(e.forward(PROMPT).logits, b)
    with pytest.raises(ValueError, match="tap the target"):
        e.add_target_features(0, f[:-1, :H])
    with pytest.raises(ValueError, match="already taps"):
        add_feature_taps(e.model, (1,))
    with pytest.raises(ValueError, match="copy input before"):
        add_copy_input(build_eagle_tapped(), 3)


def test_a_token_after_a_drafted_parent_reads_its_prediction_and_zero_taps():
    pair = tapped_pair(copy=False)
    e = pair.eagle
    e.add_target_features(0, pair.target.forward(PROMPT, with_logits=False).features[:-1])
    e.forward(PROMPT)
    e.forward([11])  # a drafted token
    f_hat = e._out[e.length - 1 : e.length]
    got = e._inputs([12], torch.tensor([[12]]), None, None, e.length)[0]["inputs_embeds"]
    want = eagle_inputs(e.model, torch.tensor([[12]]), with_zero_taps(f_hat, 3 * e.hidden_size)[None])
    assert torch.equal(got, want)
    with pytest.raises(ValueError, match="taps beside f"):
        eagle_inputs(e.model, torch.tensor([[12]]), f_hat[None])


def build_eagle_tapped():
    m = build_eagle(tiny_llama(vocab=64, layers=3), init_layer=0)
    add_feature_taps(m, (1,))
    return m


METHODS = [
    ("chain", {"chain": ChainConfig(3)}),
    ("dyspec", {"dyspec": DySpecConfig(budget=6)}),
    ("kary", {"tree": TreeConfig(width=2, depth=3)}),
]


@pytest.mark.parametrize("method,knobs", METHODS)
def test_greedy_equals_autoregressive_with_a_tapped_drafter(method, knobs):
    pair = tapped_pair()
    greedy_equal(pair, PROMPT, RunConfig(method=method, max_new_tokens=24, drafter="eagle", copy=True, **knobs))
    assert pair.eagle.forwards > 0


def test_the_cache_reads_the_targets_taps_of_committed_tokens():
    pair = tapped_pair()
    e, committed = pair.eagle, list(PROMPT)
    run = RunConfig(method="chain", max_new_tokens=30, drafter="eagle", copy=True)
    for r in iter_rounds(pair, PROMPT, run):
        committed += r.emitted
        assert bool(e._exact[: e.length].all())
    pair.target.reset()
    n = e.n_target
    torch.testing.assert_close(e.tfeat[:n], pair.target.forward(committed[:-1], with_logits=False).features[:n])


def test_sampled_tokens_follow_the_target_with_a_tapped_drafter():
    V, N = 12, 2000
    pair = tapped_pair(vocab=V, layers=2, taps=(1,), seed=21, hidden=16)
    target = pair.target.model
    target.generation_config.eos_token_id = None
    prompt = [3, 7, 5, 3]
    counts = torch.zeros(2, V)
    tree = {"dyspec": DySpecConfig(budget=4, level_threshold=0.0)}
    for seed in range(N):
        run = RunConfig(
            method="dyspec",
            max_new_tokens=2,
            sampling=SamplingConfig(temperature=1.0, seed=seed),
            drafter="eagle",
            copy=True,
            **tree,
        )
        out = generate(pair, prompt, run).output_ids
        counts[0, out[0]] += 1
        counts[1, out[1]] += 1
    t1 = SamplingConfig(temperature=1.0)
    with torch.inference_mode():
        p1 = warp(target(torch.tensor([prompt])).logits[0, -1], t1)
        nxt = warp(target(torch.tensor([prompt + [t] for t in range(V)])).logits[:, -1], t1)
        p2 = (p1[:, None] * nxt).sum(0)
    for c, p in ((counts[0], p1), (counts[1], p2)):
        assert chisquare(c.numpy(), (p / p.sum() * N).numpy()).pvalue > 1e-3


def test_a_tapped_drafter_round_trips_through_its_folder(tmp_path):
    pair = tapped_pair()
    save_eagle(pair.eagle.model, torch.arange(64), tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["eagle_feature_layers"] == [1, 2]
    back = load_eagle(tmp_path, pair.target.model, dtype=torch.float32)
    assert back.taps == (1, 2) and feature_taps(back.model) == (1, 2)
    want = pair.eagle.model.eagle_fc.weight.to(torch.bfloat16).float()
    torch.testing.assert_close(back.model.eagle_fc.weight, want)
    cfg = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "eagle_feature_layers": [2, 5]}))
    with pytest.raises(ValueError, match="eagle_feature_layers"):
        load_eagle(tmp_path, pair.target.model)


def test_training_features_are_the_engines(tmp_path):
    """`train.eagle.target_features` (a padded batch through Hugging Face's forward) gives the rows the engine's
    tapped target hands the drafter, and caches f apart from each tap."""
    pair = tapped_pair()
    seqs = [PROMPT, PROMPT[:5] + [11, 12]]
    tokens = torch.tensor([t for s in seqs for t in s])
    starts = torch.tensor([0, len(seqs[0]), len(tokens)])
    data = Distill(
        tokens=tokens.int(),
        starts=starts,
        prompt_len=torch.tensor([3, 3], dtype=torch.int32),
        resp=torch.tensor([0, 0, 0]),
        top_ids=torch.zeros(0, 1, dtype=torch.int32),
        top_lp=torch.zeros(0, 1, dtype=torch.float16),
        greedy=torch.tensor([True, True]),
        meta=[{}, {}],
    )
    got = target_features(pair.target.model, data, tmp_path / "f.safetensors", taps=(1, 2)).float()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f-u1.safetensors", "f-u2.safetensors", "f.safetensors"]
    for s, ids in enumerate(seqs):
        pair.target.reset()
        want = pair.target.forward(ids, with_logits=False).features.to(torch.bfloat16).float()
        torch.testing.assert_close(got[starts[s] : starts[s + 1]], want, atol=2e-2, rtol=2e-2)
    again = target_features(pair.target.model, data, tmp_path / "f.safetensors", taps=(1, 2)).float()
    assert torch.equal(again, got)
