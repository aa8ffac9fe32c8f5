"""Prompt lookup: the n-gram index, the `lookup` method, and DySpec trees with copied nodes.

Copied nodes are point-mass proposals mixed with drawn siblings; greedy runs must equal the
autoregressive baseline and whole sampled rounds must follow the target (chi-square). The one-node
tests of copied and drawn siblings, and of the residual bug they catch, live with the other star
tests in test_trees.py.
"""

import json
import math
from dataclasses import replace

import pytest
import torch
from helpers import bigram_pvalue, bigram_setup, sharp_pair
from lossless import autoregressive, greedy_equal

from specviz.core.config import (
    ChainConfig,
    DySpecConfig,
    LookupConfig,
    RunConfig,
    SamplingConfig,
    TreeConfig,
)
from specviz.core.curves import device_curve
from specviz.core.ngram import NgramIndex
from specviz.core.priors import COPY_CALIBRATION, LOOKUP_ACCEPTANCE, LOOKUP_ACCEPTANCE_SAMPLED
from specviz.core.sampling import make_rng
from specviz.core.trace import GenerationTrace
from specviz.core.tree import children
from specviz.engine.loop import iter_rounds
from specviz.engine.record import generate
from specviz.methods.lookup.drafter import LookupDrafter
from specviz.methods.lookup.plan import best_extension, calibrated, prior
from specviz.methods.registry import BUILDERS
from specviz.methods.trees.dyspec import DySpecDrafter
from specviz.tools.bench.specs import BenchConfig, method_knobs, parse_settings
from specviz.tools.copy_calibration import by_rating, copy_ratings, fit
from specviz.tools.lookup_priors import measure

LOOPY = [5, 9, 17, 3, 5, 9, 17, 3, 5, 9]  # a prompt that repeats itself: lookup has something to copy


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread (conftest)


# -- the index -------------------------------------------------------------------------------------------------


def test_longest_most_recent_match_and_periodic_copy():
    idx = NgramIndex(3)
    idx.extend([1, 2, 3, 4, 1, 2])
    assert idx.propose(5) == (2, [3, 4, 1, 2, 3])  # after "1 2": 3 4 1 2, then the loop goes on
    idx.extend([7, 1, 2])
    assert idx.propose(2) == (2, [7, 1])  # the most recent "1 2" wins
    assert idx.propose(2, min_ngram=3) == (0, [])
    # tokens after the indexed context (a round's drafts) extend the suffix but are not indexed themselves
    assert idx.propose(1, after=[3]) == (3, [4])  # "1 2 3" -> 4; the index is unchanged
    assert idx.propose(1, after=[9]) == (0, []) and idx.ctx[-1] == 2
    lone = NgramIndex(2)
    lone.extend([8])
    assert lone.propose(3) == (0, [])  # a context's suffix is never its own match
    run = NgramIndex(4)
    run.extend([6, 6])
    assert run.propose(3) == (1, [6, 6, 6])


def test_incremental_index_equals_a_fresh_one_and_rebuilds_when_the_context_changes():
    g = torch.Generator().manual_seed(0)
    seq = torch.randint(0, 5, (200,), generator=g).tolist()
    inc = NgramIndex(4)
    for t in range(1, len(seq)):
        inc.sync(seq[:t])
        fresh = NgramIndex(4)
        fresh.extend(seq[:t])
        assert inc.propose(4) == fresh.propose(4)
    inc.sync([9, 9, 1])  # not an extension: rebuilt
    assert inc.ctx == [9, 9, 1] and inc.propose(2) == (0, [])


def test_prior_reads_the_table_and_extends_it():
    assert prior(0, 3) == [0.0, 0.0, 0.0]
    assert prior(2, 2) == list(LOOKUP_ACCEPTANCE[1][:2])
    row = list(LOOKUP_ACCEPTANCE[-1])
    long = prior(99, len(row) + 4)  # n past the table: its last row, then the last ratio
    assert long[: len(row)] == row and all(a > b > 0 for a, b in zip(long, long[1:]))
    sampled = prior(8, 16, sampled=True)  # sampled runs: the T = 0.7 table, lower throughout
    assert sampled == list(LOOKUP_ACCEPTANCE_SAMPLED[7]) and all(s < g for s, g in zip(sampled, row))


