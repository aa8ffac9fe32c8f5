"""Token trees: DySpec (heap and level variants) and the fixed trees (k-ary, Sequoia, chain/star shapes).

Greedy runs must equal the autoregressive baseline; the draft cache must stay equal to a fresh
computation of the committed text over many rounds; every node's draft distribution must equal a
sequential forward of its path; the Sequoia DP must find the best tree; and at T > 0 the emitted
tokens must follow the target (chi-square), which fails when the residual update is skipped.
"""

import itertools
from types import SimpleNamespace

import pytest
import torch
from helpers import bigram_pvalue, bigram_setup, path_to, sharp_pair
from lossless import greedy_equal
from scipy.stats import chisquare

from specviz.core.config import DySpecConfig, RunConfig, SamplingConfig, TreeConfig
from specviz.core.priors import SEQUOIA_FALLBACK_ACCEPTANCE
from specviz.core.sampling import make_rng, warp
from specviz.core.trace import DraftTree
from specviz.core.tree import children, depths
from specviz.core.verify import verify_sampled
from specviz.engine.loop import iter_rounds
from specviz.methods.base import Drafter
from specviz.methods.trees.acceptance import load_acceptance, save_acceptance
from specviz.methods.trees.dyspec import DySpecDrafter
from specviz.methods.trees.grow import draw_order
from specviz.methods.trees.static import (
    StaticTreeDrafter,
    expected_tokens,
    kary,
    sequoia,
)
from specviz.models.lm import LM
from specviz.models.pair import Pair

PROMPT = [5, 9, 17, 3, 33, 8]


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread (conftest)


TREE_RUNS = {
    "dyspec-heap": RunConfig(method="dyspec", dyspec=DySpecConfig(budget=8, max_depth=5, level_threshold=0.0)),
    "dyspec-level": RunConfig(method="dyspec", dyspec=DySpecConfig(budget=8, max_depth=5, level_threshold=0.08)),
    "kary": RunConfig(method="kary", tree=TreeConfig(width=2, depth=2)),
    "sequoia": RunConfig(method="sequoia", tree=TreeConfig(budget=8, max_depth=5)),
}


N_GREEDY = 20


@pytest.mark.parametrize("draft", ["same", "random"])
@pytest.mark.parametrize("name", list(TREE_RUNS))
def test_greedy_equals_autoregressive(draft, name):
    tr = greedy_equal(sharp_pair(draft), PROMPT, TREE_RUNS[name], n=N_GREEDY)
    if draft == "same":  # every round follows the first-child chain to a leaf
        for r in tr.rounds[:-1]:
            kids, u = children(r.tree.parents), 0
            while kids[u]:
                u = kids[u][0]
            assert list(r.accepted_path) == path_to(r.tree.parents, u)[1:]
        assert len(tr.output_ids) / len(tr.rounds) > 2
    for r in tr.rounds:
        assert r.n_drafted <= 8 and max(depths(r.tree.parents)) <= 5


@pytest.mark.parametrize("shape", [[-1, 0, 1, 2], [-1, 0, 0, 0], kary(3, 2)])
def test_static_shapes_greedy(shape):
    pair = sharp_pair("random")
    drafter = StaticTreeDrafter(pair.draft, SamplingConfig(), make_rng(0), shape)
    greedy_equal(pair, PROMPT, RunConfig(method="kary"), n=N_GREEDY, drafter=drafter)


def _drafters(pair, sampling, rng):
    yield DySpecDrafter(pair.draft, sampling, rng, DySpecConfig(budget=10, max_depth=4, level_threshold=0.0))
    yield DySpecDrafter(pair.draft, sampling, rng, DySpecConfig(budget=10, max_depth=4, level_threshold=0.05))
    yield StaticTreeDrafter(pair.draft, sampling, rng, sequoia(8, (0.6, 0.2, 0.1), 4))


