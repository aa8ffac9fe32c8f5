"""The test modules' shared helpers, in one place: records, tiny family pairs, the EAGLE drafter, trees, SpecDec++
rounds and recorded runs (a test module imports from here, never from another test module)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
from scipy.stats import chisquare
from tiny import TEST_DEVICE, tiny_llama
from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from specviz.analysis.costs import StepCosts, costs_from_rounds, hindsight_k
from specviz.core.config import DySpecConfig, RunConfig, SamplingConfig, SpecDecPPConfig
from specviz.core.sampling import make_rng
from specviz.core.trace import DraftTree, GenerationTrace, RoundTrace
from specviz.engine.record import generate
from specviz.methods.catalog import with_knobs
from specviz.methods.specdecpp.drafter import SpecDecPPDrafter
from specviz.methods.specdecpp.head import AcceptanceHead
from specviz.methods.specdecpp.inputs import CATALOG
from specviz.models.eagle import EagleLM, add_copy_input, add_feature_taps, build_eagle
from specviz.models.lm import LM, Forward
from specviz.models.pair import Pair
from specviz.train.data import _concat, continue_batch


def path_to(parents: Sequence[int], i: int) -> list[int]:
    """Node ids from the root down to i, inclusive."""
    out = []
    while i != -1:
        out.append(i)
        i = parents[i]
    return out[::-1]


def with_hindsight(trace: GenerationTrace, costs: StepCosts | None = None) -> GenerationTrace:
    """The trace with every round's `hindsight_k` filled in (costs default to the trace's own timings)."""
    costs = costs or costs_from_rounds(list(trace.rounds))
    return replace(trace, rounds=tuple(replace(r, hindsight_k=hindsight_k(r, costs)) for r in trace.rounds))


# -- tiny model families (test_families, test_device_map, test_gemma3_real) ------------------------------------

FAMILY_PROMPT = [5, 9, 17, 3, 33, 8, 100, 200, 7, 9, 17, 3]  # longer than the tiny sliding windows
FAMILY_V = 16  # the sampled tests' vocabulary
FAMILY_SHORT = [5, 9, 3, 7]  # ids below FAMILY_V
KNOBS = {"k": 4, "budget": 8, "width": 2, "depth": 3, "start_k": 3}  # each method's knobs in the family matrix


def near_draft(target, seed: int, noise: float = 0.3):
    """A copy of `target` with its weights perturbed: it agrees often and not always (every verdict is exercised)."""
    d = copy.deepcopy(target)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for prm in d.parameters():
            prm.add_((noise * prm.float().std() * torch.randn(prm.shape, generator=g)).to(prm.dtype))
    return d


def run_config(method, copy_=False, n=32, sampling=SamplingConfig()):
    run = RunConfig(method=method, max_new_tokens=n, sampling=sampling, copy=copy_)
    return with_knobs(run, method, KNOBS)


def hf_distribution(model, ids, s: SamplingConfig) -> torch.Tensor:
    """The unmodified model's next-token distribution after `ids`, warped by Hugging Face's own processors."""
    warpers = LogitsProcessorList([TemperatureLogitsWarper(s.temperature)])
    if s.top_k:
        warpers.append(TopKLogitsWarper(s.top_k))
    if s.top_p < 1.0:
        warpers.append(TopPLogitsWarper(s.top_p))
    x = torch.tensor([ids], device=model.device)
    logits = model(x).logits[:, -1].float()
    return torch.softmax(warpers(x, logits), -1)[0].cpu()


def chi_square_p(counts, p) -> float:
    """Chi-square p-value of `counts` against p, cells expected below 5 pooled."""
    expected = p / p.sum() * counts.sum()
    small = expected < 5
    obs = torch.cat([counts[~small], counts[small].sum()[None]]) if small.any() else counts
    exp = torch.cat([expected[~small], expected[small].sum()[None]]) if small.any() else expected
    return float(chisquare(obs.numpy(), exp.numpy()).pvalue)


# -- the EAGLE drafter (test_eagle, test_eagle_folder, test_fixed_cache) ----------------------------------------

COPY = pytest.mark.parametrize("copy", [False, True], ids=["plain", "copy-input"])
LOOPY = [5, 9, 3, 5, 9, 3, 5, 9, 17, 4, 5, 9]  # repeats: the lookup matches n-grams of 1 to 3 tokens


def eagle_for(target, seed=0, head_ids=None, copy=False, context_vocab=False, taps=()):
    m = build_eagle(target, init_layer=0)
    if copy:  # the prompt-lookup input, n-grams up to 3
        add_copy_input(m, 3, gain=2.0)
    add_feature_taps(m, taps)  # the target's middle layers (test_eagle_taps.py)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # random fc: the features (and copies) really steer the draft
        m.eagle_fc.weight.copy_(torch.randn(m.eagle_fc.weight.shape, generator=g) * 0.2)
    return EagleLM(m, head_ids=head_ids, context_vocab=context_vocab)


def eagle_pair(vocab=64, seed=0, **kw):
    target = tiny_llama(vocab=vocab, seed=seed)
    draft = tiny_llama(vocab=vocab, seed=seed + 1000)
    t = LM(target, name="target")
    t.tap(kw.get("taps", ()))
    return Pair(
        t,
        LM(draft, name="draft"),
        None,
        {"target": "tiny", "draft": "random"},
        eagle_for(target, seed, **kw),
    )


# -- trees (test_trees, test_lookup) -----------------------------------------------------------------------------

SHARP = 40.0  # scales the tiny models' output layer: peaked distributions, deep trees


def sharp_pair(draft: str, seed: int = 0) -> Pair:
    """A tiny pair with peaked next-token distributions. draft: 'same', 'random' or 'near' (perturbed copy)."""

    def build(s, noise=0.0):
        m = tiny_llama(vocab=64, seed=s)
        with torch.no_grad():
            if noise:
                g = torch.Generator().manual_seed(s + 7)
                for prm in m.parameters():
                    prm.add_(noise * prm.std() * torch.randn(prm.shape, generator=g).to(prm.device))
            m.lm_head.weight.mul_(SHARP)
        return m

    target = build(seed)
    d = {"same": lambda: target, "random": lambda: build(seed + 1000), "near": lambda: build(seed, 0.3)}[draft]()
    return Pair(LM(target, name="target"), LM(d, name="draft"), None, {"target": "tiny", "draft": draft})


class BigramLM:
    """A stand-in for `LM` whose next token depends on the last token only: fast enough for many rounds."""

    wants_target_features = context_vocab = half_rows = False  # reads ids only, full vocabulary, no half rows

    def __init__(self, table: torch.Tensor):
        self.table, self.vocab_size, self.device = table, table.shape[0], torch.device("cpu")
        self.head_ids = self.support = None  # full vocabulary, like an LM without a reduced head
        self.model = SimpleNamespace(generation_config=SimpleNamespace(eos_token_id=[]))
        self.tokens: list[int] = []

    @property
    def length(self):
        return len(self.tokens)

    def reset(self):
        self.tokens = []

    def keep(self, positions):
        self.tokens = [self.tokens[i] for i in positions]

    def forward(self, ids, parents=None, rows=None, visible=None, with_logits=True):
        self.tokens += list(ids)
        logits = self.table[list(ids)]
        logits = logits if rows is None else logits[rows]
        return Forward(hidden=logits, logits=logits if with_logits else None)


def bigram_setup(vocab: int = 5):
    """A random bigram target and draft over `vocab` tokens, T = 1, rounds of 3 tokens: (target logits, pair,
    sampling, run, rng)."""
    g = torch.Generator().manual_seed(5)
    target, draft = 1.5 * torch.randn(vocab, vocab, generator=g), 1.5 * torch.randn(vocab, vocab, generator=g)
    sampling = SamplingConfig(temperature=1.0)
    return (
        target,
        Pair(BigramLM(target), BigramLM(draft), None, {}),
        sampling,
        RunConfig(method="dyspec", max_new_tokens=3, sampling=sampling),
        make_rng(9),
    )


def bigram_pvalue(counts: torch.Tensor, target: torch.Tensor, last: int) -> float:
    """Chi-square p-value of counts[y1, y2] of the first two emitted tokens against the bigram target's
    p(y1 | last) p(y2 | y1), sparse cells pooled into one."""
    p = torch.softmax(target, -1)
    expected = (p[last][:, None] * p).flatten() * counts.sum()
    small = expected < 5
    obs = torch.cat([counts.flatten()[~small], counts.flatten()[small].sum()[None]])
    exp = torch.cat([expected[~small], expected[small].sum()[None]])
    return float(chisquare(obs.numpy(), exp.numpy()).pvalue)


# -- SpecDec++ rounds (test_specdecpp, test_head_ceiling) ------------------------------------------------------


def chain_round(statuses, k):
    tree = DraftTree(tuple(range(k + 1)), tuple(range(-1, k)), (1.0,) * (k + 1))
    return RoundTrace(
        index=0,
        context_len=5,
        tree=tree,
        status=("root", *statuses),
        p=(None,) * (k + 1),
        accepted_path=(),
        emitted=(),
        correction="resample",
        draft_ms=0.0,
        verify_ms=1.0,
    )


# -- recorded runs (test_record, test_inspect) -----------------------------------------------------------------

RECORD_PROMPT = [5, 9, 17, 3, 33, 8]
TREES = {"dyspec": dict(dyspec=DySpecConfig(budget=12)), "kary": {}, "sequoia": {}}


def recorded_run(pair, method, sampling, record_top, **kw):
    run = RunConfig(method=method, max_new_tokens=24, sampling=sampling, record_top=record_top, **kw)
    return generate(pair, RECORD_PROMPT, run, rng=make_rng(sampling.seed, TEST_DEVICE))


def recorded_specdecpp(pair, sampling, record_top):
    cfg = SpecDecPPConfig(0.5, 1, 5)
    head = AcceptanceHead(pair.draft.config.hidden_size, 2, rng=make_rng(0), inputs=CATALOG)
    rng = make_rng(sampling.seed, TEST_DEVICE)
    d = SpecDecPPDrafter(pair.draft, sampling, rng, head, cfg, pair.eos_ids, record=record_top > 0)
    run = RunConfig(method="specdecpp", max_new_tokens=24, sampling=sampling, specdecpp=cfg, record_top=record_top)
    return generate(pair, RECORD_PROMPT, run, drafter=d, rng=rng)


def distill_data(model, n: int = 24, new: int = 10):
    """A small `Distill` set: n three-token prompts continued `new` tokens greedily by `model`."""
    seqs = continue_batch(model, [[1, 3 + i % 50, 4 + i % 45] for i in range(n)], new, 4, {2}, 0)
    return _concat([{**s, "greedy": True, "meta": {"category": "t", "prompt": ""}} for s in seqs])
