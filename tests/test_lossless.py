"""The sampled distribution equals the target's (chi-square over many draws, fixed seed).

One round of speculative sampling on a tiny vocabulary: the first emitted token must follow
the target's warped next-token distribution exactly, whatever the draft proposes.
"""

import pytest
import torch
from scipy.stats import chisquare

from specviz.core.config import SamplingConfig
from specviz.core.sampling import make_rng, residual, sample, warp
from specviz.core.tree import chain
from specviz.core.verify import verify_sampled

V = 8
P_LOGITS = torch.tensor([2.0, 1.5, 1.0, 0.2, 0.0, -0.5, -1.0, -3.0])
Q_LOGITS = torch.tensor([-1.0, 2.5, 0.0, 1.8, 0.3, -2.0, 1.0, 0.5])  # a poor draft: many rejections


def first_token_counts(n, cfg, k=2, break_residual=False):
    p = warp(P_LOGITS, cfg)
    q = warp(Q_LOGITS, cfg)
    rng = make_rng(1234)
    counts = torch.zeros(V)
    for _ in range(n):
        toks = [sample(q, rng) for _ in range(k)]  # context-free toy: same q each step
        tree = chain(0, toks, [float(q[t]) for t in toks])
        probs = p.expand(k + 1, V)
        props = {i: q for i in range(k)}
        if break_residual:  # the classic bug: resample from p, not the residual
            import specviz.core.verify as vmod

            orig = vmod.residual
            vmod.residual = lambda r, d: r
            try:
                out = verify_sampled(tree, probs, props, rng)
            finally:
                vmod.residual = orig
        else:
            out = verify_sampled(tree, probs, props, rng)
        counts[out.emitted[0]] += 1
    return counts, p


@pytest.mark.parametrize(
    "cfg",
    [
        SamplingConfig(temperature=1.0),
        SamplingConfig(temperature=0.7, top_p=0.9),
        SamplingConfig(temperature=1.3, top_k=5),
    ],
)
def test_chain_sampling_is_lossless(cfg):
    n = 20_000
    counts, p = first_token_counts(n, cfg)
    support = p > 0
    assert counts[~support].sum() == 0
    stat = chisquare(counts[support].numpy(), (p[support] * n).numpy())
    assert stat.pvalue > 1e-3, stat


def test_chi_square_detects_a_broken_residual():
    n = 20_000
    counts, p = first_token_counts(n, SamplingConfig(temperature=1.0), break_residual=True)
    stat = chisquare(counts.numpy(), (p * n).numpy())
    assert stat.pvalue < 1e-6, stat


def test_residual_properties():
    p = torch.tensor([0.5, 0.3, 0.2, 0.0])
    q = torch.tensor([0.1, 0.6, 0.1, 0.2])
    r = residual(p, q)
    assert torch.isclose(r.sum(), torch.tensor(1.0))
    assert torch.all(r[q >= p] == 0)


def test_warp_greedy_and_truncation():
    x = torch.tensor([1.0, 3.0, 2.0, 0.0])
    assert int(torch.argmax(warp(x, SamplingConfig()))) == 1
    assert (warp(x, SamplingConfig(temperature=1.0, top_k=2)) > 0).sum() == 2
    pp = warp(x, SamplingConfig(temperature=1.0, top_p=0.5))
    assert (pp > 0).sum() == 1 and torch.isclose(pp.sum(), torch.tensor(1.0))


def test_same_seed_same_draws():
    q = torch.softmax(torch.randn(50), 0)
    a = [sample(q, make_rng(5)) for _ in range(1)] + [sample(q, g) for g in [make_rng(5)] for _ in range(20)]
    b = [sample(q, make_rng(5)) for _ in range(1)] + [sample(q, g) for g in [make_rng(5)] for _ in range(20)]
    assert a == b


def test_the_draw_each_node_was_judged_with_is_recorded():
    p, q = warp(P_LOGITS, SamplingConfig()), warp(Q_LOGITS, SamplingConfig())
    rng = make_rng(7)
    for _ in range(200):
        toks = [sample(q, rng) for _ in range(3)]
        tree = chain(0, toks, [float(q[t]) for t in toks])
        out = verify_sampled(tree, p.expand(4, V), {i: q for i in range(3)}, rng)
        assert len(out.u) == len(tree) and out.u[0] is None
        for node, st in enumerate(out.status[1:], 1):
            assert (out.u[node] is None) == (st == "unvisited")  # judged nodes only
            if st != "unvisited":
                ratio = min(1.0, float(p[toks[node - 1]] / q[toks[node - 1]]))  # a chain: one child a node
                assert (out.u[node] < ratio) == (st == "accepted")