def _keeping_trees(drafter) -> list:
    """The GrowingTree of each round the drafter starts from now on, in a list (the test reads its distributions)."""
    grew, start = [], drafter.start

    def keeping(*args, **kwargs):
        grew.append(start(*args, **kwargs))
        return grew[-1]

    drafter.start = keeping
    return grew


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_draft_cache_stays_consistent(temperature):
    """After each round the draft cache equals a fresh forward of the committed text it holds, and every
    node's draft distribution (tree-masked, batched) equals a sequential forward of its path."""
    pair = sharp_pair("near")
    sampling = SamplingConfig(temperature=temperature, seed=3)
    rng = make_rng(3)
    fresh = LM(pair.draft.model)
    for drafter in _drafters(pair, sampling, rng):
        committed, checked = list(PROMPT), 0
        run = RunConfig(method="dyspec", max_new_tokens=20, sampling=sampling)
        grew = _keeping_trees(drafter)
        for rnd in iter_rounds(pair, PROMPT, run, drafter, rng):
            if rnd.index < 2 and rnd.n_drafted:  # D at each computed node vs its path, sequentially
                grown = grew[-1]
                for u, D in grown.D.items():
                    path = [grown.tokens[i] for i in path_to(grown.parents, u)[1:]]
                    fresh.reset()
                    ref = warp(
                        fresh.forward(committed + path).logits[-1],
                        sampling,
                        temperature=drafter.value_temperature if sampling.greedy else None,
                    )
                    assert torch.allclose(D, ref, atol=1e-4), (rnd.index, u)
                    checked += 1
            committed += rnd.emitted
            L = drafter.lm.length
            assert L <= len(committed) - 1
            fresh.reset()
            fresh.forward(committed[:L])
            for a, b in zip(drafter.lm.cache.layers, fresh.cache.layers):
                assert torch.allclose(a.keys, b.keys, atol=1e-4) and torch.allclose(a.values, b.values, atol=1e-4)
        assert rnd.index >= 3 and checked >= 3


def test_level_variant_equals_heap_at_its_size():
    """Algorithm 2 with threshold t builds Algorithm 1's tree of the same size (DySpec App. A.1)."""
    pair = sharp_pair("near")
    for t in (0.2, 0.05):
        level = DySpecDrafter(
            pair.draft, SamplingConfig(), make_rng(0), DySpecConfig(budget=200, max_depth=6, level_threshold=t)
        )
        level.begin(PROMPT)
        a = level.propose(PROMPT, 50).tree
        heap = DySpecDrafter(
            pair.draft, SamplingConfig(), make_rng(0), DySpecConfig(budget=len(a) - 1, max_depth=6, level_threshold=0.0)
        )
        heap.begin(PROMPT)
        prop = heap.propose(PROMPT, 50)
        b = prop.tree

        def paths(tree):
            return {tuple(tree.tokens[i] for i in path_to(tree.parents, u)) for u in range(len(tree))}

        assert paths(a) == paths(b) and len(a) > 3
        assert prop.draft_forwards <= len(b)  # lazy batching: fewer forwards than nodes


def test_dyspec_respects_budget_remaining_and_eos():
    pair = sharp_pair("same")
    for level in (0.0, 0.01):
        d = DySpecDrafter(
            pair.draft, SamplingConfig(), make_rng(0), DySpecConfig(budget=20, max_depth=8, level_threshold=level)
        )
        d.begin(PROMPT)
        tree = d.propose(PROMPT, 3).tree
        assert 1 <= len(tree) - 1 <= 20 and max(depths(tree.parents)) <= 2
        d.begin(PROMPT)
        d.eos_ids = {tree.tokens[1]}  # pretend the first drafted token is EOS
        tree2 = d.propose(PROMPT, 50).tree
        assert tree2.tokens[1] == tree.tokens[1] and 1 not in tree2.parents
        d.begin(PROMPT)
        assert len(d.propose(PROMPT, 1).tree) == 1  # one token left: the target's alone


def test_kary_shape():
    assert kary(2, 2) == [-1, 0, 0, 1, 1, 2, 2]
    assert kary(3, 1) == [-1, 0, 0, 0]
    assert len(kary(2, 3)) == 1 + 2 + 4 + 8


def test_sequoia_dp_hand_checked():
    # P = (0.6, 0.3), 3 drafted nodes: chain 1+.6+.36+.216 = 2.176; root with 2 children, the first with
    # one child: 1+.6+.3+.36 = 2.26 (best); one child with 2 children: 2.14; star: 1.9.
    tree = sequoia(3, (0.6, 0.3), 3)
    assert tree == [-1, 0, 0, 1]
    assert expected_tokens(tree, (0.6, 0.3)) == pytest.approx(2.26)
    assert sequoia(2, (0.8, 0.1), 4) == [-1, 0, 1]  # 2.44 (chain) beats 1.9 (star)
    assert sequoia(2, (0.4, 0.35), 4) == [-1, 0, 0]  # 1.75 (star) beats 1.56 (chain)
    assert sequoia(5, (0.8, 0.1), 1) == [-1, 0, 0]  # depth 1 and two ranks: only 2 nodes fit


