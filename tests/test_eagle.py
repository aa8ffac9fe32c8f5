"""The EAGLE-style feature drafter: its feature bookkeeping, losslessness with every method, how the rest of specviz
chooses and uses it (its folder: test_eagle_folder.py)."""

import os
from dataclasses import replace

import pytest
import torch
from helpers import COPY, LOOPY, eagle_for, eagle_pair
from lossless import greedy_equal
from scipy.stats import chisquare
from tiny import tiny_llama

from specviz.analysis.costs import measure_costs
from specviz.core.config import (
    ChainConfig,
    DySpecConfig,
    RunConfig,
    SamplingConfig,
    SpecDecPPConfig,
    TreeConfig,
)
from specviz.core.sampling import make_rng, warp
from specviz.core.served import step_starts
from specviz.engine.loop import iter_rounds
from specviz.engine.record import generate
from specviz.engine.replay import replay
from specviz.methods.registry import drafter_kind
from specviz.methods.specdecpp.drafter import SpecDecPPDrafter
from specviz.methods.specdecpp.head import AcceptanceHead
from specviz.methods.specdecpp.inputs import CATALOG
from specviz.models.eagle import (
    EagleLM,
    add_copy_input,
    build_eagle,
    eagle_inputs,
    lookup_tensors,
    previous_features,
    sequence_lookups,
)
from specviz.models.lm import LM
from specviz.models.pair import Pair
from specviz.tools.bench.specs import BenchConfig, parse_settings
from specviz.train.config import HeadTrainConfig
from specviz.train.draft_eval import step_costs
from specviz.train.eagle import _pass
from specviz.train.head_data import batch_rows

PROMPT = [5, 9, 3, 17, 4]


@COPY
def test_features_drive_the_draft_and_one_call_equals_many(copy):
    pair = eagle_pair(copy=copy)
    e = pair.eagle
    prompt = LOOPY if copy else PROMPT
    f = pair.target.forward(prompt, with_logits=False).hidden
    e.add_target_features(0, f[:-1])
    a = e.forward(prompt).logits  # one call, exact features
    e.reset()
    e.add_target_features(0, f[:-1])
    b = torch.cat([e.forward([t]).logits for t in prompt])  # token by token
    assert torch.allclose(a, b, atol=1e-5)
    e.reset()
    e.add_target_features(0, torch.zeros_like(f[:-1]))
    c = e.forward(prompt).logits
    assert not torch.allclose(a[1:], c[1:], atol=1e-3)  # the features matter


def test_sequence_lookups_read_each_prefix():
    ys, ns = sequence_lookups(LOOPY, 3)
    # after 5 9 3 5 the bigram... (3, 5) has not been followed yet, (5,) was followed by 9: y = 9, n = 1
    assert (ys[3], ns[3]) == (9, 1)
    assert (ys[4], ns[4]) == (3, 2) and (ys[5], ns[5]) == (5, 3)  # 5 9 -> 3; 5 9 3 -> 5
    assert ys[:3] == [-1, -1, -1] and ns[:3] == [0, 0, 0]  # nothing repeats yet
    assert (ys[9], ns[9]) == (-1, 0)  # 4 is new
    y, n = lookup_tensors([LOOPY[:4], LOOPY], 3, left=True)
    assert y.shape == (2, 12) and y[0, :8].tolist() == [-1] * 8 and n[0, -1] == 1 and y[0, -1] == 9