def test_measure_counts_copies_along_a_continuation():
    out = measure([([1, 2, 3], [1, 2, 3, 1, 2])], max_ngram=2, depth=2)
    assert out["offered"] == {1: 1, 2: 3}  # t = 0 has no match; t = 1 matches "1" only
    assert out["alpha"][2] == [1.0, 1.0]


FLAT = {"n": [1, 64], "ms": [50.0, 50.0]}  # a device where verifying more tokens is free
STEEP = {"n": [1, 64], "ms": [50.0, 3200.0]}  # one where every token costs a forward


def test_best_extension_weighs_priors_against_the_verify_curve():
    assert best_extension(2.0, 4, [0.5, 0.4, 0.3], FLAT) == 3
    assert best_extension(2.0, 4, [0.5, 0.4, 0.3], STEEP) == 0
    step = {"n": [1, 4, 5, 16], "ms": [70.0, 78.0, 97.0, 122.0]}  # this CPU's shape
    assert best_extension(2.5, 4, [0.1] * 12, step) == 0  # weak copies: stay at 4 rows
    assert best_extension(3.6, 4, [0.8] * 12, step) == 12  # a loop: take them all
    assert best_extension(1.0, 1, [], FLAT) == 0


def test_device_curve_matches_target_dtype_and_device(tmp_path):
    rec = {"fp32": {"models": {"target": "t", "device": "cpu"}, "target": FLAT}}
    path = tmp_path / "curve.json"
    path.write_text(json.dumps(rec))
    assert device_curve({"target": "t", "dtype": "fp32", "device": "cpu"}, path) == FLAT
    for other in (
        {"target": "u", "dtype": "fp32", "device": "cpu"},
        {"target": "t", "dtype": "bf16", "device": "cpu"},
        {"target": "t", "dtype": "fp32", "device": "cuda:0"},
    ):
        assert device_curve(other, path) is None
    assert device_curve({"target": "t", "dtype": "fp32", "device": "cpu"}, tmp_path / "none.json") is None


@pytest.mark.parametrize("kind", ["lookup", "dyspec"])
def test_copies_go_past_the_budget_where_verifying_is_cheap(kind):
    pair = sharp_pair("near")
    prompt = LOOPY * 3
    lk = LookupConfig(k=2, extend_to=10)
    sampling = SamplingConfig()
    run = RunConfig(method=kind, max_new_tokens=24)
    for curve, most in ((FLAT, 10), (STEEP, 2), (None, 2)):
        drafter = (
            LookupDrafter(lk, curve=curve)
            if kind == "lookup"
            else DySpecDrafter(pair.draft, sampling, make_rng(0), DySpecConfig(budget=2), lookup=lk, curve=curve)
        )
        tr = greedy_equal(pair, prompt, run, drafter=drafter)
        copies = [len(r.copied or ()) for r in tr.rounds]
        assert (max(copies) == most) if curve is FLAT else (max(copies) <= most), (curve, copies)
        if kind == "dyspec":
            assert all(r.n_drafted - len(r.copied or ()) <= 2 for r in tr.rounds)


# -- greedy: every run equals the autoregressive one --------------------------------------------------------------

UNRATED = LookupConfig(draft_rated=False)  # these tiny targets do not repeat LOOPY: keep the copies the drafts doubt
RUNS = {
    "lookup": RunConfig(method="lookup"),
    "lookup-k6": RunConfig(method="lookup", lookup=LookupConfig(k=6, max_ngram=3)),
    "dyspec-lookup-level": RunConfig(
        method="dyspec", copy=True, lookup=UNRATED, dyspec=DySpecConfig(budget=6, max_depth=5)
    ),
    "dyspec-lookup-heap": RunConfig(
        method="dyspec", copy=True, lookup=UNRATED, dyspec=DySpecConfig(budget=6, max_depth=5, level_threshold=0.0)
    ),
    "chain-copy": RunConfig(method="chain", copy=True, chain=ChainConfig(2)),
    "heuristic-copy": RunConfig(method="heuristic", copy=True),
    "kary-copy": RunConfig(method="kary", copy=True, lookup=UNRATED, tree=TreeConfig(width=2, depth=2)),
    "sequoia-copy": RunConfig(method="sequoia", copy=True, lookup=UNRATED, tree=TreeConfig(budget=5)),
}


