"""Every supported model family is lossless: one module over families x methods, on tiny random models from configs.

- Greedy: every method, with and without copying, equals autoregressive decoding, in fp32 and bf16, on the growing
  and the fixed cache.
- The p a trace records at a node (what verification samples with) is the unmodified model's own distribution:
  softmax of `model(ids).logits` with Hugging Face's own warpers, within 1e-5, never checked against specviz's path.
- Sampled tokens follow the target's distribution (chi-square, fixed seeds), and the test fails when a family's
  logit scale is dropped.
- bf16 at a realistic width (hidden 512): a verify forward's rows are bitwise the one-token steps' rows.
- A model that cannot be verified exactly is refused with a sentence.

`pytest -m "not slow"` runs one cell of each kind (the quick loop, docs/models.md); the full run covers them all.
"""

import os

import pytest
import torch
from helpers import FAMILY_PROMPT as PROMPT
from helpers import FAMILY_SHORT as SHORT
from helpers import FAMILY_V as V
from helpers import chi_square_p, hf_distribution, near_draft, run_config
from lossless import autoregressive, greedy_equal
from tiny import TEST_DEVICE

from specviz.core.config import SamplingConfig
from specviz.core.prompts import check_prompt
from specviz.core.sampling import make_rng
from specviz.engine.record import generate
from specviz.methods.catalog import COPYING
from specviz.methods.specdecpp.head import AcceptanceHead, save_head
from specviz.models import exact, family
from specviz.models.lm import LM
from specviz.models.pair import Pair
from specviz.tools.zoo import FAMILIES, REFUSED, tiny_model

QUICK = {"llama", "gemma3"}  # the quick loop's families
GRAPHS = os.environ.get("SPECVIZ_TEST_GRAPHS") == "1"  # the fixed cache's runs with CUDA graphs (.ci/cuda-check.sh)
RUNS = [(m, False) for m in ("chain", "heuristic", "specdecpp", "dyspec", "kary", "sequoia", "lookup")] + [
    (m, True) for m in COPYING
]


def cells(quick, *params):
    """Parameter sets, the ones outside the quick loop marked slow."""
    name = lambda x: str(x).replace("torch.", "")  # noqa: E731
    return [pytest.param(*p, marks=() if quick(p) else pytest.mark.slow, id="-".join(map(name, p))) for p in params]


def family_pair(name, tmp_path, dtype=torch.float32, kv_cache="growing", hidden=64, vocab=None, sharpen=1.0):
    """A tiny target of `family`, its perturbed copy as draft, and a random SpecDec++ head beside the draft."""
    extra = {} if vocab is None else {"vocab_size": vocab}
    target = tiny_model(name, layers=2, hidden=hidden, seed=1, **extra)
    if sharpen != 1.0:  # wider logits: a dropped scale then moves the distribution far enough to see
        with torch.no_grad():
            target.get_output_embeddings().weight.mul_(sharpen)
    target.generation_config.eos_token_id = None  # every id an ordinary token: runs reach their length
    draft = near_draft(target, seed=2)
    target, draft = target.to(dtype).to(TEST_DEVICE), draft.to(dtype).to(TEST_DEVICE)
    save_head(AcceptanceHead(draft.config.hidden_size, 1, rng=make_rng(0)), tmp_path, {"target": "tiny"})
    cache = {"kv_cache": kv_cache, "cuda_graphs": GRAPHS and kv_cache == "fixed"}
    return Pair(
        LM(target, name="target", **cache),
        LM(draft, name="draft", half_rows=True, **cache),
        None,
        {"target": "tiny", "draft": str(tmp_path)},
    )


@pytest.mark.parametrize(
    "name,dtype,kv_cache",
    cells(
        lambda p: (p[0], p[1], p[2]) in {("llama", torch.float32, "growing"), ("gemma3", torch.bfloat16, "fixed")},
        *[(f, d, c) for f in FAMILIES for d in (torch.float32, torch.bfloat16) for c in ("growing", "fixed")],
    ),
)
def test_every_method_is_greedy_equal_to_autoregressive(name, dtype, kv_cache, tmp_path):
    pair = family_pair(name, tmp_path, dtype, kv_cache)
    assert len(autoregressive(pair, PROMPT, 32)) == 32
    drafted = accepted = 0
    for method, copy_ in RUNS:
        tr = greedy_equal(pair, PROMPT, run_config(method, copy_))
        drafted += sum(r.n_drafted for r in tr.rounds)
        accepted += sum(r.n_accepted for r in tr.rounds)
    assert 0 < accepted < drafted  # the draft was right and wrong: both verdicts ran