def test_the_engine_reads_the_lookup_the_drafter_was_trained_with():
    """Committed tokens the target has run read exactly the training lookup (every position's own prefix);
    a drafted token reads the committed tokens' n-grams and its own path's newest tokens."""
    pair = eagle_pair(copy=True)
    e = pair.eagle
    x = torch.tensor([LOOPY])
    f = pair.target.forward(LOOPY, with_logits=False).hidden
    e.add_target_features(0, f)
    got = e.forward(LOOPY).hidden
    with torch.inference_mode():
        want = _pass(e.model, x, previous_features(f[None]), lookup_tensors([LOOPY], 3))[0]
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    e.reset()  # the target has run LOOPY[:8]; drafted: 9, then 17 4
    e.add_target_features(0, f[:7])
    e.forward(LOOPY[:8])
    y, n = e._lookups([3, 17], [7, 8], 8)  # 3 drafted after ...5 9, then 17 after it
    assert (int(n[0, 0]), int(y[0, 0])) == (3, 5)  # 5 9 | 3: "5 9 3" was followed by 5
    assert (int(n[0, 1]), int(y[0, 1])) == (0, -1)  # 17 is new
    y, n = e._lookups([9], [6], 8)  # a sibling of slot 7: hangs off slot 6 (5)
    assert (int(n[0, 0]), int(y[0, 0])) == (3, 3)  # 9 3 5 | 9: "3 5 9" was followed by 3
    e.crop(3)  # shorter than the index: rebuilt, then re-read
    assert e.forward(LOOPY[3:8]).logits.shape[0] == 5


def test_a_drafter_with_the_copy_input_starts_as_the_one_it_widens():
    pair = eagle_pair()
    e = pair.eagle
    f = pair.target.forward(LOOPY, with_logits=False).hidden
    e.add_target_features(0, f)
    a = e.forward(LOOPY).logits
    add_copy_input(e.model, 3, gain=30.0)
    b = EagleLM(e.model)
    b.add_target_features(0, f)
    torch.testing.assert_close(b.forward(LOOPY).logits, a)
    with pytest.raises(ValueError, match="copy"):
        eagle_inputs(e.model, torch.tensor([[1]]), torch.zeros(1, 1, e.hidden_size))


@COPY
def test_tree_nodes_read_their_parents_prediction(copy):
    pair = eagle_pair(copy=copy)
    e = pair.eagle
    e.add_target_features(0, pair.target.forward(PROMPT[:-1], with_logits=False).hidden)
    e.forward(PROMPT)  # root = PROMPT[-1] at slot 4
    root = e.length - 1
    # two children of the root in one forward, then a grandchild under the second child
    vis = torch.zeros(2, e.length, dtype=torch.bool)
    vis[:, : root + 1] = True
    kids = e.forward([11, 12], parents=[-1, -1], visible=vis).logits
    vis2 = torch.zeros(1, e.length, dtype=torch.bool)
    vis2[:, : root + 1] = True
    vis2[0, root + 2] = True
    grand = e.forward([13], parents=[-1], visible=vis2).logits
    # the same branches as plain chains
    for branch, want in (([11], kids[0]), ([12], kids[1]), ([12, 13], grand[0])):
        e.crop(root + 1)
        for t in branch:
            got = e.forward([t]).logits[-1]
        assert torch.allclose(got, want, atol=1e-5)


def test_keep_drops_positions_read_through_predicted_features():
    pair = eagle_pair()
    e = pair.eagle
    e.add_target_features(0, torch.randn(len(PROMPT) - 1, e.hidden_size))
    e.forward(PROMPT)
    e.forward([7])
    e.forward([8])
    e.keep(list(range(len(PROMPT) + 2)))  # a drafter keeping its two accepted nodes
    assert e.length == len(PROMPT)  # they are re-read next round with exact features
    e.crop(2)
    assert e.length == 2


METHODS = [
    ("chain", {"chain": ChainConfig(3)}),
    ("heuristic", {}),
    ("dyspec", {"dyspec": DySpecConfig(budget=6)}),
    ("dyspec", {"dyspec": DySpecConfig(budget=6, level_threshold=0.0)}),
    ("kary", {"tree": TreeConfig(width=2, depth=3)}),
]


@COPY
@pytest.mark.parametrize("method,knobs", METHODS)
def test_greedy_equals_autoregressive_with_eagle(method, knobs, copy):
    pair = eagle_pair(copy=copy)
    prompt = LOOPY if copy else PROMPT
    trace = greedy_equal(pair, prompt, RunConfig(method=method, max_new_tokens=24, drafter="eagle", copy=copy, **knobs))
    assert trace.config["drafter"] == "eagle"
    assert pair.eagle.forwards > 0


