"""Core engine: tree-masked forward equals per-path decoding; greedy speculative == autoregressive."""

import pytest
import torch
from helpers import path_to
from lossless import greedy_equal
from tiny import tiny_llama

from specviz.core.config import ChainConfig, HeuristicConfig, RunConfig, SamplingConfig
from specviz.engine.record import generate
from specviz.models.lm import LM

PROMPT = [5, 9, 17, 3, 33, 8]


def test_tree_mask_matches_per_path_decoding():
    model = tiny_llama(vocab=64, layers=2, seed=3)
    parents = [-1, 0, 0, 1, 1, 2, 3]
    tokens = [7, 11, 12, 20, 21, 22, 30]
    tree_lm = LM(model)
    tree_lm.forward(PROMPT)
    tree_logits = tree_lm.forward(tokens, parents=parents).logits
    for leaf in range(len(tokens)):
        path = path_to(parents, leaf)
        seq_lm = LM(model)
        seq_logits = seq_lm.forward(PROMPT + [tokens[i] for i in path]).logits[-1]
        assert torch.allclose(tree_logits[leaf], seq_logits, atol=1e-4), (
            leaf,
            (tree_logits[leaf] - seq_logits).abs().max(),
        )


def test_keep_packs_selected_positions():
    model = tiny_llama(vocab=64, seed=4)
    lm = LM(model)
    lm.forward(PROMPT)
    lm.forward([7, 11, 12, 20], parents=[-1, 0, 0, 2])
    lm.keep([*range(len(PROMPT)), len(PROMPT) + 0, len(PROMPT) + 2, len(PROMPT) + 3])
    nxt = lm.forward([40]).logits[-1]
    ref = LM(model).forward(PROMPT + [7, 12, 20, 40]).logits[-1]
    assert torch.allclose(nxt, ref, atol=1e-4)


def _ids(trace):
    return list(trace.output_ids)


@pytest.mark.parametrize("draft", ["same", "random"])
@pytest.mark.parametrize(
    "method,extra",
    [
        ("chain", {"chain": ChainConfig(1)}),
        ("chain", {"chain": ChainConfig(4)}),
        ("heuristic", {"heuristic": HeuristicConfig()}),
    ],
)
def test_greedy_equals_autoregressive(tiny_pair, draft, method, extra):
    pair = tiny_pair(draft)
    sp = greedy_equal(pair, PROMPT, RunConfig(method=method, max_new_tokens=40, **extra))
    assert len(sp.output_ids) == 40 or sp.stop == "eos"
    n_acc = sum(r.n_accepted for r in sp.rounds)
    n_drafted = sum(r.n_drafted for r in sp.rounds)
    if draft == "same":
        assert n_acc == n_drafted  # the target as its own draft: everything accepted
    else:
        assert n_acc < 0.5 * n_drafted  # a random draft: almost nothing accepted


def test_sampled_run_is_reproducible(tiny_pair):
    pair = tiny_pair("near")
    run = RunConfig(method="chain", max_new_tokens=30, sampling=SamplingConfig(temperature=1.0, seed=11))
    assert _ids(generate(pair, PROMPT, run)) == _ids(generate(pair, PROMPT, run))


def test_round_records(tiny_pair):
    pair = tiny_pair("near")
    tr = generate(pair, PROMPT, RunConfig(method="chain", max_new_tokens=25, chain=ChainConfig(3)))
    assert sum(len(r.emitted) for r in tr.rounds) == len(tr.output_ids) == 25
    for r in tr.rounds:
        assert r.tree.parents[0] == -1 and len(r.status) == len(r.tree) == len(r.p)
        assert r.emitted[:-1] == tuple(r.tree.tokens[i] for i in r.accepted_path) or len(r.emitted) <= len(
            r.accepted_path
        )
        assert r.draft_ms >= 0 and r.verify_ms > 0