def test_sequoia_vector_is_the_drafters_own(tmp_path):
    """Each drafter of a pair keeps its own measured vector: the EAGLE drafter never borrows the standalone's."""
    path = tmp_path / "acceptance.json"
    save_acceptance({"target": "t", "draft": "d", "temperature": 0.0, "vector": [0.3, 0.1]}, path)
    save_acceptance({"target": "t", "draft": "e", "temperature": 1.0, "vector": [0.5, 0.2]}, path)
    assert load_acceptance("t", "d", 0.0, path) == (0.3, 0.1)
    assert load_acceptance("t", "e", 0.0, path) == (0.5, 0.2)  # nearest temperature, same drafter
    assert load_acceptance("t", "x", 0.0, path) == SEQUOIA_FALLBACK_ACCEPTANCE
    draft, eagle = object(), object()
    pair = Pair(SimpleNamespace(), draft, None, {"draft": "d", "eagle": "e"}, eagle)
    assert pair.drafter_name(eagle) == "e" and pair.drafter_name(draft) == "d"


def _ordered_trees(n):
    """All ordered rooted trees with n nodes, as parent arrays."""
    seen = set()
    for par in itertools.product(*[range(i) for i in range(1, n)]):
        parents = [-1, *par]
        kids, rank = children(parents), {0: ()}
        for u in range(n):
            for k, c in enumerate(kids[u]):
                rank[c] = rank[u] + (k,)
        key = frozenset(rank.values())
        if key not in seen:
            seen.add(key)
            yield parents


def test_sequoia_dp_matches_brute_force():
    g = torch.Generator().manual_seed(0)
    for _ in range(12):
        B = int(torch.randint(1, 4, (), generator=g))
        P = tuple(sorted(torch.rand(B, generator=g).tolist(), reverse=True))
        n, D = int(torch.randint(1, 6, (), generator=g)), int(torch.randint(1, 5, (), generator=g))
        best = max(
            expected_tokens(t, P)
            for k in range(1, n + 2)
            for t in _ordered_trees(k)
            if max(depths(t)) <= D and max(len(c) for c in children(t)) <= B
        )
        got = sequoia(n, P, D)
        assert len(got) <= n + 1 and max(depths(got)) <= D
        assert expected_tokens(got, P) == pytest.approx(best)


# -- losslessness at T > 0 ---------------------------------------------------------------------------------

V = 8
P_LOGITS = torch.tensor([2.0, 1.5, 1.0, 0.2, 0.0, -0.5, -1.0, -3.0])
Q_LOGITS = torch.tensor([-1.0, 2.5, 0.0, 1.8, 0.3, -2.0, 1.0, 0.5])  # a poor draft: several children rejected


def star_first_tokens(
    n, temperature, width=4, skip_residual=False, seed=1234, copy_token=None, copy_first=True, patch=None
):
    """First emitted token of a width-`width` star whose children are drawn without replacement from q
    (Gumbel top-k: the keys' descending order is the sequential drawing order). With `copy_token`, one more
    child copies that token (a point-mass proposal), first or last; q without it is what the others come from.
    `patch(residual)` swaps in a broken residual update."""
    cfg = SamplingConfig(temperature=temperature)
    p, q = warp(P_LOGITS, cfg), warp(Q_LOGITS, cfg)
    if copy_token is not None:
        q = q.clone()
        q[copy_token] = 0
        q /= q.sum()
    rng = make_rng(seed)
    gumbel = -torch.log(-torch.log(torch.rand(n, V, generator=rng)))
    draws = torch.topk(q.clamp_min(1e-30).log() + gumbel, width, dim=-1).indices.tolist()  # (n, width)
    counts, rejected = torch.zeros(V), 0
    import specviz.core.verify as vmod

    orig = vmod.residual
    if skip_residual:
        vmod.residual = lambda r, d: r  # the bug: resample from R, not norm(max(R - D, 0))
    if patch is not None:
        vmod.residual = patch(orig)
    try:
        for toks in draws:
            kids, copied = list(toks), frozenset()
            if copy_token is not None:
                kids = [copy_token, *toks] if copy_first else [*toks, copy_token]
                copied = frozenset({1 if copy_first else len(kids)})
            q_nodes = (1.0 if i in copied else float(q[t]) for i, t in enumerate(kids, 1))
            tree = DraftTree((0, *kids), (-1,) + (0,) * len(kids), (1.0, *q_nodes))
            out = verify_sampled(tree, p.expand(len(kids) + 1, V), {0: q}, rng, copied)
            counts[out.emitted[0]] += 1
            rejected += out.status.count("rejected")
    finally:
        vmod.residual = orig
    return counts, p, rejected / n


# a copied sibling (prompt lookup): none, tested first, or tested after the drawn ones
COPY_STARS = {
    "drawn only": {},
    "copy first": dict(width=3, seed=7, copy_token=3),
    "copy last": dict(width=3, seed=7, copy_token=3, copy_first=False),
}