@COPY
def test_cache_holds_only_exactly_read_committed_tokens_between_rounds(copy):
    """After every round the drafter's cache is a prefix of the committed tokens, each read with the target's
    feature of the position before it (accepted drafted positions are dropped and re-read); the copy input's
    index holds committed tokens only."""
    pair = eagle_pair(vocab=64, copy=copy)
    e, committed = pair.eagle, list(PROMPT)
    for r in iter_rounds(pair, PROMPT, RunConfig(method="chain", max_new_tokens=40, drafter="eagle", copy=copy)):
        committed += r.emitted
        assert e.length < len(committed) and bool(e._exact[: e.length].all())
        assert e.n_target == len(committed) - 1 or len(committed) - len(PROMPT) == 40
        assert not copy or (e._tok == committed[: e.length] and e.index.ctx == committed[: len(e.index.ctx)])


V, N = 12, 2000


TREE = {"dyspec": DySpecConfig(budget=4, level_threshold=0.0)}


@pytest.mark.parametrize(
    "method,knobs,copy,ctx",
    [
        ("chain", {"chain": ChainConfig(2)}, False, False),
        ("dyspec", TREE, False, False),
        ("dyspec", TREE, True, False),
        ("chain", {"chain": ChainConfig(2)}, False, True),
        ("dyspec", TREE, True, True),
    ],
)
def test_sampled_tokens_follow_the_target_with_eagle(method, knobs, copy, ctx):
    """ctx: a reduced head (ids 0..3) with the context vocabulary: the support holds the prompt's 5 and 7 from the
    start and grows with the first committed token when that one is outside it."""
    target = tiny_llama(vocab=V, layers=1, hidden=16, seed=21)
    target.generation_config.eos_token_id = None
    pair = Pair(
        LM(target),
        LM(tiny_llama(vocab=V, layers=1, hidden=16, seed=22)),
        None,
        {},
        eagle_for(target, 3, copy=copy, head_ids=torch.arange(4) if ctx else None, context_vocab=ctx),
    )
    prompt = [3, 7, 5, 3]
    counts = torch.zeros(2, V)
    for seed in range(N):
        cfg = SamplingConfig(temperature=1.0, seed=seed)
        out = generate(
            pair, prompt, RunConfig(method=method, max_new_tokens=2, sampling=cfg, drafter="eagle", copy=copy, **knobs)
        ).output_ids
        counts[0, out[0]] += 1
        counts[1, out[1]] += 1
    with torch.inference_mode():
        p1 = warp(target(torch.tensor([prompt])).logits[0, -1], SamplingConfig(temperature=1.0))
        p2 = (
            p1[:, None]
            * warp(
                target(torch.tensor([prompt + [t] for t in range(V)])).logits[:, -1], SamplingConfig(temperature=1.0)
            )
        ).sum(0)
    for c, p in ((counts[0], p1), (counts[1], p2)):
        assert chisquare(c.numpy(), (p / p.sum() * N).numpy()).pvalue > 1e-3


def test_context_vocabulary_covers_the_context_only():
    """With context_vocab the drafter's q is positive on its head ids and the tokens fed since reset, exactly zero
    elsewhere; a reset forgets the context; without it the head alone."""
    target = tiny_llama(vocab=64, seed=0)
    ids = torch.tensor([2, 5, 7])
    for ctx in (True, False):
        e = eagle_for(target, 1, head_ids=ids, context_vocab=ctx)
        e.add_target_features(0, torch.randn(4, 32))
        q = torch.softmax(e.forward([40, 9, 50, 7]).logits[-1], -1)
        want = [2, 5, 7, 9, 40, 50] if ctx else [2, 5, 7]
        assert q.nonzero().flatten().tolist() == want and sorted(e.support.tolist()) == want
        e.reset()
        assert torch.softmax(e.forward([60]).logits[-1], -1).nonzero().flatten().tolist() == (
            [2, 5, 7, 60] if ctx else [2, 5, 7]
        )
        for n in range(8, 64, 3):  # the support buffer grows past its first capacity
            e.forward(list(range(n - 3, n)))
        assert len(e.support) == len(set(e.support.tolist()))