@pytest.mark.parametrize("name", cells(lambda p: p[0] in QUICK, *[(f,) for f in FAMILIES]))
def test_recorded_p_is_the_models_own_distribution(name, tmp_path):
    pair = family_pair(name, tmp_path)
    s = SamplingConfig(temperature=0.8, top_k=64, top_p=0.95, seed=3)
    tr = generate(pair, PROMPT, run_config("dyspec", n=12, sampling=s))
    committed, checked = list(PROMPT), 0
    model = pair.target.model
    with torch.inference_mode():
        for r in tr.rounds:
            tree = r.tree
            for node in range(1, len(tree)):
                if r.status[node] == "unvisited":
                    continue
                path, j = [], tree.parents[node]
                while j > 0:
                    path.append(tree.tokens[j])
                    j = tree.parents[j]
                p = hf_distribution(model, committed + path[::-1], s)
                assert abs(r.p[node] - float(p[tree.tokens[node]])) < 1e-5, (name, r.index, node)
                checked += 1
            committed += list(r.emitted)
    assert checked >= 4


def test_a_dropped_logit_scale_is_seen(tmp_path):
    """The reference is the model's own: without Granite's logits_scaling the recorded p is off, and the loader's
    probe refuses the model, although greedy output would stay equal."""
    pair = family_pair("granite", tmp_path)
    pair.target.logit_div = 1.0
    s = SamplingConfig(temperature=1.0, seed=3)
    r = generate(pair, PROMPT, run_config("chain", n=4, sampling=s)).rounds[0]
    with torch.inference_mode():
        p = hf_distribution(pair.target.model, PROMPT, s)
    assert abs(r.p[1] - float(p[r.tree.tokens[1]])) > 1e-4
    with pytest.raises(ValueError, match="differ from its own forward"):
        exact.check(pair.target)


N = 400


def first_token_counts(pair, n=N):
    counts = torch.zeros(V)
    for seed in range(n):
        s = SamplingConfig(temperature=1.0, seed=seed)
        counts[generate(pair, SHORT, run_config("dyspec", n=1, sampling=s)).output_ids[0]] += 1
    return counts


@pytest.mark.parametrize("name", cells(lambda p: p[0] in QUICK, *[(f,) for f in FAMILIES]))
def test_sampled_tokens_follow_the_target(name, tmp_path, one_thread):
    pair = family_pair(name, tmp_path, vocab=V, hidden=32, sharpen=8.0)
    with torch.inference_mode():
        p = torch.softmax(pair.target.model(torch.tensor([SHORT], device=pair.target.device)).logits[0, -1].float(), -1)
    assert chi_square_p(first_token_counts(pair), p) > 1e-3


@pytest.mark.slow
def test_the_sampled_test_sees_a_dropped_scale(tmp_path, one_thread):
    pair = family_pair("granite", tmp_path, vocab=V, hidden=32, sharpen=8.0)
    with torch.inference_mode():
        p = torch.softmax(pair.target.model(torch.tensor([SHORT], device=pair.target.device)).logits[0, -1].float(), -1)
    pair.target.logit_div = pair.draft.logit_div = 1.0
    assert chi_square_p(first_token_counts(pair), p) < 1e-6


@pytest.mark.parametrize("name", cells(lambda p: p[0] in QUICK, *[(f,) for f in FAMILIES]))
def test_bf16_verify_rows_are_the_steps_rows_at_width_512(name):
    """Batch invariance off the Llama fast path: a tree's rows equal the one-token steps of each path, bitwise."""
    model = tiny_model(name, layers=2, hidden=512, seed=1, dtype=torch.bfloat16).to(TEST_DEVICE)
    toks, parents = [40, 41, 42, 43, 44, 45], [-1, 0, 0, 1, 2, 4]
    lm = LM(model)
    lm.forward(PROMPT)
    tree = lm.forward(toks, parents=parents).logits
    for i in range(len(toks)):
        path, j = [], i
        while j != -1:
            path.append(j)
            j = parents[j]
        step = LM(model)
        step.forward(PROMPT)
        for j in path[::-1]:
            row = step.forward([toks[j]]).logits[-1]
        assert torch.equal(row, tree[i]), (name, i)


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_model_that_cannot_be_verified_is_refused_with_a_sentence(name):
    model = tiny_model(name, layers=2, hidden=32)
    why = family.refusal(model)
    assert why and "cannot" in why and "\n" not in why
    with pytest.raises(ValueError, match="cannot"):
        LM(model)


def test_sliding_window_mask_keeps_the_last_w_visible_positions():
    allow = torch.tensor([[1, 1, 1, 0, 1, 1], [1, 1, 0, 1, 0, 1]], dtype=torch.bool)  # two tree rows
    got = family.windowed(allow, 3)
    assert got.tolist() == [[0, 0, 1, 0, 1, 1], [0, 1, 0, 1, 0, 1]]


def test_the_probe_passes_every_family_and_reads_its_layout():
    for name in FAMILIES:
        lm = LM(tiny_model(name, hidden=32))
        assert exact.check(lm) <= exact.TOLERANCE, name
    lay = LM(tiny_model("gemma3", hidden=32)).layout
    assert lay.kinds == ("sliding_attention", "full_attention") and lay.mapping and lay.slides
    assert not LM(tiny_model("llama", hidden=32)).layout.slides
    check_prompt(PROMPT, 512)
