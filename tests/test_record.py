"""What a trace records for the node inspector (`engine.tops`, tree growth, the SpecDec++ head's inputs): recording
changes no output, every record means what its name says, and traces without it still load."""

import json

import pytest
import torch
from helpers import TREES, recorded_run, recorded_specdecpp
from tiny import TEST_DEVICE

from specviz.core.config import RunConfig, SamplingConfig, SpecDecPPConfig
from specviz.core.sampling import make_rng, residual, warp
from specviz.core.trace import ACCEPTED, REJECTED, GenerationTrace
from specviz.engine.record import generate
from specviz.engine.tops import top_k, top_pairs
from specviz.methods.specdecpp.drafter import SpecDecPPDrafter
from specviz.methods.specdecpp.head import AcceptanceHead
from specviz.methods.specdecpp.inputs import CATALOG

PROMPT = [5, 9, 17, 3, 33, 8]
GREEDY, SAMPLED = SamplingConfig(), SamplingConfig(temperature=1.0, seed=11)
METHODS = [("chain", {}), ("heuristic", {}), ("lookup", {}), *TREES.items()]


@pytest.mark.parametrize("sampling", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
@pytest.mark.parametrize("method,kw", METHODS, ids=[m for m, _ in METHODS])
def test_recording_changes_no_output(tiny_pair, method, kw, sampling):
    pair = tiny_pair("random")
    on, off = recorded_run(pair, method, sampling, 8, **kw), recorded_run(pair, method, sampling, 0, **kw)
    assert on.output_ids == off.output_ids
    assert [r.tree.tokens for r in on.rounds] == [r.tree.tokens for r in off.rounds]
    assert all(r.q_top is None and r.expand_order is None and r.frontier is None for r in off.rounds)
    assert all(r.q_top is not None and len(r.q_top) == len(r.tree) for r in on.rounds)


@pytest.mark.parametrize("sampling", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
def test_specdecpp_recording_changes_no_output(tiny_pair, sampling):
    pair = tiny_pair("random")
    on, off = recorded_specdecpp(pair, sampling, 8), recorded_specdecpp(pair, sampling, 0)
    assert on.output_ids == off.output_ids
    assert all(r.head_inputs is None for r in off.rounds)
    for r in (r for r in on.rounds if r.n_drafted):
        assert len(r.head_inputs) == len(r.accept_probs) == r.n_drafted
        assert all(list(row) == list(CATALOG) for row in r.head_inputs)
        for i, row in enumerate(r.head_inputs, 1):  # depth counts from 1, read as min(depth, 8) / 8
            assert row["depth"] == pytest.approx(min(i, 8) / 8)
            assert row["log_q"] == pytest.approx(float(torch.tensor(r.tree.q[i]).clamp_min(1e-6).log()), abs=1e-4)


@pytest.mark.parametrize("sampling", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
@pytest.mark.parametrize("method,kw", METHODS, ids=[m for m, _ in METHODS])
def test_tops_hold_q_and_p_of_each_node(tiny_pair, method, kw, sampling):
    """q_top[c] is the distribution c was drawn from and p_top[c] the one it was judged against: where c's token is
    among them, its probability is the trace's q and p of c; greedy trees draw each node's top tokens in order."""
    trace = recorded_run(tiny_pair("random"), method, sampling, 64, **kw)
    checked = 0
    for r in trace.rounds:
        assert r.q_top[0] is None and r.p_top[0] is None
        for c in range(1, len(r.tree)):
            q_top, p_top = dict(map(tuple, r.q_top[c])), dict(map(tuple, r.p_top[c]))
            assert list(q_top.values()) == sorted(q_top.values(), reverse=True)
            assert r.tree.tokens[c] in q_top  # 64 pairs cover the tiny vocabulary's support
            assert q_top[r.tree.tokens[c]] == pytest.approx(r.tree.q[c], rel=1e-3, abs=1e-6)
            assert p_top.get(r.tree.tokens[c], 0.0) == pytest.approx(r.p[c], rel=1e-3, abs=1e-6)
            if sampling.greedy and r.status[c] == ACCEPTED:
                assert r.tree.tokens[c] == max(p_top, key=p_top.get)  # the target's argmax
            checked += 1
    assert checked >= 4


def test_residual_top_is_the_residual_after_each_rejection(tiny_pair):
    """A sampled chain: at its first rejected node, the residual is norm(max(0, p - q)) of the root's p and q."""
    pair = tiny_pair("random")
    rounds = [r for seed in range(6) for r in recorded_run(pair, "chain", SamplingConfig(1.0, seed=seed), 64).rounds]
    seen = 0
    for r in rounds:
        for c, st in enumerate(r.status):
            top = (r.residual_top or [None] * len(r.tree))[c]
            assert (top is not None) == (st == REJECTED)
            if st == REJECTED and c == 1:
                p = torch.tensor([dict(map(tuple, r.p_top[1])).get(t, 0.0) for t in range(64)])
                q = torch.tensor([dict(map(tuple, r.q_top[1])).get(t, 0.0) for t in range(64)])
                want = top_pairs(residual(p, q)[None], 64)[0]
                assert [t for t, _ in top[:3]] == [t for t, _ in want[:3]]
                assert [x for _, x in top] == pytest.approx([x for _, x in want], abs=2e-3)
                seen += 1
    assert seen


def test_greedy_rounds_have_no_residual(tiny_pair):
    trace = recorded_run(tiny_pair("random"), "dyspec", GREEDY, 8, **TREES["dyspec"])
    assert all(r.residual_top is None and r.u is None for r in trace.rounds)


@pytest.mark.parametrize("sampling", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
def test_dyspec_growth_is_recorded(tiny_pair, sampling):
    """expand_order names each node once in the order it joined; values are the products of q along each path; the
    frontier's first slot is the one DySpec grew: the new node hangs under it, and no slot beat it."""
    trace = recorded_run(tiny_pair("random"), "dyspec", sampling, 8, **TREES["dyspec"])
    grown = 0
    for r in (r for r in trace.rounds if r.n_drafted):
        n = len(r.tree)
        assert sorted(r.expand_order) == list(range(1, n))
        assert r.values[0] == 1.0
        for c in range(1, n):
            assert r.values[c] == pytest.approx(r.values[r.tree.parents[c]] * r.tree.q[c], rel=1e-4, abs=1e-6)
        assert len(r.frontier) == n - 1
        for c, slots in zip(r.expand_order, r.frontier):
            (u, v, copy), *rest = slots
            assert u == r.tree.parents[c] and not copy and len(slots) <= 8
            assert all(v >= w for _, w, _ in rest)
            grown += 1
    assert grown > 10


def test_static_trees_record_order_and_values_but_no_frontier(tiny_pair):
    trace = recorded_run(tiny_pair("random"), "kary", GREEDY, 8)
    drafted = [r for r in trace.rounds if r.n_drafted]
    assert drafted and all(r.expand_order == tuple(range(1, len(r.tree))) and r.frontier is None for r in drafted)


def test_a_trace_with_records_round_trips_and_older_ones_load(tiny_pair):
    trace = recorded_run(tiny_pair("random"), "dyspec", SAMPLED, 8, **TREES["dyspec"])
    back = GenerationTrace.from_json(trace.to_json())
    assert json.loads(back.to_json()) == json.loads(trace.to_json())
    old = json.loads(trace.to_json())
    for r in old["rounds"]:
        for key in ("q_top", "p_top", "residual_top", "expand_order", "values", "frontier", "u"):
            r.pop(key)
    old["config"].pop("record_top")
    legacy = GenerationTrace.from_dict(old)
    assert legacy.output_ids == trace.output_ids and legacy.rounds[0].q_top is None


def test_record_top_is_checked():
    for bad in (-1, 65, 2.5, True):
        with pytest.raises(ValueError, match="record top"):
            RunConfig(record_top=bad)


def test_warped_top_pairs_are_sorted_and_drop_zeros():
    p = warp(torch.tensor([[3.0, 1.0, 2.0, -50.0]]), SamplingConfig(temperature=1.0, top_k=3))
    pairs = top_pairs(p, 4)[0]
    assert [t for t, _ in pairs] == [0, 2, 1] and sum(x for _, x in pairs) == pytest.approx(1.0, abs=1e-3)


@pytest.mark.parametrize("V", [49152, 1000, 200, 5])
def test_top_k_over_the_best_blocks_is_torchs_top_k(V):
    """The top k of a vocabulary found within its blocks of largest maxima: torch.topk's values, and distinct token
    ids holding them (equal values may come in another order), with the top entries in one block or spread over
    many, and k past the vocabulary or the number of blocks."""
    g = torch.Generator().manual_seed(V)
    rows = torch.softmax(torch.randn(4, V, generator=g) * 3, -1)
    rows[1, 7 : min(V, 15)] += 1.0  # eight neighbours on top: one block holds the whole top
    rows[2, torch.randperm(V, generator=g)[: min(V, 30)]] = 0.0  # zeros, as outside a draft's support
    for k in (1, 8, 20):
        vals, ids = top_k(rows, k)
        ref_vals, ref_ids = torch.topk(rows, min(k, V), dim=-1)
        assert torch.equal(vals, ref_vals) and torch.equal(rows.gather(1, ids), vals)
        assert all(len(set(r)) == len(r) for r in ids.tolist())
        around = torch.topk(rows, min(k + 1, V), dim=-1).values  # the top and the next: no two equal, no choice
        untied = [i for i in range(4) if len(set(around[i].tolist())) == around.shape[1]]
        assert torch.equal(ids[untied], ref_ids[untied])


def test_the_drafter_and_the_pair_describe_themselves(tiny_pair):
    """The trace's model description is the pair's own and the drafter's own: the recorder adds nothing."""
    pair = tiny_pair("random")
    head = AcceptanceHead(pair.draft.config.hidden_size, 1, rng=make_rng(0))
    head.card = {"lag": True, "reject_weight": 6.0, "heldout_auc": 0.8}
    d = SpecDecPPDrafter(pair.draft, GREEDY, make_rng(0, TEST_DEVICE), head, SpecDecPPConfig(0.5, 1, 3))
    run = RunConfig(method="specdecpp", max_new_tokens=4)
    models = generate(pair, PROMPT, run, drafter=d).models
    assert models == {**pair.describe(), **d.describe()}
    assert models["drafter"] == "model" and models["acceptance_head"] == head.card
    ar = generate(pair, PROMPT, RunConfig(method="ar", max_new_tokens=2)).models
    assert ar["drafter"] == "none" and ar["vocab_size"] == pair.target.vocab_size
    copying = generate(pair, PROMPT, RunConfig(method="chain", max_new_tokens=4, copy=True)).models
    assert copying["drafter"] == "model"  # the copy switch describes the drafter inside it