def test_reduced_head_is_exactly_zero_outside():
    ids = torch.tensor([2, 5, 7, 9, 11, 17])
    pair = eagle_pair(head_ids=ids)
    run = RunConfig(method="chain", max_new_tokens=16, drafter="eagle", sampling=SamplingConfig(temperature=1.0))
    for r in iter_rounds(pair, PROMPT, run):
        assert all(t in ids.tolist() for t in r.tree.tokens[1:])


def test_drafter_choice():
    pair = eagle_pair()
    assert pair.drafter_lm("auto") is pair.eagle and pair.drafter_lm("model") is pair.draft
    plain = Pair(pair.target, pair.draft, None, {})
    assert plain.drafter_lm("auto") is plain.draft
    with pytest.raises(ValueError, match="no EAGLE drafter"):
        plain.drafter_lm("eagle")
    with pytest.raises(ValueError, match="drafter"):
        RunConfig(drafter="both")


def test_bench_spec_suffix():
    s = parse_settings(["chain:1+eagle", "chain:1+model@stock", "dyspec:4"], BenchConfig(), ["ar", "chain", "dyspec"])
    keys = {x.key: x for x in s}
    assert keys["chain:1+eagle"].drafter == "eagle"
    assert keys["chain:1+model@stock"].drafter == "model" and keys["chain:1+model@stock"].kernels == "stock"
    assert keys["dyspec:4"].drafter == "auto"
    with pytest.raises(ValueError, match="standalone"):
        parse_settings(["hf-assist+eagle"], BenchConfig(), ["ar"])
    with pytest.raises(ValueError, match=r"\+"):
        parse_settings(["chain+medusa"], BenchConfig(), ["ar", "chain"])


def test_resolved_drafter_is_recorded():
    pair = eagle_pair()
    assert generate(pair, PROMPT, RunConfig(method="chain", max_new_tokens=4)).models["drafter"] == "eagle"
    assert (
        generate(pair, PROMPT, RunConfig(method="chain", max_new_tokens=4, drafter="model")).models["drafter"]
        == "model"
    )
    assert drafter_kind(RunConfig(method="ar"), pair) == "none"
    assert drafter_kind(RunConfig(method="specdecpp"), pair) == "model"  # no head trained on the EAGLE drafter
    assert drafter_kind(RunConfig(method="specdecpp", drafter="eagle"), pair) == "eagle"