@pytest.mark.parametrize("draft", ["same", "random", "near"])
@pytest.mark.parametrize("name", list(RUNS))
def test_greedy_equals_autoregressive(draft, name):
    tr = greedy_equal(sharp_pair(draft), LOOPY, RUNS[name], n=30)
    copied = [c for r in tr.rounds for c in (r.copied or ())]
    assert copied  # the repeats were used
    for r in tr.rounds:
        assert r.n_drafted <= 6 or name == "heuristic-copy"
        for kids in children(r.tree.parents):  # no two siblings propose the same token
            toks = [r.tree.tokens[c] for c in kids]
            assert len(toks) == len(set(toks))
        for c in r.copied or ():
            assert r.tree.q[c] == 1.0


def test_lookup_method_uses_no_draft_model_and_stops_at_eos():
    pair = sharp_pair("random")
    eos = autoregressive(pair, LOOPY, 12)[5]
    drafter = LookupDrafter(LookupConfig(k=8), eos_ids={eos})
    tr = greedy_equal(pair, LOOPY, RunConfig(method="lookup", max_new_tokens=12), drafter=drafter)
    for r in tr.rounds:
        drafted = list(r.tree.tokens[1:])
        assert eos not in drafted[:-1] and r.draft_forwards == 0


def test_dyspec_spends_the_budget_on_a_confident_copy():
    """An 8-token match (priors 0.92 / 0.87 / 0.82) takes the budget the draft's first guess leaves; rated by a
    draft that finds its first token improbable (random weights), it is worth a few percent and takes none."""
    pair = sharp_pair("random")
    run = RunConfig(method="dyspec", max_new_tokens=8, copy=True, lookup=UNRATED, dyspec=DySpecConfig(budget=3))
    tr = greedy_equal(pair, LOOPY * 3, run)
    first = tr.rounds[0]
    assert len(first.copied) >= 2 and first.n_drafted == 3
    rated = greedy_equal(pair, LOOPY * 3, replace(run, lookup=LookupConfig()))
    assert not rated.rounds[0].copied and rated.rounds[0].n_drafted == 3


def test_calibration_rescales_the_priors_by_the_drafts_own_rating():
    alphas = prior(3, 4)  # a 3-token match: 0.60 / 0.40 / 0.30 / 0.22
    doubted, believed = calibrated(alphas, 0.001), calibrated(alphas, 0.95)
    b0, b1, b2 = COPY_CALIBRATION
    for cal, q in ((doubted, 0.001), (believed, 0.95)):  # sigmoid(b0 + b1 logit(alpha_1) + b2 logit(q))
        z = b0 + b1 * math.log(alphas[0] / (1 - alphas[0])) + b2 * math.log(q / (1 - q))
        assert cal[0] == pytest.approx(1 / (1 + math.exp(-z)))
    assert doubted[0] < 0.1 < alphas[0] < believed[0] <= 1.0  # the draft's doubt lowers the prior, its belief raises it
    for cal in (doubted, believed):  # the later copies keep their ratios to the first
        assert cal[1:] == pytest.approx([a * cal[0] / alphas[0] for a in alphas[1:]])
    assert calibrated([], 0.5) == [] and calibrated([0.0, 0.0], 0.9) == [0.0, 0.0]


def test_trace_keeps_copied_nodes_and_rejects_bad_ones():
    pair = sharp_pair("near")
    tr = generate(pair, LOOPY, RunConfig(method="dyspec", max_new_tokens=10, copy=True))
    back = GenerationTrace.from_json(tr.to_json())
    assert [r.copied for r in back.rounds] == [r.copied for r in tr.rounds]
    d = json.loads(tr.to_json())
    d["rounds"][0]["copied"] = [99]
    with pytest.raises(ValueError, match="copied"):
        GenerationTrace.from_dict(d)