@pytest.mark.parametrize("temperature", [0.6, 1.0])
@pytest.mark.parametrize("star", list(COPY_STARS))
def test_star_swor_is_lossless(temperature, star):
    n = 20_000
    counts, p, mean_rejected = star_first_tokens(n, temperature, **COPY_STARS[star])
    assert mean_rejected > 1.0  # the residual chain really is exercised
    stat = chisquare(counts.numpy(), (p * n).numpy())
    print(f"T={temperature}, {star}: chi-square p-value {stat.pvalue:.4f}, mean rejected children {mean_rejected:.2f}")
    assert stat.pvalue > 1e-3, stat


def _keep_rejected_copies(residual):
    """The bug for copies: a rejected point mass is not taken out of R."""
    return lambda r, d: r if float(d.max()) == 1.0 else residual(r, d)


@pytest.mark.parametrize("temperature", [0.6, 1.0])
@pytest.mark.parametrize("bug", ["drawn", "copied"])
def test_chi_square_fails_without_residual_update(temperature, bug):
    n = 5_000
    kw = (
        dict(skip_residual=True) if bug == "drawn" else dict(width=3, seed=7, copy_token=0, patch=_keep_rejected_copies)
    )
    counts, p, _ = star_first_tokens(n, temperature, **kw)
    stat = chisquare(counts.numpy(), (p * n).numpy())
    print(f"T={temperature}, residual skipped for {bug} children: chi-square p-value {stat.pvalue:.3g}")
    assert stat.pvalue < 1e-6, stat


@pytest.mark.parametrize("variant", ["heap", "level", "sequoia"])
def test_tree_round_is_lossless_end_to_end(variant):
    """Joint law of the first two emitted tokens of whole DySpec / Sequoia rounds (drafter + verifier) at T = 1."""
    target, pair, sampling, run, rng = bigram_setup()
    drafter = {
        "heap": DySpecDrafter(pair.draft, sampling, rng, DySpecConfig(budget=6, max_depth=2, level_threshold=0.0)),
        "level": DySpecDrafter(pair.draft, sampling, rng, DySpecConfig(budget=6, max_depth=2, level_threshold=0.05)),
        "sequoia": StaticTreeDrafter(pair.draft, sampling, rng, sequoia(6, (0.5, 0.3, 0.1), 2)),
    }[variant]
    n, counts = 1500, torch.zeros(5, 5)
    for _ in range(n):
        out = [t for r in iter_rounds(pair, [0], run, drafter, rng) for t in r.emitted]
        counts[out[0], out[1]] += 1
    pvalue = bigram_pvalue(counts, target, last=0)
    print(f"{variant}: end-to-end chi-square p-value {pvalue:.4f}")
    assert pvalue > 1e-3


def test_root_only_when_no_room():
    pair = sharp_pair("same")
    d = StaticTreeDrafter(pair.draft, SamplingConfig(), make_rng(0), kary(2, 2))
    d.begin(PROMPT)
    assert d.propose(PROMPT, 1).tree == Drafter().propose(PROMPT, 1).tree


def test_draw_order():
    D = torch.tensor([[0.0, 0.5, 0.0, 0.2, 0.3], [0.1, 0.2, 0.3, 0.4, 0.0]])
    toks, probs = draw_order(D, 4, make_rng(0), greedy=True)
    assert toks == [[1, 4, 3], [3, 2, 1, 0]] and probs[0] == pytest.approx([0.5, 0.3, 0.2])
    rng = make_rng(0)
    firsts = torch.zeros(5)
    for _ in range(2000):
        toks, _ = draw_order(D, 5, rng, greedy=False)
        assert sorted(toks[0]) == [1, 3, 4] and sorted(toks[1]) == [0, 1, 2, 3]  # support only, no repeats
        firsts[toks[0][0]] += 1
    assert chisquare(firsts[[1, 3, 4]].numpy(), (2000 * D[0, [1, 3, 4]]).numpy()).pvalue > 1e-3
    cols = torch.tensor([1, 3, 4])  # a head that holds row 0's support
    toks, probs = draw_order(D[:1], 4, make_rng(0), greedy=True, cols=cols)
    assert toks == [[1, 4, 3]] and probs[0] == pytest.approx([0.5, 0.3, 0.2])
    firsts = torch.zeros(5)
    for _ in range(2000):
        toks, _ = draw_order(D[:1], 3, rng, greedy=False, cols=cols)
        assert sorted(toks[0]) == [1, 3, 4]
        firsts[toks[0][0]] += 1
    assert chisquare(firsts[[1, 3, 4]].numpy(), (2000 * D[0, [1, 3, 4]]).numpy()).pvalue > 1e-3