@pytest.mark.parametrize("copy,taps", [(False, ()), (True, ()), (False, (1,))], ids=["plain", "copy-input", "taps"])
def test_acceptance_head_rows_match_the_engine(copy, taps):
    """Head data for a feature drafter (train/head_data.batch_rows), greedy regime, no target-token mixing:
    each label is 1[target argmax = drafter argmax] with the drafter reading the target's text through exact
    features (and the target's taps), and the first drafted token's row holds the hidden state the engine computes
    when it drafts it."""
    pair = eagle_pair(copy=copy, taps=taps)
    cfg = HeadTrainConfig(prompts=2, new_tokens=6, gen_batch=1, greedy_fraction=1.0, mixing_ratio=0.0)
    rows = batch_rows(pair.target, pair.eagle, [PROMPT], cfg, True, torch.Generator().manual_seed(0), set(), 0)
    target, e = pair.target, pair.eagle
    target.reset()
    fwd = target.forward(PROMPT)
    feats, xs = [fwd.features], []
    for _ in range(cfg.new_tokens):
        xs.append(int(fwd.logits[-1].argmax()))
        fwd = target.forward([xs[-1]])
        feats.append(fwd.features)
    e.reset()
    e.add_target_features(0, torch.cat(feats))
    q = e.forward(PROMPT + xs[:-1]).logits[len(PROMPT) - 1 :]  # q for X_0 .. X_5
    assert rows["label"].tolist() == [float(a == b) for a, b in zip(q.argmax(-1).tolist(), xs)]
    e.reset()  # a round's start: the target has read all but the last token
    e.add_target_features(0, feats[0][:-1])
    root = e.forward(PROMPT).hidden[-1]  # the state that drafts D_0
    first = e.forward([int(q[0].argmax())]).hidden[-1]  # the engine drafts D_0
    if not copy or int(q[0].argmax()) != PROMPT[-1]:  # else the rows' whole-sequence lookup has "4 -> D_0" indexed
        torch.testing.assert_close(rows["features"][0], first.float(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(rows["features_before"][0], root.float(), rtol=1e-4, atol=1e-5)
    # no mixing: every row is drafted in one round from the prompt, whose last token the target drew at
    # position len(PROMPT) - 2: each row's target_entropy is that distribution's, as the drafter computes it
    with torch.inference_mode():
        want = float(
            torch.special.entr(
                torch.softmax(target.logits(feats[0][len(PROMPT) - 2 : len(PROMPT) - 1, : e.hidden_size]), -1)
            ).sum()
        )
    tent = rows["columns"][:, CATALOG.index("target_entropy")]
    torch.testing.assert_close(tent, torch.full_like(tent, want))
    head = AcceptanceHead(e.config.hidden_size, 1, rng=make_rng(0), inputs=("log_q", "target_entropy"))
    d = SpecDecPPDrafter(e, SamplingConfig(), make_rng(0), head, SpecDecPPConfig(0.5, 2, 4))
    d.begin(PROMPT)
    d.see_target(0, feats[0][:-1])
    assert d.target_entropy() == pytest.approx(want, rel=1e-5)


def test_step_costs_of_the_eagle_drafter():
    """sweep pick-h times the drafter SpecDec++ will run: measure_costs(draft=...) steps that one."""
    pair = eagle_pair()
    before = pair.eagle.forwards, pair.draft.forwards
    costs = measure_costs(pair, context=8, max_tokens=3, repeats=1, draft=pair.eagle)
    assert costs.draft_ms > 0 and len(costs.verify_ms) == 3
    assert pair.eagle.forwards > before[0] and pair.draft.forwards == before[1]
    assert pair.eagle.length == 0 and pair.target.length == 0


def test_step_costs_flag_a_machine_busy_while_they_are_timed(monkeypatch):
    """The card's step times (train.draft_eval.step_costs) carry the load average where it exceeds the cores."""
    pair = eagle_pair()
    pair = replace(pair, draft=pair.eagle)
    monkeypatch.setattr(os, "getloadavg", lambda: (64.0, 1.0, 1.0))
    assert step_costs(pair, list(range(3, 11)), reps=1)["busy_load"] == 64.0
    monkeypatch.setattr(os, "getloadavg", lambda: (0.1, 1.0, 1.0))
    assert "busy_load" not in step_costs(pair, list(range(3, 11)), reps=1)


def test_fresh_drafter_is_built_where_the_target_lives():
    """A target on another device (here "meta", standing in for CUDA) gets a drafter on that device: building
    it on the CPU broke every EAGLE test on a GPU (assets/bench/cuda-h200/README.md)."""
    target = tiny_llama(vocab=64).to("meta")
    assert {p.device.type for p in build_eagle(target).parameters()} == {"meta"}


@COPY
@pytest.mark.parametrize("method,knobs", [METHODS[0], METHODS[2]])
def test_a_replayed_step_with_eagle_is_the_round_from_that_prefix(method, knobs, copy):
    """Replaying another decoder's steps (`engine.replay`) with the feature drafter: the steps past the tree's
    matching path reach the drafter's features too, so each round equals a fresh run's first from its prefix."""
    pair = eagle_pair(copy=copy)
    prompt = LOOPY if copy else PROMPT
    run = RunConfig(method=method, max_new_tokens=20, drafter="eagle", copy=copy, **knobs)
    out = list(generate(pair, prompt, replace(run, method="ar")).output_ids)
    acc = [2, 0, 3, 1, 0, 2, 1, 0]
    rep = replay(pair, prompt, out, acc, run, "test engine")
    for rnd, start in zip(rep.rounds, step_starts(len(out), acc)):
        fresh = generate(pair, prompt + out[:start], replace(run, max_new_tokens=64)).rounds[0]
        assert rnd.tree.tokens == fresh.tree.tokens and rnd.status == fresh.status, rnd.index