def test_bench_specs_for_lookup():
    got = {
        s.key: s
        for s in parse_settings(
            [
                "lookup:2/0",
                "dyspec-lookup:5+eagle",
                "dyspec:4+eagle+copy",
                "specdecpp+copy",
                "hf-lookup:4",
                "sequoia:3+copy",
            ],
            BenchConfig(),
            list(BUILDERS),
        )
    }
    assert method_knobs(got["lookup:2/0"])["lookup"].k == 2 and method_knobs(got["lookup:2/0"])["lookup"].extend_to == 0
    dl = got["dyspec-lookup:5+eagle"]  # the older name of dyspec:5+copy
    assert dl.copy and method_knobs(dl)["dyspec"].budget == 5 and dl.drafter == "eagle"
    assert got["dyspec:4+copy+eagle"].copy and got["specdecpp+copy"].copy and not got["ar"].copy
    assert got["hf-lookup:4"].k == 4 and not got["hf-lookup:4"].hf_assisted
    assert got["sequoia:3+copy"].copy and method_knobs(got["sequoia:3+copy"])["tree"].budget == 3
    for bad in ("ar+copy", "hf-assist+copy", "chain:2/0", "dyspec+fast"):
        with pytest.raises(ValueError):
            parse_settings([bad], BenchConfig(), list(BUILDERS))


# -- sampled: exact ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["lookup", "level", "heap", "level-extended"])
def test_rounds_with_copies_are_lossless_end_to_end(variant):
    """Joint law of the first two emitted tokens of whole rounds at T = 1, from a context that repeats."""
    target, pair, sampling, run, rng = bigram_setup()
    lk = LookupConfig(k=3) if variant != "level-extended" else LookupConfig(k=1, extend_to=3)
    cfg = DySpecConfig(
        budget=5 if variant != "level-extended" else 1, max_depth=3, level_threshold=0.0 if variant == "heap" else 0.05
    )
    drafter = (
        LookupDrafter(lk)
        if variant == "lookup"
        else DySpecDrafter(pair.draft, sampling, rng, cfg, lookup=lk, curve=FLAT if "extended" in variant else None)
    )
    prompt = [0, 1, 2, 3] * 3 + [0]  # a loop: an 8-token match, copies in every round
    n, counts, copies = 1500, torch.zeros(5, 5), 0
    for _ in range(n):
        rounds = list(iter_rounds(pair, prompt, run, drafter, rng))
        copies += sum(len(r.copied or ()) for r in rounds)
        out = [t for r in rounds for t in r.emitted]
        counts[out[0], out[1]] += 1
    assert copies > n
    pvalue = bigram_pvalue(counts, target, last=0)
    print(f"{variant}: end-to-end chi-square p-value {pvalue:.4f}")
    assert pvalue > 1e-3


def test_copy_calibration_collects_ratings_and_fits_a_known_rule():
    pair = sharp_pair("near")
    run = RunConfig(method="dyspec", max_new_tokens=16, copy=True, lookup=UNRATED, dyspec=DySpecConfig(budget=3))
    rows = copy_ratings(pair, [LOOPY * 3], run, progress=False)
    assert rows and all(0 <= a <= 1 and 0 <= q <= 1 and isinstance(ok, bool) for a, q, ok in rows)
    assert sum(r["rounds"] for r in by_rating(rows)) == len(rows)
    g = torch.Generator().manual_seed(0)
    synth = []  # accepted with probability sigmoid(-1 + 0.5 logit(alpha) + logit(q))
    for a, q, u in torch.rand(6000, 3, generator=g).tolist():
        a = 0.05 + 0.9 * a
        z = -1.0 + 0.5 * math.log(a / (1 - a)) + math.log(max(q, 1e-4) / (1 - min(q, 1 - 1e-4)))
        synth.append((a, q, u < 1 / (1 + math.exp(-z))))
    assert fit(synth) == pytest.approx((-1.0, 0.5, 1.0), abs=0.15)
    with pytest.raises(ValueError, match="few rounds"):
        fit(synth[:2])
